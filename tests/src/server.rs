//! `PodDebugServer`: the real `poddebug-apiserver` binary started against a [`FakeKube`], with
//! a serving certificate, the front-proxy and client CAs of a [`TestPki`], captured log lines,
//! a bounded wait for `/readyz`, SIGTERM, and SIGKILL on drop.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::client::{TestClient, TestClientBuilder};
use crate::fake::{FakeKube, PODDEBUG_TOKEN};
use crate::pki::{Ca, CertKey, FRONT_PROXY_CLIENT_CN, TestPki};

/// How long `start` waits for `/readyz`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How many ports `start` tries when the one it found free is taken before the server binds.
const START_ATTEMPTS: u32 = 3;

/// A running `poddebug-apiserver`.
pub struct PodDebugServer {
    child: Child,
    pid: u32,
    port: u16,
    logs: Arc<Mutex<Vec<String>>>,
    args: Vec<String>,
    cluster_ca_pem: String,
    pki: Option<TestPki>,
    exit: Option<ExitStatus>,
}

impl std::fmt::Debug for PodDebugServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodDebugServer")
            .field("pid", &self.pid)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// A free TCP port on 127.0.0.1, bound and released for a server the test starts next.
///
/// It is taken below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), where the
/// local ports of outgoing connections come from: a port handed out by `bind(:0)` is one of
/// those, and a test's own client connection can take it again before the server binds it.
/// Ports are tried in an order that differs per process and per call, so concurrent test
/// binaries rarely try the same one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOW: u16 = 10000;
    if ephemeral_low > LOW + 1000 {
        let span = u64::from(ephemeral_low - LOW);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::from(d.subsec_nanos()))
            .unwrap_or(0);
        let seed = u64::from(std::process::id())
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(7919))
            .wrapping_add(nanos);
        for i in 0..64u64 {
            let port = LOW + (seed.wrapping_add(i.wrapping_mul(104_729)) % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn capture(
    stream: impl AsyncRead + Unpin + Send + 'static,
    logs: Arc<Mutex<Vec<String>>>,
    tag: &'static str,
) {
    let echo = std::env::var_os("PODDEBUG_TEST_ECHO_LOGS").is_some();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if echo {
                eprintln!("[poddebug {tag}] {line}");
            }
            logs.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    });
}

