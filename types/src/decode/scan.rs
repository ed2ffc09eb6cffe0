//! The first look at a body, before anything is decoded: its syntax and nesting, what its top
//! level is, its `apiVersion` and `kind`, and which top-level members are `null`.
//!
//! kube-apiserver checks the whole body's syntax before decoding it (Go's `checkValid`) and
//! reads its type (`apiVersion`, `kind`) before the object, so a syntax error or a type that
//! does not match is the answer whatever else the body holds. This pass does the same without
//! building anything: every value is walked by [`Skip`], which keeps no data, and nesting
//! deeper than serde_json's recursion limit ([`super::MAX_DEPTH`]) fails here, at the first
//! level too deep. (serde_json's own `IgnoredAny` skips values of any depth, so the second pass
//! can use it for what it drops.)

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What the top level of a body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Root {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// What the first pass learned about a syntactically valid body.
#[derive(Debug)]
pub(crate) struct Shape<'de> {
    pub(crate) root: Root,
    /// The top-level `apiVersion` when it is a string (the last one, when repeated: the value
    /// kube-apiserver keeps).
    pub(crate) api_version: Option<Cow<'de, str>>,
    /// The top-level `kind`, likewise.
    pub(crate) kind: Option<Cow<'de, str>>,
    /// One bit per top-level member, in order: set when its value is `null`.
    nulls: Vec<u64>,
}

impl Shape<'_> {
    /// Whether the `ordinal`-th member of the top-level object has the value `null`.
    pub(crate) fn null_member(&self, ordinal: usize) -> bool {
        self.nulls
            .get(ordinal / 64)
            .is_some_and(|w| w & (1 << (ordinal % 64)) != 0)
    }
}

/// Check `body`'s syntax and nesting and read its shape.
pub(crate) fn scan(body: &[u8]) -> Result<Shape<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let shape = de::Deserializer::deserialize_any(&mut de, ShapeVisitor)?;
    de.end()?;
    Ok(shape)
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::Bool))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::Number))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::Number))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::Number))
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::String))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::of(Root::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(Shape::of(Root::Array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut shape = Shape::of(Root::Object);
        let mut ordinal = 0usize;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let null = match key.as_ref() {
                "apiVersion" | "kind" => {
                    let v = map.next_value_seed(TypeMetaSeed)?;
                    let null = matches!(v, TypeMeta::Null);
                    let s = match v {
                        TypeMeta::String(s) => Some(s),
                        TypeMeta::Null | TypeMeta::Other => None,
                    };
                    if key == "apiVersion" {
                        shape.api_version = s;
                    } else {
                        shape.kind = s;
                    }
                    null
                }
                _ => map.next_value_seed(Skip)? == Seen::Null,
            };
            if null {
                let word = ordinal / 64;
                if shape.nulls.len() <= word {
                    shape.nulls.resize(word + 1, 0);
                }
                shape.nulls[word] |= 1 << (ordinal % 64);
            }
            ordinal += 1;
        }
        Ok(shape)
    }
}

impl Shape<'_> {
    fn of(root: Root) -> Self {
        Shape {
            root,
            api_version: None,
            kind: None,
            nulls: Vec::new(),
        }
    }
}

/// An object key, borrowed from the body unless it had escapes.
pub(crate) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The value of `apiVersion` or `kind`: only a string is compared.
enum TypeMeta<'de> {
    String(Cow<'de, str>),
    Null,
    Other,
}

struct TypeMetaSeed;

impl<'de> DeserializeSeed<'de> for TypeMetaSeed {
    type Value = TypeMeta<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(TypeMetaSeed)
    }
}

impl<'de> Visitor<'de> for TypeMetaSeed {
    type Value = TypeMeta<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(TypeMeta::String(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(TypeMeta::String(Cow::Owned(v.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(TypeMeta::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(TypeMeta::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(TypeMeta::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(TypeMeta::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(TypeMeta::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|_| TypeMeta::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip.visit_map(map).map(|_| TypeMeta::Other)
    }
}

/// What [`Skip`] saw of a value: enough to answer the questions the decoders ask of values
/// they keep nothing of (is it `null`, is it a non-empty array).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// `null`.
    Null,
    /// A boolean, number or string.
    Scalar,
    /// `[]`.
    EmptyArray,
    /// An array with at least one element.
    NonEmptyArray,
    /// An object.
    Object,
}

/// A value walked to its end (so that serde_json counts its nesting), kept nowhere. Tells its
/// [`Seen`].
pub(crate) struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = Seen;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Seen, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = Seen;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Seen, E> {
        Ok(Seen::Scalar)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Seen, E> {
        Ok(Seen::Scalar)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Seen, E> {
        Ok(Seen::Scalar)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Seen, E> {
        Ok(Seen::Scalar)
    }

    fn visit_str<E>(self, _: &str) -> Result<Seen, E> {
        Ok(Seen::Scalar)
    }

    fn visit_unit<E>(self) -> Result<Seen, E> {
        Ok(Seen::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seen, A::Error> {
        let mut shape = Seen::EmptyArray;
        while seq.next_element_seed(Skip)?.is_some() {
            shape = Seen::NonEmptyArray;
        }
        Ok(shape)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen, A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(Seen::Object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_of_bodies() {
        let s = scan(br#"{"a": null, "kind": "K", "apiVersion": 5, "b": {"c": null}, "d": null}"#)
            .unwrap();
        assert_eq!(s.root, Root::Object);
        assert_eq!(s.kind.as_deref(), Some("K"));
        assert_eq!(s.api_version, None);
        let nulls: Vec<usize> = (0..6).filter(|&i| s.null_member(i)).collect();
        assert_eq!(nulls, [0, 4]);
        let s = scan(br#"{"apiVersion": "a/v1", "apiVersion": "b\/v1"}"#).unwrap();
        assert_eq!(s.api_version.as_deref(), Some("b/v1"));
        for (body, root) in [
            (&b"[1, {}]"[..], Root::Array),
            (b" \"x\" ", Root::String),
            (b"-1.5", Root::Number),
            (b"true", Root::Bool),
            (b"null", Root::Null),
        ] {
            assert_eq!(scan(body).unwrap().root, root);
        }
    }

    #[test]
    fn syntax_and_depth_fail_at_once() {
        assert!(scan(b"{} {}").is_err());
        assert!(scan(br#"{"a": [1,]}"#).is_err());
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let e = scan(deep.as_bytes()).unwrap_err().to_string();
        assert!(e.starts_with("recursion limit exceeded"), "{e}");
    }
}
