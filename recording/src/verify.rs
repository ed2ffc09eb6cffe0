//! Verifying a recording against the signed statement of its metadata and the parts the store
//! holds: what `status.verification` and `kubectl poddebug recordings verify` report.
//!
//! The rules, in order (the first that fails decides, naming the part):
//! - no statement: `Unsigned` (a recording of an earlier version);
//! - the statement's signature must hold (a trusted key, the facts unchanged) and its hash
//!   chain be the one its parts' digests make: else `Tampered`;
//! - every part the statement lists must be present, of its size and SHA-256: a part missing,
//!   edited or moved (two parts swapped) is `Tampered`, naming the first such part;
//! - parts after those: none once the recording is complete (`Tampered`, naming the first);
//!   otherwise at most one, the part its recorder wrote before it could write the metadata
//!   listing it (two or more: `Tampered`);
//! - complete: `Verified`; still being written: `Verified` so far; neither (its recorder ended
//!   before completing it, as when a replica is killed): `Truncated`, naming the first part
//!   not vouched for, never `Tampered`.
//!
//! The statement's own age is not covered: someone who can write the bucket can put back an
//! older statement of the same recording (signed by the server then) and delete the parts
//! after it, and the recording then reads `Truncated` at that point, as it would after a crash
//! there. It never reads `Verified`.
//!
//! The verifier asks for the parts one at a time ([`Verifier::next_part`]) and is handed their
//! size and digest ([`Verifier::part`]), so that the caller streams each part through a
//! [`crate::chain::Hasher`] and no more than a chunk is held at once.

use poddebug_types::RecordingRecord;
use poddebug_types::evidence::{Verification, VerificationStatus};

use crate::chain::{Digest, hex};
use crate::signing::KeySet;
use crate::statement::check as check_statement;

/// A recording with no end whose metadata has not been renewed for this many of its part
/// intervals lost its recorder (its replica died).
pub const ABANDONED_AFTER_INTERVALS: u64 = 6;

/// When the recorder of `r` was last heard of, if it lost its recorder by `now`: no end, and
/// not renewed for [`ABANDONED_AFTER_INTERVALS`] part intervals.
pub fn abandoned(r: &RecordingRecord, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
    if r.end.is_some() {
        return None;
    }
    let last = r
        .renewed
        .as_deref()
        .unwrap_or(r.start.as_str())
        .parse::<jiff::Timestamp>()
        .ok()?;
    let interval = r.part_interval_seconds.unwrap_or(5).max(1);
    let limit =
        i64::try_from(interval.saturating_mul(ABANDONED_AFTER_INTERVALS)).unwrap_or(i64::MAX);
    (now.duration_since(last).as_secs() > limit).then_some(last)
}

/// Whether `r` is still being recorded at `now`: no end, and renewed lately.
pub fn running(r: &RecordingRecord, now: jiff::Timestamp) -> bool {
    r.end.is_none() && abandoned(r, now).is_none()
}

/// A verification in progress.
#[derive(Debug)]
pub struct Verifier<'a> {
    record: &'a RecordingRecord,
    /// The part numbers the store holds, in order.
    stored: Vec<u32>,
    /// Parts the statement lists.
    listed: u32,
    /// The next listed part to check.
    next: u32,
    running: bool,
    failed: Option<VerificationStatus>,
    key_id: Option<String>,
}

fn tampered(part: Option<u32>, message: String) -> VerificationStatus {
    VerificationStatus {
        result: Verification::Tampered,
        part,
        message,
        key_id: None,
    }
}

