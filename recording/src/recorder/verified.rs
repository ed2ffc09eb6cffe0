//! The verdicts of recordings already verified, so that reading one recording again does not
//! hash all its parts again (`status.verification` on `GET …/debugrecordings/ID`).
//!
//! A verdict is reused only while the store still shows the very objects it was reached on:
//! the same signed statement in the metadata and, for every part, the same size, ETag and
//! modification time as the store lists them. Any write to a part changes its listing (S3:
//! its ETag, the MD5 of a plain upload, and its time; a directory: its size or time), so a
//! recording edited after it was verified is hashed again at its next read. Recordings still
//! being written are never cached. A verdict also expires after [`MAX_AGE`], which bounds how
//! long a change that kept every listed attribute (a file's time set back on a directory
//! store) could go unseen; and at most [`CAPACITY`] verdicts are kept, the oldest going first.
//!
//! Repeating a read of one recording thus costs one listing and one metadata read, not the
//! recording's size: what a user with `get` can make a replica do is bounded by the number of
//! recordings, not by how often they ask. Hashing is counted by outcome
//! (`poddebug_recording_verifications_total{outcome="hashed"|"reused"}`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use poddebug_types::evidence::VerificationStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::store::RecordingKey;

/// Most verdicts kept.
pub const CAPACITY: usize = 4096;
/// Longest a verdict is reused.
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// What a verdict was reached on: the keys trusted, the statement's signature, and each part as
/// listed (number, size, ETag, modification time in microseconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// The ids of the keys trusted ([`crate::keys::Keys::trusted_ids`]): a verdict reached
    /// with other keys (before a rotation) is not reused.
    pub keys: String,
    /// The signature of the metadata's statement.
    pub signature: String,
    /// The parts as the store listed them, in order.
    pub parts: Vec<(u32, u64, Option<String>, i64)>,
}

/// Labels of the verification counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `hashed` (every part read) or `reused` (an earlier verdict).
    pub outcome: &'static str,
}

#[derive(Debug)]
struct Entry {
    fingerprint: Fingerprint,
    verdict: VerificationStatus,
    at: Instant,
}

/// The verdicts (module docs). Cheap to clone; clones share.
#[derive(Clone, Debug, Default)]
pub struct Verified {
    entries: Arc<Mutex<HashMap<RecordingKey, Entry>>>,
    counts: Family<OutcomeLabels, Counter>,
}

impl Verified {
    /// The counter of verifications by outcome, to serve as a metric.
    pub fn counts(&self) -> Family<OutcomeLabels, Counter> {
        self.counts.clone()
    }

    /// The verdict reached on `fingerprint` for `key`, if one is kept and fresh; counted.
    pub fn reuse(
        &self,
        key: &RecordingKey,
        fingerprint: &Fingerprint,
    ) -> Option<VerificationStatus> {
        let found = self.entries.lock().ok().and_then(|e| {
            e.get(key)
                .filter(|x| x.fingerprint == *fingerprint && x.at.elapsed() < MAX_AGE)
                .map(|x| x.verdict.clone())
        });
        let outcome = if found.is_some() { "reused" } else { "hashed" };
        self.counts.get_or_create(&OutcomeLabels { outcome }).inc();
        found
    }

    /// Keep `verdict`, reached on `fingerprint`, for `key`.
    pub fn keep(&self, key: RecordingKey, fingerprint: Fingerprint, verdict: VerificationStatus) {
        let Ok(mut e) = self.entries.lock() else {
            return;
        };
        if e.len() >= CAPACITY
            && !e.contains_key(&key)
            && let Some(oldest) = e.iter().min_by_key(|(_, x)| x.at).map(|(k, _)| k.clone())
        {
            e.remove(&oldest);
        }
        e.insert(
            key,
            Entry {
                fingerprint,
                verdict,
                at: Instant::now(),
            },
        );
    }

    /// How many verifications ended with `outcome` (tests).
    pub fn count(&self, outcome: &'static str) -> u64 {
        self.counts.get_or_create(&OutcomeLabels { outcome }).get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_types::evidence::Verification;

    fn key(n: usize) -> RecordingKey {
        ("ns".into(), "pod".into(), format!("id{n}"))
    }

    fn print(etag: &str) -> Fingerprint {
        print_with("k1", etag)
    }

    fn print_with(keys: &str, etag: &str) -> Fingerprint {
        Fingerprint {
            keys: keys.into(),
            signature: "sig".into(),
            parts: vec![(0, 10, Some(etag.into()), 1)],
        }
    }

    fn verdict() -> VerificationStatus {
        VerificationStatus {
            result: Verification::Verified,
            ..Default::default()
        }
    }

    #[test]
    fn a_verdict_is_reused_only_on_the_same_objects() {
        let v = Verified::default();
        assert!(v.reuse(&key(0), &print("a")).is_none());
        v.keep(key(0), print("a"), verdict());
        assert_eq!(v.reuse(&key(0), &print("a")), Some(verdict()));
        // A part rewritten: another ETag.
        assert!(v.reuse(&key(0), &print("b")).is_none());
        // Another recording.
        assert!(v.reuse(&key(1), &print("a")).is_none());
        // Other keys trusted (a rotation read since).
        assert!(v.reuse(&key(0), &print_with("k2", "a")).is_none());
        assert_eq!((v.count("reused"), v.count("hashed")), (1, 4));
    }

    #[test]
    fn at_most_capacity_verdicts_are_kept_the_oldest_going_first() {
        let v = Verified::default();
        for n in 0..=CAPACITY {
            v.keep(key(n), print("a"), verdict());
        }
        assert_eq!(v.entries.lock().unwrap().len(), CAPACITY);
        assert!(v.reuse(&key(0), &print("a")).is_none());
        assert!(v.reuse(&key(CAPACITY), &print("a")).is_some());
    }
}
