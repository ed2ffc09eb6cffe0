//! The hash chain over a recording's parts. The chain starts from a digest of the recording's
//! place (namespace, pod, id), so a part can never be moved to another recording; each link
//! hashes the previous head, the part's number, its size and its SHA-256:
//!
//! ```text
//! head(-1) = SHA-256(len "poddebug.dev/recording-chain/v1" | len NS | len POD | len ID)
//! head(k)  = SHA-256(head(k-1) | k (u32 BE) | size (u64 BE) | SHA-256(part k))
//! ```
//!
//! (`len X` is X's length as a u32, big-endian, then X.) Editing, removing, inserting or
//! reordering a part changes every head from there on.

use ring::digest::{Context, SHA256};

/// What the first head covers, before the place.
pub const CHAIN_V1: &str = "poddebug.dev/recording-chain/v1";

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

/// The digest whose lower-case (or upper-case) hex is `text`.
pub fn parse_hex(text: &str) -> Option<Digest> {
    let b = text.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// SHA-256 over data handed in pieces (a part read as a stream).
pub struct Hasher {
    ctx: Context,
    size: u64,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hasher").field("size", &self.size).finish()
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Hasher {
            ctx: Context::new(&SHA256),
            size: 0,
        }
    }
}

impl Hasher {
    /// Hash `bytes` next.
    pub fn update(&mut self, bytes: &[u8]) {
        self.ctx.update(bytes);
        self.size += bytes.len() as u64;
    }

    /// The size and SHA-256 of what was handed in.
    pub fn finish(self) -> (u64, Digest) {
        (self.size, finish(self.ctx))
    }
}

fn finish(ctx: Context) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn put(ctx: &mut Context, field: &str) {
    ctx.update(&(field.len() as u32).to_be_bytes());
    ctx.update(field.as_bytes());
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest {
    let mut ctx = Context::new(&SHA256);
    ctx.update(bytes);
    finish(ctx)
}

/// Where a recording is: what its chain starts from and its seals and statement name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Pod.
    pub pod: &'a str,
    /// Recording id.
    pub id: &'a str,
}

/// The head before the first part.
pub fn genesis(place: Place<'_>) -> Digest {
    let mut ctx = Context::new(&SHA256);
    put(&mut ctx, CHAIN_V1);
    put(&mut ctx, place.namespace);
    put(&mut ctx, place.pod);
    put(&mut ctx, place.id);
    finish(ctx)
}

/// The head after part `seq` of `size` bytes whose SHA-256 is `part`.
pub fn link(prev: &Digest, seq: u32, size: u64, part: &Digest) -> Digest {
    let mut ctx = Context::new(&SHA256);
    ctx.update(prev);
    ctx.update(&seq.to_be_bytes());
    ctx.update(&size.to_be_bytes());
    ctx.update(part);
    finish(ctx)
}

/// One part's place in the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Its number.
    pub seq: u32,
    /// Where it begins in the recording.
    pub offset: u64,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256.
    pub sha256: Digest,
    /// The head after it.
    pub head: Digest,
}

/// A chain being extended part by part (the writer's side).
#[derive(Clone, Debug)]
pub struct Chain {
    head: Digest,
    next: u32,
    offset: u64,
}

impl Chain {
    /// The chain of a new recording at `place`.
    pub fn new(place: Place<'_>) -> Chain {
        Chain {
            head: genesis(place),
            next: 0,
            offset: 0,
        }
    }

    /// Add the next part.
    pub fn push(&mut self, part: &[u8]) -> Link {
        let digest = sha256(part);
        let size = part.len() as u64;
        let seq = self.next;
        self.head = link(&self.head, seq, size, &digest);
        let l = Link {
            seq,
            offset: self.offset,
            bytes: size,
            sha256: digest,
            head: self.head,
        };
        self.next += 1;
        self.offset += size;
        l
    }

    /// Add the next part, of `size` bytes whose SHA-256 is `digest`.
    pub fn push_digest(&mut self, size: u64, digest: &Digest) {
        self.head = link(&self.head, self.next, size, digest);
        self.next += 1;
        self.offset += size;
    }

    /// Parts so far.
    pub fn len(&self) -> u32 {
        self.next
    }

    /// Whether no part was added.
    pub fn is_empty(&self) -> bool {
        self.next == 0
    }

    /// The head now.
    pub fn head(&self) -> &Digest {
        &self.head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACE: Place<'static> = Place {
        namespace: "ns",
        pod: "pod",
        id: "id",
    };

    #[test]
    fn every_change_moves_the_head() {
        let mut a = Chain::new(PLACE);
        a.push(b"one");
        let l = a.push(b"two");
        assert_eq!((l.seq, l.offset, l.bytes), (1, 3, 3));
        let head = *a.head();
        let heads = |parts: &[&[u8]], place: Place<'_>| {
            let mut c = Chain::new(place);
            for p in parts {
                c.push(p);
            }
            *c.head()
        };
        assert_eq!(heads(&[b"one", b"two"], PLACE), head);
        assert_ne!(heads(&[b"two", b"one"], PLACE), head, "reordered");
        assert_ne!(heads(&[b"one"], PLACE), head, "removed");
        assert_ne!(heads(&[b"onf", b"two"], PLACE), head, "edited");
        assert_ne!(
            heads(&[b"on", b"etwo"], PLACE),
            head,
            "bytes moved between parts"
        );
        let elsewhere = Place {
            pod: "other",
            ..PLACE
        };
        assert_ne!(
            heads(&[b"one", b"two"], elsewhere),
            head,
            "another recording"
        );
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
        let d = sha256(b"one");
        assert_eq!(parse_hex(&hex(&d)), Some(d));
        assert_eq!(parse_hex("0g"), None);
        let mut h = Hasher::default();
        h.update(b"o");
        h.update(b"ne");
        assert_eq!(h.finish(), (3, d));
        let mut by_digest = Chain::new(PLACE);
        by_digest.push_digest(3, &sha256(b"one"));
        by_digest.push_digest(3, &sha256(b"two"));
        assert_eq!(*by_digest.head(), head);
    }
}
