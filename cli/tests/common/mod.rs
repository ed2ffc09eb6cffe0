//! The plugin on a pseudo-terminal, shared by the fake-cluster and live suites.
#![allow(dead_code)] // each suite uses part of it

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::termios::LocalFlags;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

/// Bound of every wait here (a guard against hanging, never a measured time).
pub const GUARD: Duration = Duration::from_secs(60);

/// The plugin running on a pseudo-terminal.
pub struct Terminal {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    output: Arc<Mutex<Vec<u8>>>,
    /// Set once everything the plugin wrote has been read (the pty's end).
    drained: Arc<AtomicBool>,
}

impl Terminal {
    /// Start the plugin with `args` (and `KUBECONFIG=kubeconfig` when given) on an 80x24 pty.
    pub fn spawn(kubeconfig: Option<&Path>, args: &[&str]) -> Terminal {
        Terminal::start(kubeconfig, None, args)
    }

    /// Start the plugin with `args` and `PATH=path` (the rest of our environment kept).
    pub fn spawn_with_path(args: &[&str], path: &str) -> Terminal {
        Terminal::start(None, Some(path), args)
    }

    fn start(kubeconfig: Option<&Path>, path: Option<&str>, args: &[&str]) -> Terminal {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_kubectl-poddebug"));
        cmd.args(args);
        if let Some(kc) = kubeconfig {
            cmd.env("KUBECONFIG", kc);
        }
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        cmd.env("TERM", "xterm");
        let child = pty.slave.spawn_command(cmd).expect("spawn the plugin");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("reader");
        let writer = pty.master.take_writer().expect("writer");
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        let drained = Arc::new(AtomicBool::new(false));
        let done = drained.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
            }
            done.store(true, Ordering::Release);
        });
        Terminal {
            master: pty.master,
            writer,
            child,
            output,
            drained,
        }
    }

    /// Everything the terminal showed.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Wait until the terminal shows `needle`.
    pub fn expect(&self, needle: &str) {
        let deadline = Instant::now() + GUARD;
        while Instant::now() < deadline {
            if self.text().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{needle:?} never shown; the terminal shows:\n{}",
            self.text()
        );
    }

    /// Type on the keyboard.
    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("type");
        self.writer.flush().expect("flush");
    }

    /// Send the plugin SIGTERM.
    pub fn terminate(&self) {
        if let Some(pid) = self.child.process_id()
            && let Ok(pid) = i32::try_from(pid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }

    /// Resize the terminal.
    pub fn resize(&self, cols: u16, rows: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize");
    }

    /// The plugin's exit code once it ended, and everything it wrote has been read (what it
    /// printed just before it exited may still be in the pty when it exits).
    pub fn exit_code(&mut self) -> u32 {
        let deadline = Instant::now() + GUARD;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                while !self.drained.load(Ordering::Acquire) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return status.exit_code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!(
            "the plugin did not end; the terminal shows:\n{}",
            self.text()
        );
    }

    /// Whether the terminal is back in cooked mode (line editing, echo).
    pub fn cooked(&self) -> bool {
        self.master.get_termios().is_some_and(|t| {
            t.local_flags
                .contains(LocalFlags::ICANON | LocalFlags::ECHO)
        })
    }
}