impl<'a> Verifier<'a> {
    /// Verify `record` (as stored: not as a list marks an abandoned recording) against the
    /// part numbers the store holds (`stored`), trusting `keys`. `running`: the recording is
    /// still being written (no end, renewed lately).
    pub fn new(
        record: &'a RecordingRecord,
        keys: &KeySet,
        mut stored: Vec<u32>,
        running: bool,
    ) -> Verifier<'a> {
        stored.sort_unstable();
        stored.dedup();
        let mut v = Verifier {
            record,
            stored,
            listed: 0,
            next: 0,
            running,
            failed: None,
            key_id: None,
        };
        match check_statement(keys, record) {
            None => {
                v.failed = Some(VerificationStatus {
                    result: Verification::Unsigned,
                    part: None,
                    message: "the recording's metadata carries no signature (recorded by an \
                              earlier version): nothing can be verified"
                        .to_owned(),
                    key_id: None,
                });
            }
            Some(Err(why)) => {
                v.failed = Some(tampered(
                    None,
                    format!(
                        "the signed statement of the recording's metadata does not hold: {why}"
                    ),
                ));
            }
            Some(Ok(key)) => {
                v.key_id = Some(key);
                v.listed = record
                    .evidence
                    .as_ref()
                    .map_or(0, |e| u32::try_from(e.parts.len()).unwrap_or(u32::MAX));
            }
        }
        v
    }

    /// The number of the part to hand over next ([`Verifier::part`]), or `None` when no more
    /// are needed.
    pub fn next_part(&mut self) -> Option<u32> {
        if self.failed.is_some() || self.next >= self.listed {
            return None;
        }
        let seq = self.next;
        if self.stored.binary_search(&seq).is_err() {
            self.failed = Some(tampered(Some(seq), format!("part {seq} is missing")));
            return None;
        }
        Some(seq)
    }

    /// The size and SHA-256 of the part [`Verifier::next_part`] named, as the store holds it.
    pub fn part(&mut self, size: u64, digest: &Digest) {
        let seq = self.next;
        let Some(want) = self
            .record
            .evidence
            .as_ref()
            .and_then(|e| e.parts.get(seq as usize))
        else {
            return;
        };
        self.next += 1;
        if want.bytes != size || want.sha256 != hex(digest) {
            self.failed = Some(tampered(
                Some(seq),
                format!(
                    "part {seq} was changed: it holds {size} bytes of SHA-256 {}, the signed \
                     metadata says {} bytes of SHA-256 {}",
                    hex(digest),
                    want.bytes,
                    want.sha256
                ),
            ));
        }
    }

    /// The verdict.
    pub fn finish(self) -> VerificationStatus {
        if let Some(f) = self.failed {
            return f;
        }
        let listed = self.listed;
        if self.next < listed {
            // The caller found no more parts (one deleted since they were listed).
            return tampered(Some(self.next), format!("part {} is missing", self.next));
        }
        let key = self.key_id.unwrap_or_default();
        let complete = self.record.evidence.as_ref().is_some_and(|e| e.complete);
        let extra: Vec<u32> = self
            .stored
            .iter()
            .copied()
            .filter(|s| *s >= listed)
            .collect();
        let key_id = Some(key.clone());
        if complete {
            if let Some(first) = extra.first() {
                return tampered(
                    Some(*first),
                    format!(
                        "part {first} was added: the signed metadata of the completed recording \
                         lists {listed} parts"
                    ),
                );
            }
            return VerificationStatus {
                result: Verification::Verified,
                part: None,
                message: format!(
                    "all {listed} parts hold, in order, and the signature of key {key} holds"
                ),
                key_id,
            };
        }
        // Its recorder may have written one part it could not list yet; never more, never
        // with a gap.
        if extra.len() > 1 || extra.first().is_some_and(|s| *s != listed) {
            let odd = extra
                .iter()
                .copied()
                .find(|s| *s != listed)
                .unwrap_or(listed + 1);
            return tampered(
                Some(odd),
                format!(
                    "part {odd} was added: the signed metadata lists {listed} parts, and a \
                     recorder writes at most one part before listing it"
                ),
            );
        }
        let unlisted = if extra.is_empty() {
            String::new()
        } else {
            format!(" (part {listed}, written after them, is not vouched for)")
        };
        if self.running {
            return VerificationStatus {
                result: Verification::Verified,
                part: None,
                message: format!(
                    "still being recorded: the {listed} parts written so far hold (key \
                     {key}){unlisted}"
                ),
                key_id,
            };
        }
        VerificationStatus {
            result: Verification::Truncated,
            part: Some(listed),
            message: format!(
                "the recording stops at part {listed}: its recorder ended before completing it \
                 (the replica recording it stopped mid-session); the {listed} parts before hold \
                 (key {key}){unlisted}"
            ),
            key_id,
        }
    }
}

