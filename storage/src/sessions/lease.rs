//! A session's record as a Lease, and the MACs that make it one poddebug wrote.
//!
//! The Lease of session `ID` (in the server's namespace) holds the record as JSON in the
//! annotation [`RECORD_ANNOTATION`] and, in [`MAC_ANNOTATION`], the record key's MAC
//! ([`Purpose::Session`]) over:
//! - the Lease's namespace, name and uid: a record copied to another Lease, or replayed into a
//!   Lease made anew under the same name after the session ended, does not verify;
//! - `holderIdentity`, `leaseDurationSeconds` and `renewTime` (to the microsecond, as
//!   kube-apiserver keeps it): how long the record holds cannot be changed, so a copy of an old
//!   record never looks live again;
//! - the record's annotation, byte for byte.
//!
//! A Lease's uid exists only once it is created, so the create carries a MAC over an empty uid
//! and the replica confirms the record at once with its first renewal, which binds the MAC to
//! the uid. Until then the record is [`Read::Unconfirmed`] and nobody relies on it (it opens no
//! gate and counts toward no limit); a copy of a create is never more than that. Each renewal
//! writes the record, the holder, the duration, the renewal time and a new MAC together, so it
//! also undoes any change someone else made to them.
//!
//! A termination request ([`TERMINATE_ANNOTATION`], written by the replica that served the
//! `DELETE`) carries its own MAC ([`TERMINATE_MAC_ANNOTATION`], [`Purpose::Session`] over a
//! different content) over the Lease's namespace, name, uid and the request: only a request a
//! replica accepted from an authorized user ends a session.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use poddebug_types::{GROUP, SessionMode};
use serde::{Deserialize, Serialize};

use super::label_value;
use crate::record_key::{Purpose, RecordKey};

/// The label every session Lease carries (its value is the record's format version).
pub const SESSION_LABEL: &str = "poddebug.dev/session";
/// The annotation holding the record (JSON).
pub const RECORD_ANNOTATION: &str = "poddebug.dev/session";
/// The annotation holding the record's MAC.
pub const MAC_ANNOTATION: &str = "poddebug.dev/session-mac";
/// The annotation a termination request writes (JSON: who, when).
pub const TERMINATE_ANNOTATION: &str = "poddebug.dev/terminate";
/// The annotation holding the termination request's MAC.
pub const TERMINATE_MAC_ANNOTATION: &str = "poddebug.dev/terminate-mac";

/// Versions of what the MACs cover (a new layout gets a new one).
const SESSION_CONTENT: &str = "session/v1";
const TERMINATE_CONTENT: &str = "terminate/v1";

/// What the relaying replica records of one attach stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    /// The session id (the Lease's name).
    pub id: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The debug container as the client named it.
    pub container: String,
    /// The ephemeral container's own name: sessions on the same one share participants.
    pub ec_name: String,
    /// Who opened the stream.
    pub user: String,
    /// Who made the debug container (recorded at its create; `None` when not recorded): their
    /// input is held in a moderated session, so they never count as its moderator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// Their groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// How they take part.
    pub mode: SessionMode,
    /// The stream protocol.
    pub protocol: String,
    /// A terminal.
    #[serde(default)]
    pub tty: bool,
    /// The stream sends input.
    #[serde(default)]
    pub stdin: bool,
    /// The recording, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_id: Option<String>,
    /// The container's profile is moderated.
    #[serde(default)]
    pub moderated: bool,
    /// The relaying replica.
    pub replica: String,
    /// When the stream was opened (RFC 3339).
    pub started: String,
    /// The reason, ticket, debug request and approvers of the debug container.
    #[serde(
        default,
        skip_serializing_if = "poddebug_types::request::Justification::is_empty"
    )]
    pub justification: poddebug_types::request::Justification,
}

/// A termination request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Termination {
    /// Who asked.
    pub by: String,
    /// When (RFC 3339).
    pub at: String,
}

/// The debug container a session is attached to: sessions on the same one are its
/// participants.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerKey {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The ephemeral container's own name.
    pub ec_name: String,
}

