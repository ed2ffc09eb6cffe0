//! The signed statement of a recording's metadata ([`Evidence`]): the recording's facts (who,
//! where, when, how it ended), the SHA-256 of each part, the head of the hash chain over them,
//! whether the recording is complete; signed with the server's Ed25519 key. The metadata object
//! is rewritten with each part, and the statement signed anew each time.
//!
//! The record key's MAC (poddebug-storage's `record_key`) also covers the metadata: that is
//! for replicas trusting what they read back within the cluster; this signature is what a
//! third party holding only the public key verifies.

use poddebug_types::RecordingRecord;
use poddebug_types::evidence::{ED25519, Evidence, PartDigest};

use crate::chain::{Chain, Place, hex};
use crate::signing::{KeySet, SigningKey};

/// The purpose a statement's signature is made for.
pub const STATEMENT_V1: &str = "poddebug.dev/recording-statement/v1";

/// The place of the recording `r` describes.
pub fn place_of(r: &RecordingRecord) -> Place<'_> {
    Place {
        namespace: &r.namespace,
        pod: &r.pod,
        id: &r.id,
    }
}

/// What a statement's signature covers: the recording's facts and every field of `e` but the
/// signature.
pub fn content(r: &RecordingRecord, e: &Evidence) -> Vec<u8> {
    let facts = (
        STATEMENT_V1,
        &r.namespace,
        &r.pod,
        &r.id,
        &r.container,
        &r.user,
        &r.protocol,
        &r.start,
        &r.end,
        r.exit_code,
        r.truncated,
        r.bytes,
        r.command_count,
        &r.justification,
    );
    let evidence = (&e.algorithm, &e.key_id, &e.parts, &e.chain, e.complete);
    serde_json::to_vec(&(facts, evidence)).unwrap_or_default()
}

/// The head of the hash chain over `parts` at `place` (hex); `None` when a digest is not a
/// SHA-256 in hex.
pub fn chain_of(place: Place<'_>, parts: &[PartDigest]) -> Option<String> {
    let mut chain = Chain::new(place);
    for p in parts {
        chain.push_digest(p.bytes, &crate::chain::parse_hex(&p.sha256)?);
    }
    Some(hex(chain.head()))
}

/// Sign `r`'s statement over `parts` (`complete` once the session ended): `r.evidence` is
/// replaced.
pub fn sign(key: &SigningKey, r: &mut RecordingRecord, parts: Vec<PartDigest>, complete: bool) {
    let chain = chain_of(place_of(r), &parts).unwrap_or_default();
    let mut e = Evidence {
        algorithm: ED25519.to_owned(),
        key_id: key.id().to_owned(),
        parts,
        chain,
        complete,
        signature: String::new(),
    };
    e.signature = key.sign(STATEMENT_V1, &content(r, &e));
    r.evidence = Some(e);
}

/// Whether `r`'s statement holds: its signature by a trusted key, and its chain the one its
/// parts make (`Ok` with the signing key's id); why not otherwise. `None` when there is no
/// statement.
pub fn check(keys: &KeySet, r: &RecordingRecord) -> Option<Result<String, String>> {
    let e = r.evidence.as_ref()?;
    if e.algorithm != ED25519 {
        return Some(Err(format!(
            "the metadata is signed with {:?}, not {ED25519}",
            e.algorithm
        )));
    }
    if let Err(why) = keys.check(&e.key_id, STATEMENT_V1, &content(r, e), &e.signature) {
        return Some(Err(why));
    }
    if chain_of(place_of(r), &e.parts).as_deref() != Some(e.chain.as_str()) {
        // Signed, so written by a server: a bug, never a forgery; still nothing to trust.
        return Some(Err(
            "the hash chain the metadata names is not the one its parts make".to_owned(),
        ));
    }
    Some(Ok(e.key_id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(data: &[u8]) -> PartDigest {
        PartDigest {
            bytes: data.len() as u64,
            sha256: hex(&crate::chain::sha256(data)),
            ..Default::default()
        }
    }

    #[test]
    fn the_statement_covers_the_facts_and_the_parts() {
        let (key, _) = SigningKey::generate().unwrap();
        let keys = KeySet::new([key.public_key()]);
        let mut r = RecordingRecord {
            id: "id".into(),
            namespace: "ns".into(),
            pod: "pod".into(),
            user: "alice".into(),
            start: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        };
        assert!(check(&keys, &r).is_none(), "unsigned");
        sign(&key, &mut r, vec![digest(b"one"), digest(b"two")], true);
        assert_eq!(check(&keys, &r), Some(Ok(key.id().to_owned())));
        let mut mallory = r.clone();
        mallory.user = "mallory".into();
        assert!(matches!(check(&keys, &mallory), Some(Err(_))));
        let mut fewer = r.clone();
        if let Some(e) = fewer.evidence.as_mut() {
            e.parts.pop();
        }
        assert!(matches!(check(&keys, &fewer), Some(Err(_))));
        let mut open = r.clone();
        if let Some(e) = open.evidence.as_mut() {
            e.complete = false;
        }
        assert!(matches!(check(&keys, &open), Some(Err(_))));
        // The time table is signed with the digests; a statement without one (an earlier
        // version's) verifies as it did.
        let mut timed = r.clone();
        let mut parts = vec![digest(b"one"), digest(b"two")];
        parts[1].start_micros = Some(5_000_000);
        parts[1].end_micros = Some(600_000_000);
        sign(&key, &mut timed, parts, true);
        assert_eq!(check(&keys, &timed), Some(Ok(key.id().to_owned())));
        assert_eq!(timed.duration_micros(), Some(600_000_000));
        let mut moved = timed.clone();
        if let Some(e) = moved.evidence.as_mut() {
            e.parts[1].start_micros = Some(1);
        }
        assert!(matches!(check(&keys, &moved), Some(Err(_))));
        let legacy = serde_json::to_vec(&r.evidence).unwrap();
        assert!(
            !String::from_utf8_lossy(&legacy).contains("Micros"),
            "no time table: the statement is the one earlier versions signed"
        );
        // What the MAC and the store add around it is not covered.
        let mut read = r.clone();
        read.mac = Some("v1.x.y".into());
        read.renewed = Some("later".into());
        assert!(matches!(check(&keys, &read), Some(Ok(_))));
        assert!(matches!(check(&KeySet::default(), &r), Some(Err(_))));
        // Through JSON, as the store keeps it.
        let back: RecordingRecord =
            serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(check(&keys, &back), Some(Ok(key.id().to_owned())));
    }
}
