//! Counting the records poddebug read back and did not believe.
//!
//! A record poddebug relies on (a session Lease, a termination request on one, a recording's
//! metadata) carries a MAC of the server's record key ([`crate::record_key`]). One that does not
//! verify was written or changed by someone else: its reader ignores it (or, for recordings,
//! lists it as unverified), counts it in `poddebug_untrusted_records_total{kind}` and logs a
//! warning, once per version of the object (the watch of the Leases replays every object on a
//! re-list, and a list of recordings reads every metadata object each time: neither should
//! count or log the same version again).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Object versions remembered as already counted; past this many the memory starts afresh (a
/// version may then be counted and logged once more).
const REMEMBERED: usize = 4096;

/// What kind of record did not verify. A fixed set, so the label's values are bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A Lease labelled as a session record.
    Session,
    /// A termination request on a session's Lease.
    Termination,
    /// A recording's metadata in the recording store.
    Recording,
}

impl RecordKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Session => "session",
            RecordKind::Termination => "termination",
            RecordKind::Recording => "recording",
        }
    }
}

/// Labels of the counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecordKindLabels {
    /// One of [`RecordKind::as_str`].
    pub kind: String,
}

/// The counter and the versions already counted; cheap to clone (clones count together).
#[derive(Clone, Debug, Default)]
pub struct UntrustedRecords {
    family: Family<RecordKindLabels, Counter>,
    seen: Arc<Mutex<HashSet<(RecordKind, String, String)>>>,
}

impl UntrustedRecords {
    /// The counter family, for the metrics registry.
    pub fn family(&self) -> Family<RecordKindLabels, Counter> {
        self.family.clone()
    }

    /// Record that version `version` of `object` (a record of `kind`) did not verify, because
    /// `why`: counted and logged the first time this version is seen. Whether it was the first.
    pub fn note(&self, kind: RecordKind, object: &str, version: &str, why: &str) -> bool {
        let first = match self.seen.lock() {
            Ok(mut seen) => {
                if seen.len() >= REMEMBERED {
                    seen.clear();
                }
                seen.insert((kind, object.to_owned(), version.to_owned()))
            }
            Err(_) => true,
        };
        if first {
            self.family
                .get_or_create(&RecordKindLabels {
                    kind: kind.as_str().to_owned(),
                })
                .inc();
            tracing::warn!(
                kind = kind.as_str(),
                object,
                version,
                why,
                "a record that poddebug did not write (its MAC does not verify) is ignored"
            );
        }
        first
    }

    /// How many records of `kind` were counted so far.
    pub fn get(&self, kind: RecordKind) -> u64 {
        self.family
            .get_or_create(&RecordKindLabels {
                kind: kind.as_str().to_owned(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_is_counted_once_per_kind() {
        let u = UntrustedRecords::default();
        assert!(u.note(RecordKind::Session, "s1", "7", "no MAC"));
        assert!(
            !u.note(RecordKind::Session, "s1", "7", "no MAC"),
            "a re-list"
        );
        assert!(
            u.note(RecordKind::Session, "s1", "8", "no MAC"),
            "a new version"
        );
        assert!(u.note(RecordKind::Termination, "s1", "8", "no MAC"));
        assert_eq!(u.get(RecordKind::Session), 2);
        assert_eq!(u.get(RecordKind::Termination), 1);
        assert_eq!(u.get(RecordKind::Recording), 0);
        let clone = u.clone();
        clone.note(RecordKind::Recording, "ns/pod/id", "etag", "wrong MAC");
        assert_eq!(u.get(RecordKind::Recording), 1, "clones count together");
    }
}