/// A session as the cluster holds it (its record verified).
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSession {
    /// The record.
    pub record: SessionRecord,
    /// When it was last renewed.
    pub renewed: jiff::Timestamp,
    /// How long a renewal holds.
    pub lease_duration: Duration,
    /// The termination request, once there is one (and it verified).
    pub terminate: Option<Termination>,
    /// The Lease's resourceVersion.
    pub resource_version: u64,
    /// The Lease's uid.
    pub uid: String,
}

impl LiveSession {
    /// Whether the record is still held at `now` (renewed within its lease duration).
    pub fn is_live(&self, now: jiff::Timestamp) -> bool {
        let Ok(span) = jiff::SignedDuration::try_from(self.lease_duration) else {
            return false;
        };
        self.renewed
            .checked_add(span)
            .is_ok_and(|until| until >= now)
    }

    /// Same debug container as `other`.
    pub fn same_container(&self, other: &LiveSession) -> bool {
        let (a, b) = (&self.record, &other.record);
        a.namespace == b.namespace && a.pod == b.pod && a.ec_name == b.ec_name
    }

    /// The debug container it is attached to.
    pub fn container(&self) -> ContainerKey {
        ContainerKey::of(&self.record)
    }
}

impl ContainerKey {
    /// The debug container of `record`.
    pub fn of(record: &SessionRecord) -> ContainerKey {
        ContainerKey {
            namespace: record.namespace.clone(),
            pod: record.pod.clone(),
            ec_name: record.ec_name.clone(),
        }
    }
}

/// What a Lease labelled as a session record turned out to be.
#[derive(Debug)]
pub(crate) enum Read {
    /// A record poddebug wrote and confirmed; with whether a termination request on it did not
    /// verify (it was ignored).
    Trusted(Box<LiveSession>, Option<&'static str>),
    /// A record as poddebug creates it, before its first renewal binds it to the Lease's uid:
    /// relied on by nobody (only its expiry is: a replica that died before confirming it
    /// leaves it for the others to delete).
    Unconfirmed(Box<LiveSession>),
    /// Not written by poddebug, or changed since (why).
    Untrusted(&'static str),
}

/// A timestamp as kube-apiserver keeps a `MicroTime`: to the microsecond.
pub(crate) fn to_micros(t: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
}

/// What a session Lease's MAC covers (module docs).
#[allow(clippy::too_many_arguments)]
fn session_content(
    namespace: &str,
    name: &str,
    uid: &str,
    holder: &str,
    duration_seconds: i64,
    renewed: jiff::Timestamp,
    record: &str,
) -> Vec<u8> {
    serde_json::to_vec(&(
        SESSION_CONTENT,
        namespace,
        name,
        uid,
        holder,
        duration_seconds,
        renewed.as_microsecond(),
        record,
    ))
    .unwrap_or_default()
}

fn termination_content(namespace: &str, name: &str, uid: &str, termination: &str) -> Vec<u8> {
    serde_json::to_vec(&(TERMINATE_CONTENT, namespace, name, uid, termination)).unwrap_or_default()
}

/// The fields of a session Lease that its MAC covers, as written.
#[derive(Clone, Debug)]
pub(crate) struct Signed<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub holder: &'a str,
    pub duration_seconds: i64,
    pub renewed: jiff::Timestamp,
    pub record: &'a str,
}

impl Signed<'_> {
    pub(crate) fn mac(&self, key: &RecordKey) -> String {
        key.sign(Purpose::Session, &self.content())
    }

    fn content(&self) -> Vec<u8> {
        session_content(
            self.namespace,
            self.name,
            self.uid,
            self.holder,
            self.duration_seconds,
            self.renewed,
            self.record,
        )
    }
}

/// The MAC of a termination request `termination` (its annotation's JSON) on Lease
/// `namespace/name` of uid `uid`.
pub(crate) fn termination_mac(
    key: &RecordKey,
    namespace: &str,
    name: &str,
    uid: &str,
    termination: &str,
) -> String {
    key.sign(
        Purpose::Session,
        &termination_content(namespace, name, uid, termination),
    )
}