/// Verify `record` against `parts` (number and bytes) in memory: tests, and callers that
/// hold the parts already.
pub fn verify_parts(
    record: &RecordingRecord,
    keys: &KeySet,
    parts: &[(u32, &[u8])],
    running: bool,
) -> VerificationStatus {
    let mut v = Verifier::new(record, keys, parts.iter().map(|p| p.0).collect(), running);
    while let Some(seq) = v.next_part() {
        let Some((_, data)) = parts.iter().find(|p| p.0 == seq) else {
            break;
        };
        v.part(data.len() as u64, &crate::chain::sha256(data));
    }
    v.finish()
}

/// Verifying a recording from its bytes in one piece, as `GET …/pods/POD/recordings/ID`
/// serves them (the parts concatenated, in order): what `kubectl poddebug recordings verify`
/// and a third party do, holding only the recording, its metadata
/// (`GET …/recordings/ID/evidence`) and the public keys (`recordingkeys`).
///
/// The bytes are cut where the statement's part sizes say each part ends, and each piece is
/// hashed as it streams past; what follows the listed parts is one more, unlisted part. A part
/// missing or changed in size shifts every cut after it: the first piece that does not hold
/// is the part named, as the store-side verification names it. Unlike that one, the bytes in
/// one piece cannot tell two parts added after the listed ones from one: both read as one
/// unlisted part (still `Tampered` once the recording is complete, `Truncated` otherwise).
#[derive(Debug)]
pub struct StreamVerifier {
    /// Size of each listed part.
    sizes: Vec<u64>,
    /// Size and digest of each piece cut so far.
    pieces: Vec<(u64, Digest)>,
    current: crate::chain::Hasher,
    /// Bytes hashed into `current`.
    in_current: u64,
    /// Bytes after the listed parts.
    trailing: u64,
}

impl StreamVerifier {
    /// A verifier of the recording `record` describes.
    pub fn new(record: &RecordingRecord) -> StreamVerifier {
        let sizes = record
            .evidence
            .as_ref()
            .map(|e| e.parts.iter().map(|p| p.bytes).collect())
            .unwrap_or_default();
        StreamVerifier {
            sizes,
            pieces: Vec::new(),
            current: crate::chain::Hasher::default(),
            in_current: 0,
            trailing: 0,
        }
    }

    /// The next bytes of the recording.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let Some(&want) = self.sizes.get(self.pieces.len()) else {
                self.trailing += bytes.len() as u64;
                return;
            };
            let room = want.saturating_sub(self.in_current);
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
            self.current.update(&bytes[..take]);
            self.in_current += take as u64;
            bytes = &bytes[take..];
            if self.in_current == want {
                self.cut();
            }
        }
    }

    fn cut(&mut self) {
        let done = std::mem::take(&mut self.current);
        self.pieces.push(done.finish());
        self.in_current = 0;
    }

    /// The verdict, trusting `keys`; `running`: the recording is still being written (as
    /// [`running`] tells from its metadata).
    pub fn finish(
        mut self,
        record: &RecordingRecord,
        keys: &KeySet,
        running: bool,
    ) -> VerificationStatus {
        // A listed part the bytes end inside of is present, and short.
        if self.in_current > 0 {
            self.cut();
        }
        let mut stored: Vec<u32> = (0..self.pieces.len())
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        if self.trailing > 0 {
            stored.push(u32::try_from(self.sizes.len()).unwrap_or(u32::MAX));
        }
        let mut v = Verifier::new(record, keys, stored, running);
        while let Some(seq) = v.next_part() {
            let Some((size, digest)) = self.pieces.get(seq as usize) else {
                break;
            };
            v.part(*size, digest);
        }
        v.finish()
    }
}

#[cfg(test)]
mod tests;
