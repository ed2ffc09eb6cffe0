//! A kube-rs client from a kubeconfig file, for the bench binaries that run against a cluster.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for the current context of the kubeconfig at `path`; the error says what is wrong.
pub async fn client(path: &Path) -> Result<Client, String> {
    let kc =
        Kubeconfig::read_from(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("bad kubeconfig {}: {e}", path.display()))?;
    Client::try_from(cfg).map_err(|e| format!("no client: {e}"))
}

/// The command line every bench binary against a cluster shares: `--kubeconfig K` (else
/// `KUBECONFIG`), `--namespace NS` (default `default`) and `--pod POD`, as `--flag value`
/// pairs; the other pairs are the binary's own. A mistake prints the usage and exits 2.
#[derive(Debug)]
pub struct BenchCommandLine {
    usage: &'static str,
    /// The kubeconfig of the cluster.
    pub kubeconfig: PathBuf,
    /// The namespace of the pod.
    pub namespace: String,
    /// The pod the benchmark works on (`create-bench` takes a comma-separated list).
    pub pod: String,
    /// The other `--flag value` pairs, in order.
    pub other: Vec<(String, String)>,
}

impl BenchCommandLine {
    /// This process's arguments; `usage` is the binary's usage line.
    pub fn parse(usage: &'static str) -> BenchCommandLine {
        let argv: Vec<String> = std::env::args().skip(1).collect();
        let mut kubeconfig = std::env::var_os("KUBECONFIG").map(PathBuf::from);
        let mut cl = BenchCommandLine {
            usage,
            kubeconfig: PathBuf::new(),
            namespace: "default".to_owned(),
            pod: String::new(),
            other: Vec::new(),
        };
        for pair in argv.chunks(2) {
            let Some(v) = pair.get(1).cloned() else {
                cl.fail(&format!("{} needs a value", pair[0]));
            };
            match pair[0].as_str() {
                "--kubeconfig" => kubeconfig = Some(PathBuf::from(v)),
                "--namespace" => cl.namespace = v,
                "--pod" => cl.pod = v,
                k => cl.other.push((k.to_owned(), v)),
            }
        }
        cl.kubeconfig =
            kubeconfig.unwrap_or_else(|| cl.fail("--kubeconfig (or KUBECONFIG) is required"));
        if cl.pod.is_empty() {
            cl.fail("--pod is required");
        }
        cl
    }

    /// Print `problem` and the usage, and exit 2.
    pub fn fail(&self, problem: &str) -> ! {
        eprintln!("{problem}\n{}", self.usage);
        std::process::exit(2);
    }

    /// The value of `flag`, a number above 0.
    pub fn positive(&self, flag: &str, value: &str) -> usize {
        value
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| self.fail(&format!("{flag} must be a positive number")))
    }

    /// A client for the kubeconfig at `path`.
    pub async fn client(&self, path: &Path) -> Client {
        client(path).await.unwrap_or_else(|e| self.fail(&e))
    }
}
