//! The recent changes of the records a replica keeps a copy of (sessions, debug requests),
//! numbered by the resourceVersion of the Lease that carried them: kept in a bounded history
//! for watches that resume from a resourceVersion, as kube-apiserver's watch cache keeps its
//! window. (Running watches get the same changes from the store's broadcast channel.)

use std::collections::VecDeque;

/// Changes kept for watches that resume from a resourceVersion.
const HISTORY: usize = 4096;

/// A change with its resourceVersion.
pub(crate) trait Numbered: Clone {
    /// The resourceVersion of the change.
    fn rv(&self) -> u64;
}

/// A resourceVersion older than the changes kept: a watch resuming from it must list again
/// (410 Expired).
#[derive(Debug)]
pub struct HistoryTooOld;

/// The newest resourceVersion seen and the changes after the oldest one a watch may resume
/// from.
#[derive(Debug)]
pub(crate) struct ChangeLog<E> {
    rv: u64,
    oldest: u64,
    changes: VecDeque<E>,
}

impl<E> Default for ChangeLog<E> {
    fn default() -> Self {
        ChangeLog {
            rv: 0,
            oldest: 0,
            changes: VecDeque::new(),
        }
    }
}

impl<E: Numbered> ChangeLog<E> {
    /// The newest resourceVersion seen.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// A resourceVersion seen without a change to keep (a record that was never believed).
    pub(crate) fn saw(&mut self, rv: u64) {
        self.rv = self.rv.max(rv);
    }

    /// Keep `change`, forgetting the oldest beyond the history's bound.
    pub(crate) fn push(&mut self, change: E) {
        self.saw(change.rv());
        self.changes.push_back(change);
        while self.changes.len() > HISTORY {
            if let Some(old) = self.changes.pop_front() {
                self.oldest = self.oldest.max(old.rv());
            }
        }
    }

    /// After a (re-)list at `rv`: the history restarts there (what came before is answered
    /// by the list, not by replaying changes).
    pub(crate) fn restart(&mut self, rv: u64) {
        self.saw(rv);
        self.oldest = self.rv;
        self.changes.clear();
    }

    /// The changes after `rv`, or [`HistoryTooOld`] when they are no longer all kept.
    pub(crate) fn since(&self, rv: u64) -> Result<Vec<E>, HistoryTooOld> {
        if rv < self.oldest {
            return Err(HistoryTooOld);
        }
        Ok(self
            .changes
            .iter()
            .filter(|e| e.rv() > rv)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct C(u64);
    impl Numbered for C {
        fn rv(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_watch_resumes_from_what_is_kept_and_is_told_when_it_is_not() {
        let mut log = ChangeLog::default();
        for rv in 1..=(HISTORY as u64 + 10) {
            log.push(C(rv));
        }
        assert_eq!(log.rv(), HISTORY as u64 + 10);
        // The oldest ten were forgotten: resuming before them is too old.
        assert!(log.since(5).is_err());
        let after = log.since(HISTORY as u64 + 7).expect("kept");
        assert_eq!(
            after,
            vec![
                C(HISTORY as u64 + 8),
                C(HISTORY as u64 + 9),
                C(HISTORY as u64 + 10)
            ]
        );
        // A re-list restarts the history at its resourceVersion.
        log.restart(HISTORY as u64 + 20);
        assert!(log.since(HISTORY as u64 + 10).is_err());
        assert_eq!(log.since(HISTORY as u64 + 20).expect("kept"), vec![]);
        log.saw(3);
        assert_eq!(
            log.rv(),
            HISTORY as u64 + 20,
            "a resourceVersion never goes back"
        );
    }
}
