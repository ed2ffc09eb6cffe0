use super::*;
use crate::chain::sha256;
use crate::signing::SigningKey;
use crate::statement::sign;
use poddebug_types::evidence::PartDigest;

fn record() -> RecordingRecord {
    RecordingRecord {
        id: "20260101t000000z-0123456789abcdef".into(),
        namespace: "ns".into(),
        pod: "pod".into(),
        user: "alice".into(),
        start: "2026-01-01T00:00:00Z".into(),
        ..Default::default()
    }
}

const PARTS: [&[u8]; 3] = [
    b"{\"version\":2}\n",
    b"[1.0,\"o\",\"ls\"]\n",
    b"[2.0,\"o\",\"x\"]\n",
];

fn digests(parts: &[&[u8]]) -> Vec<PartDigest> {
    parts
        .iter()
        .map(|p| PartDigest {
            bytes: p.len() as u64,
            sha256: hex(&sha256(p)),
            ..Default::default()
        })
        .collect()
}

/// A recording of `PARTS`, signed, the first `listed` of them listed.
fn signed(listed: usize, complete: bool) -> (RecordingRecord, KeySet) {
    let (key, _) = SigningKey::generate().unwrap();
    let mut r = record();
    sign(&key, &mut r, digests(&PARTS[..listed]), complete);
    (r, KeySet::new([key.public_key()]))
}

fn stored(parts: &[&'static [u8]]) -> Vec<(u32, &'static [u8])> {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u32, *p))
        .collect()
}

fn verdict(v: &VerificationStatus) -> (Verification, Option<u32>) {
    (v.result, v.part)
}

#[test]
fn a_complete_recording_verifies() {
    let (r, keys) = signed(3, true);
    let v = verify_parts(&r, &keys, &stored(&PARTS), false);
    assert_eq!(verdict(&v), (Verification::Verified, None), "{}", v.message);
    assert_eq!(v.key_id, r.evidence.as_ref().map(|e| e.key_id.clone()));
}

#[test]
fn a_byte_changed_in_one_part_names_that_part() {
    let (r, keys) = signed(3, true);
    let mut edited = PARTS[1].to_vec();
    edited[10] ^= 1;
    let edited: &'static [u8] = Box::leak(edited.into_boxed_slice());
    let v = verify_parts(&r, &keys, &stored(&[PARTS[0], edited, PARTS[2]]), false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    assert!(v.message.contains("part 1 was changed"), "{}", v.message);
}

#[test]
fn removed_reordered_and_added_parts_are_tampering() {
    let (r, keys) = signed(3, true);
    // A middle part removed.
    let parts = vec![(0, PARTS[0]), (2, PARTS[2])];
    let v = verify_parts(&r, &keys, &parts, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    // The last part removed from a completed recording.
    let v = verify_parts(&r, &keys, &stored(&PARTS[..2]), false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(2)),
        "{}",
        v.message
    );
    // Two parts swapped.
    let v = verify_parts(&r, &keys, &stored(&[PARTS[0], PARTS[2], PARTS[1]]), false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    // A part added after the end.
    let v = verify_parts(
        &r,
        &keys,
        &stored(&[PARTS[0], PARTS[1], PARTS[2], PARTS[0]]),
        false,
    );
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(3)),
        "{}",
        v.message
    );
}

#[test]
fn changed_metadata_is_tampering() {
    let (r, keys) = signed(3, true);
    let mut m = r.clone();
    m.exit_code = Some(0);
    let v = verify_parts(&m, &keys, &stored(&PARTS), false);
    assert_eq!(verdict(&v), (Verification::Tampered, None), "{}", v.message);
    // Signed by a key nobody trusts.
    let (other, _) = signed(3, true);
    let v = verify_parts(&other, &keys, &stored(&PARTS), false);
    assert_eq!(verdict(&v), (Verification::Tampered, None), "{}", v.message);
    // The evidence removed: nothing can be said, and nothing is vouched for.
    let mut bare = r;
    bare.evidence = None;
    let v = verify_parts(&bare, &keys, &stored(&PARTS), false);
    assert_eq!(verdict(&v), (Verification::Unsigned, None), "{}", v.message);
}