fn rv_of(lease: &Lease) -> u64 {
    lease
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Read a Lease labelled as a session record, trusting it only when its MAC verifies with
/// `key` (module docs).
pub(crate) fn read(lease: &Lease, key: &RecordKey) -> Read {
    let empty = BTreeMap::new();
    let annotations = lease.metadata.annotations.as_ref().unwrap_or(&empty);
    let Some(record_json) = annotations.get(RECORD_ANNOTATION) else {
        return Read::Untrusted("no record");
    };
    let Some(mac) = annotations.get(MAC_ANNOTATION) else {
        return Read::Untrusted("no MAC");
    };
    let Some(spec) = lease.spec.as_ref() else {
        return Read::Untrusted("no spec");
    };
    let Some(renewed) = spec.renew_time.as_ref().map(|t| to_micros(t.0)) else {
        return Read::Untrusted("no renewTime");
    };
    let duration_seconds = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    let (namespace, name, uid) = (
        lease.metadata.namespace.as_deref().unwrap_or_default(),
        lease.metadata.name.as_deref().unwrap_or_default(),
        lease.metadata.uid.as_deref().unwrap_or_default(),
    );
    let mut signed = Signed {
        namespace,
        name,
        uid,
        holder: spec.holder_identity.as_deref().unwrap_or_default(),
        duration_seconds,
        renewed,
        record: record_json,
    };
    let confirmed = !uid.is_empty() && key.verify(Purpose::Session, &signed.content(), mac);
    if !confirmed {
        signed.uid = "";
        if !key.verify(Purpose::Session, &signed.content(), mac) {
            return Read::Untrusted("the MAC does not verify");
        }
    }
    // Verified: what follows is poddebug's own writing.
    let Ok(record) = serde_json::from_str::<SessionRecord>(record_json) else {
        return Read::Untrusted("an unreadable record");
    };
    if record.id != name {
        return Read::Untrusted("a record of another session");
    }
    let Ok(lease_duration) = u64::try_from(duration_seconds).map(Duration::from_secs) else {
        return Read::Untrusted("a negative lease duration");
    };
    let (terminate, bad_termination) = match annotations.get(TERMINATE_ANNOTATION) {
        None => (None, None),
        Some(t) => {
            let verified = annotations.get(TERMINATE_MAC_ANNOTATION).is_some_and(|m| {
                key.verify(
                    Purpose::Session,
                    &termination_content(namespace, name, uid, t),
                    m,
                )
            });
            match serde_json::from_str::<Termination>(t) {
                Ok(t) if verified => (Some(t), None),
                _ if !verified => (None, Some("the termination request's MAC does not verify")),
                _ => (None, Some("an unreadable termination request")),
            }
        }
    };
    let session = Box::new(LiveSession {
        record,
        renewed,
        lease_duration,
        terminate,
        resource_version: rv_of(lease),
        uid: uid.to_owned(),
    });
    if confirmed {
        Read::Trusted(session, bad_termination)
    } else {
        Read::Unconfirmed(session)
    }
}

/// The labels of a session's Lease (for people and selectors; the record holds the values).
fn lease_labels(record: &SessionRecord) -> BTreeMap<String, String> {
    BTreeMap::from([
        (SESSION_LABEL.to_owned(), "v1".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "poddebug-apiserver".to_owned(),
        ),
        (format!("{GROUP}/namespace"), label_value(&record.namespace)),
        (format!("{GROUP}/pod"), label_value(&record.pod)),
        (format!("{GROUP}/container"), label_value(&record.container)),
        (format!("{GROUP}/user"), label_value(&record.user)),
    ])
}

/// The Lease that records a new session (`record_json` is `record` as JSON), as created: held
/// by `record.replica`, renewed `now`, its MAC over an empty uid (module docs).
pub(crate) fn new_lease(
    key: &RecordKey,
    namespace: &str,
    record: &SessionRecord,
    record_json: &str,
    lease_duration: Duration,
    now: jiff::Timestamp,
) -> Lease {
    let now = to_micros(now);
    let duration_seconds = i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX);
    let mac = Signed {
        namespace,
        name: &record.id,
        uid: "",
        holder: &record.replica,
        duration_seconds: i64::from(duration_seconds),
        renewed: now,
        record: record_json,
    }
    .mac(key);
    let annotations = BTreeMap::from([
        (RECORD_ANNOTATION.to_owned(), record_json.to_owned()),
        (MAC_ANNOTATION.to_owned(), mac),
    ]);
    Lease {
        metadata: ObjectMeta {
            name: Some(record.id.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(lease_labels(record)),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(record.replica.clone()),
            lease_duration_seconds: Some(duration_seconds),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// The merge patch of a renewal at `now` (module docs): the record, holder, duration, renewal
/// time and MAC, written together.
pub(crate) fn renewal(key: &RecordKey, signed: &Signed<'_>) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {
            RECORD_ANNOTATION: signed.record,
            MAC_ANNOTATION: signed.mac(key),
        }},
        "spec": {
            "holderIdentity": signed.holder,
            "leaseDurationSeconds": signed.duration_seconds,
            "renewTime": MicroTime(signed.renewed),
        },
    })
}

