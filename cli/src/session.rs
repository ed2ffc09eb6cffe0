//! An interactive attach session on the local terminal: raw mode (restored on every way out),
//! the terminal's size and its changes, the detach sequence, Ctrl-C.
//!
//! As with `kubectl attach -it`, Ctrl-C in a TTY session is a byte for the container (the
//! terminal is raw). To leave the container running, type Ctrl-P Ctrl-Q (docker's detach
//! sequence). Without a TTY, Ctrl-C detaches. SIGTERM and SIGHUP detach too, so the terminal is
//! restored before the plugin goes.

use std::io::IsTerminal;

use poddebug_client::{AttachOutcome, AttachParams, DebugContainers, Detacher, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Ctrl-P, then Ctrl-Q.
const DETACH_SEQUENCE: [u8; 2] = [0x10, 0x11];

/// Raw mode on the local terminal while it lives.
struct RawMode;

impl RawMode {
    fn enter() -> Option<RawMode> {
        crossterm::terminal::enable_raw_mode()
            .ok()
            .map(|()| RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Copy a container stream to ours, flushing every chunk (a shell's prompt has no newline).
async fn relay(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
    let mut buf = vec![0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() || to.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Finds the detach sequence in typed input, across reads; what is not part of it goes on.
#[derive(Default)]
struct DetachScanner {
    pending_prefix: bool,
}

impl DetachScanner {
    /// The bytes to forward, and whether the sequence was typed.
    fn scan(&mut self, input: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(input.len() + 1);
        for &b in input {
            if self.pending_prefix {
                self.pending_prefix = false;
                if b == DETACH_SEQUENCE[1] {
                    return (out, true);
                }
                out.push(DETACH_SEQUENCE[0]);
            }
            if b == DETACH_SEQUENCE[0] {
                self.pending_prefix = true;
            } else {
                out.push(b);
            }
        }
        (out, false)
    }
}

/// Our stdin to the container's, watching for the detach sequence with a TTY.
async fn feed_stdin(
    mut to: poddebug_client::DebugStdin,
    tty: bool,
    detacher: Detacher,
) -> std::io::Result<()> {
    let mut input = tokio::io::stdin();
    let mut buf = vec![0u8; 8192];
    let mut scanner = DetachScanner::default();
    loop {
        let n = input.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let (data, detach) = if tty {
            scanner.scan(&buf[..n])
        } else {
            (buf[..n].to_vec(), false)
        };
        if !data.is_empty() {
            to.write_all(&data).await?;
            to.flush().await?;
        }
        if detach {
            detacher.detach();
            return Ok(());
        }
    }
    // End of our input: close the container's.
    to.shutdown().await
}

/// Send the terminal's size now and whenever it changes.
async fn follow_size(mut resizer: poddebug_client::Resizer) {
    let mut last = None;
    let mut changes = SizeChanges::new();
    loop {
        if let Ok(size) = crossterm::terminal::size()
            && last != Some(size)
        {
            if resizer.resize(size.0, size.1).await.is_err() {
                return;
            }
            last = Some(size);
        }
        if !changes.next().await {
            return;
        }
    }
}

/// When to look at the terminal's size again: on `SIGWINCH` on Unix.
#[cfg(unix)]
struct SizeChanges(Option<tokio::signal::unix::Signal>);

#[cfg(unix)]
impl SizeChanges {
    fn new() -> Self {
        SizeChanges(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok(),
        )
    }

    /// Wait for the next change; false when none can come.
    async fn next(&mut self) -> bool {
        match &mut self.0 {
            Some(s) => s.recv().await.is_some(),
            None => false,
        }
    }
}

/// When to look at the terminal's size again: elsewhere (Windows) the console has no signal
/// for it, so the size crossterm reads is compared every [`SIZE_POLL`].
#[cfg(not(unix))]
struct SizeChanges;

#[cfg(not(unix))]
impl SizeChanges {
    fn new() -> Self {
        SizeChanges
    }

    async fn next(&mut self) -> bool {
        tokio::time::sleep(SIZE_POLL).await;
        true
    }
}

/// See [`SizeChanges`].
#[cfg(not(unix))]
const SIZE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Being told to go (a terminal that closed, `kill`; the console closing on Windows) detaches,
/// so that raw mode is undone on the way out.
fn detach_when_told_to_go(
    detacher: &poddebug_client::Detacher,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut helpers = Vec::new();
    #[cfg(unix)]
    for kind in [
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::hangup(),
    ] {
        if let Ok(mut sig) = tokio::signal::unix::signal(kind) {
            let d = detacher.clone();
            helpers.push(tokio::spawn(async move {
                if sig.recv().await.is_some() {
                    d.detach();
                }
            }));
        }
    }
    #[cfg(windows)]
    if let Ok(mut sig) = tokio::signal::windows::ctrl_close() {
        let d = detacher.clone();
        helpers.push(tokio::spawn(async move {
            if sig.recv().await.is_some() {
                d.detach();
            }
        }));
    }
    helpers
}

/// Attach to debug container `name` and relay until the session ends; what became of it.
pub async fn attach(
    api: &DebugContainers,
    pod: &str,
    name: &str,
    stdin: bool,
    tty: bool,
    quiet: bool,
) -> Result<AttachOutcome> {
    attach_as(api, pod, name, stdin, tty, quiet, None).await
}

/// [`attach`] taking part as `mode` in another user's session (`None`: as the server decides).
pub async fn attach_as(
    api: &DebugContainers,
    pod: &str,
    name: &str,
    stdin: bool,
    tty: bool,
    quiet: bool,
    mode: Option<poddebug_client::SessionMode>,
) -> Result<AttachOutcome> {
    let params = AttachParams {
        mode,
        ..attach_params(stdin, tty)
    };
    let session = api.attach(pod, name, &params).await?;
    relay_session(session, stdin, tty, quiet).await
}

/// The parameters of an attach with the local terminal's streams: stdout always, stderr apart
/// unless there is a TTY.
pub fn attach_params(stdin: bool, tty: bool) -> AttachParams {
    AttachParams {
        stdin,
        stdout: true,
        stderr: !tty,
        tty,
        ..Default::default()
    }
}

/// The end of a session on a container of a pod the plugin had the server make (a copy, a node
/// debug pod), which stays until deleted: the shell's exit code, or that it still runs; and
/// how to delete the pod.
pub async fn finish_made_pod(
    attached: Result<poddebug_client::AttachedDebugContainer>,
    stdin: bool,
    tty: bool,
    quiet: bool,
    still_running: &str,
    delete_hint: &str,
) -> std::process::ExitCode {
    let outcome = match attached {
        Ok(s) => relay_session(s, stdin, tty, quiet).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(AttachOutcome::Exited { exit_code, .. }) => {
            if !quiet {
                eprintln!("{delete_hint}");
            }
            crate::exit_with(exit_code)
        }
        Ok(AttachOutcome::Detached) => {
            eprintln!("Session ended, {still_running} is still running.");
            eprintln!("{delete_hint}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => crate::fail(&e),
    }
}

/// Relay an attached session on the local terminal until it ends; what became of it.
pub async fn relay_session(
    mut session: poddebug_client::AttachedDebugContainer,
    stdin: bool,
    tty: bool,
    quiet: bool,
) -> Result<AttachOutcome> {
    let detacher = session.detacher();
    let local_tty = tty && stdin && std::io::stdin().is_terminal();
    if tty && !quiet {
        eprintln!("If you don't see a command prompt, try pressing enter.");
    }
    if !quiet {
        if local_tty {
            eprintln!("Detach with Ctrl-P Ctrl-Q: the container keeps running.");
        } else if stdin && std::io::stdin().is_terminal() {
            eprintln!("Detach with Ctrl-C: the container keeps running.");
        }
    }
    // Entered after the line above; left (by drop) on every way out of this function.
    let raw = local_tty.then(RawMode::enter).flatten();

    let mut outputs = Vec::new();
    if let Some(out) = session.stdout() {
        outputs.push(tokio::spawn(relay(out, tokio::io::stdout())));
    }
    if let Some(err) = session.stderr() {
        outputs.push(tokio::spawn(relay(err, tokio::io::stderr())));
    }
    let mut helpers = Vec::new();
    if let Some(resizer) = session.resizer()
        && local_tty
    {
        helpers.push(tokio::spawn(follow_size(resizer)));
    }
    if let Some(input) = session.stdin() {
        let d = detacher.clone();
        helpers.push(tokio::spawn(async move {
            let _ = feed_stdin(input, local_tty, d).await;
        }));
    }
    if !local_tty {
        let d = detacher.clone();
        helpers.push(tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                d.detach();
            }
        }));
    }

    helpers.extend(detach_when_told_to_go(&detacher));

    let outcome = session.join().await;
    for o in outputs {
        let _ = o.await;
    }
    for h in helpers {
        h.abort();
    }
    drop(raw);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_sequence_across_reads() {
        let mut s = DetachScanner::default();
        assert_eq!(s.scan(b"ls\r"), (b"ls\r".to_vec(), false));
        assert_eq!(s.scan(&[b'a', 0x10]), (b"a".to_vec(), false));
        assert_eq!(s.scan(&[0x11, b'x']), (Vec::new(), true));
        let mut s = DetachScanner::default();
        // Ctrl-P followed by anything else is passed on, both bytes.
        assert_eq!(s.scan(&[0x10, b'p']), (vec![0x10, b'p'], false));
        assert_eq!(s.scan(&[0x03]), (vec![0x03], false), "Ctrl-C goes through");
    }
}