#[test]
fn a_recording_cut_off_by_a_crash_is_truncated_not_tampered() {
    // The recorder wrote two parts and the metadata listing them, then died.
    let (r, keys) = signed(2, false);
    let v = verify_parts(&r, &keys, &stored(&PARTS[..2]), false);
    assert_eq!(
        verdict(&v),
        (Verification::Truncated, Some(2)),
        "{}",
        v.message
    );
    // It died between writing the third part and the metadata listing it.
    let v = verify_parts(&r, &keys, &stored(&PARTS), false);
    assert_eq!(
        verdict(&v),
        (Verification::Truncated, Some(2)),
        "{}",
        v.message
    );
    // While it runs, what it wrote holds.
    let v = verify_parts(&r, &keys, &stored(&PARTS), true);
    assert_eq!(verdict(&v), (Verification::Verified, None), "{}", v.message);
    // Two unlisted parts are more than a crash leaves; a gap too.
    let four = [PARTS[0], PARTS[1], PARTS[2], PARTS[2]];
    let v = verify_parts(&r, &keys, &stored(&four), false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(3)),
        "{}",
        v.message
    );
    let gap = vec![(0, PARTS[0]), (1, PARTS[1]), (3, PARTS[2])];
    let v = verify_parts(&r, &keys, &gap, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(3)),
        "{}",
        v.message
    );
    // A listed part edited in a truncated recording is still tampering.
    let v = verify_parts(&r, &keys, &stored(&[PARTS[1], PARTS[1]]), false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(0)),
        "{}",
        v.message
    );
}

/// The verdict of the bytes of `parts` in one piece, handed over `chunk` bytes at a time.
fn streamed(
    r: &RecordingRecord,
    keys: &KeySet,
    parts: &[&[u8]],
    chunk: usize,
    running: bool,
) -> VerificationStatus {
    let bytes: Vec<u8> = parts.concat();
    let mut v = StreamVerifier::new(r);
    for c in bytes.chunks(chunk) {
        v.update(c);
    }
    v.finish(r, keys, running)
}

#[test]
fn the_bytes_in_one_piece_verify_as_the_parts_do_however_they_are_chunked() {
    let (r, keys) = signed(3, true);
    for chunk in [1, 5, 7, 4096] {
        let v = streamed(&r, &keys, &PARTS, chunk, false);
        assert_eq!(
            verdict(&v),
            (Verification::Verified, None),
            "{chunk}: {}",
            v.message
        );
    }
}

#[test]
fn the_bytes_in_one_piece_name_the_part_edited_removed_moved_or_added() {
    let (r, keys) = signed(3, true);
    // One byte changed in part 1, the size kept.
    let edited: &[u8] = b"[1.0,\"o\",\"rm\"]\n";
    assert_eq!(edited.len(), PARTS[1].len());
    let v = streamed(&r, &keys, &[PARTS[0], edited, PARTS[2]], 3, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    // Part 1 removed: what follows part 0 is cut at part 1's size.
    let v = streamed(&r, &keys, &[PARTS[0], PARTS[2]], 3, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    // Parts 1 and 2 swapped.
    let v = streamed(&r, &keys, &[PARTS[0], PARTS[2], PARTS[1]], 3, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(1)),
        "{}",
        v.message
    );
    // The last part removed.
    let v = streamed(&r, &keys, &PARTS[..2], 3, false);
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(2)),
        "{}",
        v.message
    );
    // Bytes added after a completed recording.
    let v = streamed(
        &r,
        &keys,
        &[PARTS[0], PARTS[1], PARTS[2], b"[3.0,\"o\",\"x\"]\n"],
        3,
        false,
    );
    assert_eq!(
        verdict(&v),
        (Verification::Tampered, Some(3)),
        "{}",
        v.message
    );
    // A signature that does not hold (a fact changed): no part named.
    let mut changed = r.clone();
    changed.user = "mallory".into();
    let v = streamed(&changed, &keys, &PARTS, 3, false);
    assert_eq!(verdict(&v), (Verification::Tampered, None), "{}", v.message);
    // Another key than the server's.
    let (other, _) = SigningKey::generate().unwrap();
    let v = streamed(&r, &KeySet::new([other.public_key()]), &PARTS, 3, false);
    assert_eq!(v.result, Verification::Tampered, "{}", v.message);
}

#[test]
fn the_bytes_in_one_piece_of_a_recording_its_recorder_never_completed_read_truncated() {
    // Two parts listed, a third written before its metadata could list it, then the replica
    // died.
    let (r, keys) = signed(2, false);
    let v = streamed(&r, &keys, &PARTS, 4, false);
    assert_eq!(
        verdict(&v),
        (Verification::Truncated, Some(2)),
        "{}",
        v.message
    );
    // Still being recorded: what exists so far holds.
    let v = streamed(&r, &keys, &PARTS, 4, true);
    assert_eq!(verdict(&v), (Verification::Verified, None), "{}", v.message);
    // No statement: unsigned.
    let v = streamed(&record(), &keys, &PARTS, 4, false);
    assert_eq!(v.result, Verification::Unsigned);
}