/// A Lease as kube-apiserver answers the create of `r` at `now` (holding it 15 s) and its
/// first renewal, with uid `uid` and resourceVersion `rv`.
#[cfg(test)]
pub(crate) fn confirmed_lease(
    key: &RecordKey,
    r: &SessionRecord,
    now: jiff::Timestamp,
    uid: &str,
    rv: u64,
) -> Lease {
    let json = serde_json::to_string(r).unwrap_or_default();
    let mut lease = new_lease(
        key,
        "poddebug-system",
        r,
        &json,
        Duration::from_secs(15),
        now,
    );
    lease.metadata.uid = Some(uid.into());
    lease.metadata.resource_version = Some(rv.to_string());
    let signed = Signed {
        namespace: "poddebug-system",
        name: &r.id,
        uid,
        holder: &r.replica,
        duration_seconds: 15,
        renewed: to_micros(now),
        record: &json,
    };
    let patch = renewal(key, &signed);
    let mut v = serde_json::to_value(&lease).unwrap_or_default();
    json_patch::merge(&mut v, &patch);
    serde_json::from_value(v).unwrap_or(lease)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            namespace: "shop".into(),
            pod: "web".into(),
            container: "dbg".into(),
            ec_name: "dbg".into(),
            user: "system:serviceaccount:ns:bot".into(),
            creator: None,
            groups: vec!["devs".into()],
            mode: SessionMode::Moderator,
            protocol: "websocket/v5.channel.k8s.io".into(),
            tty: true,
            stdin: false,
            recording_id: None,
            moderated: true,
            replica: "r1".into(),
            started: "2026-01-01T00:00:00Z".into(),
            justification: Default::default(),
        }
    }

    fn trusted(read: Read) -> LiveSession {
        match read {
            Read::Trusted(s, None) => *s,
            other => panic!("not trusted: {other:?}"),
        }
    }

    fn why(read: Read) -> &'static str {
        match read {
            Read::Untrusted(why) => why,
            other => panic!("not untrusted: {other:?}"),
        }
    }

    #[test]
    fn a_confirmed_lease_round_trips_and_expires_after_its_duration() {
        let key = RecordKey::generate();
        let r = record("s1");
        let now: jiff::Timestamp = "2026-01-01T00:00:10.123456789Z".parse().unwrap();
        let lease = confirmed_lease(&key, &r, now, "uid-1", 42);
        let back = trusted(read(&lease, &key));
        assert_eq!(back.record, r);
        assert_eq!((back.resource_version, back.uid.as_str()), (42, "uid-1"));
        assert_eq!(back.renewed, to_micros(now));
        assert!(back.is_live("2026-01-01T00:00:25Z".parse().unwrap()));
        assert!(!back.is_live("2026-01-01T00:00:26Z".parse().unwrap()));
        let labels = lease.metadata.labels.unwrap();
        assert_eq!(labels[SESSION_LABEL], "v1");
        assert!(labels["poddebug.dev/user"].starts_with("system_serviceaccount_ns_bot-"));
        // The create alone is not relied on.
        let json = serde_json::to_string(&r).unwrap();
        let mut created = new_lease(
            &key,
            "poddebug-system",
            &r,
            &json,
            Duration::from_secs(15),
            now,
        );
        created.metadata.uid = Some("uid-1".into());
        assert!(matches!(read(&created, &key), Read::Unconfirmed(_)));
    }

    #[test]
    fn forged_copied_and_replayed_records_do_not_verify() {
        let key = RecordKey::generate();
        let now = jiff::Timestamp::now();
        let good = confirmed_lease(&key, &record("s1"), now, "uid-1", 42);
        trusted(read(&good, &key));
        let edit = |f: &dyn Fn(&mut Lease)| {
            let mut l = good.clone();
            f(&mut l);
            read(&l, &key)
        };
        let ann = |l: &mut Lease| l.metadata.annotations.as_mut().unwrap().clone();
        // No MAC, another key's MAC.
        assert_eq!(
            why(edit(&|l| {
                l.metadata
                    .annotations
                    .as_mut()
                    .unwrap()
                    .remove(MAC_ANNOTATION);
            })),
            "no MAC"
        );
        let other = confirmed_lease(&RecordKey::generate(), &record("s1"), now, "uid-1", 42);
        assert_eq!(why(read(&other, &key)), "the MAC does not verify");
        // The record changed (an observer made a moderator), the renewal moved to the future,
        // the duration lengthened, another holder, the record copied to another Lease or into
        // a Lease made anew under the same name.
        let r = serde_json::to_string(&SessionRecord {
            mode: SessionMode::Owner,
            ..record("s1")
        })
        .unwrap();
        for forged in [
            edit(&|l| {
                let mut a = ann(l);
                a.insert(RECORD_ANNOTATION.into(), r.clone());
                l.metadata.annotations = Some(a);
            }),
            edit(&|l| {
                l.spec.as_mut().unwrap().renew_time =
                    Some(MicroTime("2099-01-01T00:00:00Z".parse().unwrap()))
            }),
            edit(&|l| l.spec.as_mut().unwrap().lease_duration_seconds = Some(3600)),
            edit(&|l| l.spec.as_mut().unwrap().holder_identity = Some("r2".into())),
            edit(&|l| l.metadata.name = Some("s2".into())),
            edit(&|l| l.metadata.uid = Some("uid-2".into())),
            edit(&|l| l.metadata.namespace = Some("elsewhere".into())),
        ] {
            assert_eq!(why(forged), "the MAC does not verify");
        }
        // A termination request without (or with a wrong) MAC is ignored; the session stands.
        let term = r#"{"by":"mallory","at":"2026-01-01T00:00:00Z"}"#;
        let with_term = |mac: Option<String>| {
            edit(&|l| {
                let mut a = ann(l);
                a.insert(TERMINATE_ANNOTATION.into(), term.into());
                if let Some(m) = &mac {
                    a.insert(TERMINATE_MAC_ANNOTATION.into(), m.clone());
                }
                l.metadata.annotations = Some(a);
            })
        };
        for mac in [
            None,
            Some(termination_mac(
                &key,
                "poddebug-system",
                "s1",
                "uid-2",
                term,
            )),
        ] {
            match with_term(mac) {
                Read::Trusted(s, Some(_)) => assert_eq!(s.terminate, None),
                other => panic!("{other:?}"),
            }
        }
        let mac = termination_mac(&key, "poddebug-system", "s1", "uid-1", term);
        match with_term(Some(mac)) {
            Read::Trusted(s, None) => assert_eq!(s.terminate.unwrap().by, "mallory"),
            other => panic!("{other:?}"),
        }
    }
}