impl PodDebugServer {
    /// Where the binary is: `$PODDEBUG_APISERVER_BIN`, else `target/<profile>/poddebug-apiserver`
    /// next to the test executable. Panics with a hint when it is missing.
    pub fn binary() -> PathBuf {
        if let Some(p) = std::env::var_os("PODDEBUG_APISERVER_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/<test> → target/<profile>/poddebug-apiserver
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("target/<profile> directory");
        let bin = profile_dir.join(format!(
            "poddebug-apiserver{}",
            std::env::consts::EXE_SUFFIX
        ));
        assert!(
            bin.exists(),
            "{} not found: build it with cargo build -p poddebug-apiserver (or set PODDEBUG_APISERVER_BIN)",
            bin.display()
        );
        bin
    }

    /// The standard flags for a server on `port` against `fake`, with `serving` as its
    /// certificate and `pki`'s front-proxy and client CAs.
    pub fn standard_args(
        fake: &FakeKube,
        pki: &TestPki,
        serving: &CertKey,
        port: u16,
    ) -> Vec<String> {
        let kubeconfig = fake.write_kubeconfig(PODDEBUG_TOKEN);
        vec![
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", serving.cert_path.display()),
            format!("--tls-private-key-file={}", serving.key_path.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!(
                "--requestheader-client-ca-file={}",
                pki.ca_path(Ca::FrontProxy).display()
            ),
            format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT_CN}"),
            "--requestheader-username-headers=X-Remote-User".to_owned(),
            "--requestheader-group-headers=X-Remote-Group".to_owned(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
            "--requestheader-uid-headers=X-Remote-Uid".to_owned(),
            format!("--client-ca-file={}", pki.ca_path(Ca::Client).display()),
            "--authentication-skip-lookup".to_owned(),
            "--log-format=json".to_owned(),
            "--shutdown-grace-period=5s".to_owned(),
        ]
    }

    /// Starts the server with the standard flags followed by `extra_args` and waits (bounded)
    /// until `GET /readyz` answers 200. Panics with the captured logs if it does not.
    pub async fn start(fake: &FakeKube, pki: &TestPki, extra_args: &[&str]) -> PodDebugServer {
        let binary = Self::binary().display().to_string();
        Self::start_command(&[binary], fake, pki, extra_args).await
    }

    /// [`PodDebugServer::start`] with another program (`command[0]`, then its own leading
    /// arguments): for testing this harness, or a wrapper such as a debugger.
    pub async fn start_command(
        command: &[String],
        fake: &FakeKube,
        pki: &TestPki,
        extra_args: &[&str],
    ) -> PodDebugServer {
        let serving = pki.localhost_serving_cert();
        // A port found free can be taken by another process (any outgoing connection's local
        // port) before the server binds it; such a start is tried again on another port.
        let mut attempt = 1;
        loop {
            let port = free_port();
            let mut args = Self::standard_args(fake, pki, &serving, port);
            args.extend(extra_args.iter().map(|a| (*a).to_owned()));
            let mut server = Self::spawn_command(command, &args);
            server.port = port;
            server.cluster_ca_pem = pki.cluster_ca_pem().to_owned();
            server.pki = Some(pki.clone());
            match server.wait_ready(READY_TIMEOUT).await {
                Ok(()) => return server,
                Err(_) if attempt < START_ATTEMPTS && server.lost_its_port().await => attempt += 1,
                Err(e) => panic!(
                    "poddebug-apiserver did not become ready: {e}\nargs: {:?}\nlogs:\n{}",
                    server.args,
                    server.logs_text()
                ),
            }
        }
    }

    /// Whether the process ended because its secure port was already taken.
    async fn lost_its_port(&mut self) -> bool {
        // The last lines may still be on their way through the pipe when the exit is seen.
        self.try_exit_status().is_some()
            && self
                .wait_for_log(
                    &format!("binding 127.0.0.1:{}", self.port),
                    Duration::from_secs(2),
                )
                .await
    }

    /// Spawns the binary with exactly `args` and does not wait for anything. The port is taken
    /// from a `--secure-port=` argument if there is one.
    pub fn spawn_raw(args: &[String]) -> PodDebugServer {
        Self::spawn_command(&[Self::binary().display().to_string()], args)
    }

    /// Spawns `command` (program and leading arguments) followed by `args`.
    pub fn spawn_command(command: &[String], args: &[String]) -> PodDebugServer {
        let (program, leading) = command.split_first().expect("a program to run");
        let mut child = Command::new(program)
            .args(leading)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let logs = Arc::new(Mutex::new(Vec::new()));
        if let Some(out) = child.stdout.take() {
            capture(out, logs.clone(), "stdout");
        }
        if let Some(err) = child.stderr.take() {
            capture(err, logs.clone(), "stderr");
        }
        let port = args
            .iter()
            .rev()
            .find_map(|a| {
                a.strip_prefix("--secure-port=")
                    .and_then(|p| p.parse().ok())
            })
            .unwrap_or(0);
        PodDebugServer {
            pid: child.id().unwrap_or(0),
            child,
            port,
            logs,
            args: args.to_vec(),
            cluster_ca_pem: String::new(),
            pki: None,
            exit: None,
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The secure port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The arguments it was started with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Every line written to stdout and stderr so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The lines joined with newlines.
    pub fn logs_text(&self) -> String {
        self.logs().join("\n")
    }

    /// Waits (bounded) until a log line contains `needle`.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.logs().iter().any(|l| l.contains(needle)) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// A client builder that trusts the server's CA (no identity yet).
    pub fn client_builder(&self) -> TestClientBuilder {
        TestClient::builder(&self.url()).ca_pem(&self.cluster_ca_pem)
    }

    /// Writes a kubeconfig into `dir` that talks to this server directly as `user` in `groups`
    /// with a client-CA certificate (namespace `namespace`), for the real kubectl.
    pub fn write_kubeconfig(
        &self,
        dir: &std::path::Path,
        user: &str,
        groups: &[&str],
        namespace: &str,
    ) -> PathBuf {
        use base64::Engine;
        let pki = self
            .pki
            .as_ref()
            .expect("write_kubeconfig needs a server made by start()");
        let cert = pki.client_cert(Ca::Client, user, groups);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let cfg = serde_json::json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "poddebug",
            "clusters": [{"name": "poddebug", "cluster": {"server": self.url(), "certificate-authority-data": b64(&self.cluster_ca_pem)}}],
            "users": [{"name": user, "user": {"client-certificate-data": b64(&cert.cert_pem), "client-key-data": b64(&cert.key_pem)}}],
            "contexts": [{"name": "poddebug", "context": {"cluster": "poddebug", "user": user, "namespace": namespace}}],
        });
        let path = dir.join(format!("kubeconfig-{user}.json"));
        std::fs::write(&path, cfg.to_string()).expect("write kubeconfig");
        path
    }

    /// A client that authenticates as the aggregator forwarding for `user` in `groups`.
    pub fn front_proxy_client(&self, user: &str, groups: &[&str]) -> TestClient {
        let pki = self
            .pki
            .as_ref()
            .expect("front_proxy_client needs a server made by start()");
        self.client_builder()
            .front_proxy(pki, user, groups, &[])
            .build()
    }

    /// Polls `GET /readyz` (no client certificate) until it answers 200.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let client = self.client_builder().build();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = self.try_exit_status() {
                return Err(format!("exited with {status}"));
            }
            match client
                .request(Method::GET, "/readyz", &[], bytes::Bytes::new())
                .await
            {
                Ok((StatusCode::OK, _, _)) => return Ok(()),
                Ok((code, _, body)) => last = format!("{code}: {}", String::from_utf8_lossy(&body)),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("not ready after {timeout:?}; last answer: {last}"))
    }

    /// The exit status if the process has ended.
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Waits (bounded) for the process to end.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(timeout, self.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        self.exit
    }

    /// Sends SIGTERM (through `kill -TERM <pid>`) and waits up to 20 s for the exit.
    pub async fn terminate(&mut self) -> Option<ExitStatus> {
        if self.try_exit_status().is_none() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.pid.to_string())
                .status()
                .await;
        }
        self.wait_exit(Duration::from_secs(20)).await
    }
}
