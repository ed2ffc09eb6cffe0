//! The gate of a moderated session: whether the client's input may pass now (a moderator is
//! attached to the same debug container), and a way to hear when that changes. The relay asks it
//! for every stdin message it parsed; a message withheld is neither forwarded nor recorded, and
//! the client is told on stdout when its input is withheld and when it passes again.

use tokio::sync::watch;

/// What the client is told when its input is withheld.
pub const WITHHELD_NOTICE: &str =
    "\r\n[poddebug] This session is moderated: your input is withheld until a moderator joins.\r\n";
/// What the client is told when its input passes again.
pub const PASSING_NOTICE: &str =
    "\r\n[poddebug] A moderator is attached: your input is passed on.\r\n";

/// Whether input may pass, and a way to hear when that changes.
#[derive(Debug)]
pub struct Gate {
    tx: watch::Sender<bool>,
}

impl Gate {
    /// A gate, open or not.
    pub fn new(open: bool) -> Gate {
        Gate {
            tx: watch::channel(open).0,
        }
    }

    /// Open or close it (no change, no notice).
    pub fn set(&self, open: bool) {
        self.tx.send_if_modified(|o| {
            let changed = *o != open;
            *o = open;
            changed
        });
    }

    /// Whether input passes now.
    pub fn is_open(&self) -> bool {
        *self.tx.borrow()
    }

    /// Hears every change.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}
