//! What poddebug reads of a `DeleteOptions` body: `gracePeriodSeconds` and whether `dryRun`
//! is set, read as it streams by. The rest of the body is walked (for its syntax and nesting,
//! as for a create body) and kept nowhere, so a 3 MiB body costs nothing but the reading,
//! where a parsed JSON tree of it would take ~100 MB.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::scan::{KeySeed, Seen, Skip};
use crate::status::ApiError;

/// The fields of a `DeleteOptions` body that poddebug uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptionsBody {
    /// `gracePeriodSeconds`, when it is a non-negative integer (anything else is ignored).
    pub grace_period_seconds: Option<u64>,
    /// Whether `dryRun` is a non-empty array.
    pub dry_run: bool,
}

/// Read a `DeleteOptions` body. A body that is not an object has none of the fields; a
/// repeated field counts for its last value (as a parsed object keeps it). Malformed JSON, or
/// nesting deeper than [`super::MAX_DEPTH`], is a 400 `invalid DeleteOptions: …`.
pub fn decode_delete_options(body: &[u8]) -> Result<DeleteOptionsBody, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    de::Deserializer::deserialize_any(&mut de, Options)
        .and_then(|o| de.end().map(|()| o))
        .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))
}

struct Options;

impl<'de> Visitor<'de> for Options {
    type Value = DeleteOptionsBody;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(DeleteOptionsBody::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|_| DeleteOptionsBody::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = DeleteOptionsBody::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key.as_ref() {
                "gracePeriodSeconds" => out.grace_period_seconds = map.next_value_seed(Seconds)?,
                "dryRun" => {
                    out.dry_run = map.next_value_seed(Skip)? == Seen::NonEmptyArray;
                }
                _ => {
                    map.next_value_seed(Skip)?;
                }
            }
        }
        Ok(out)
    }
}

/// A non-negative integer, or `None` for any other value.
struct Seconds;

impl<'de> DeserializeSeed<'de> for Seconds {
    type Value = Option<u64>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_any(Seconds)
    }
}

impl<'de> Visitor<'de> for Seconds {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_u64<E>(self, v: u64) -> Result<Option<u64>, E> {
        Ok(Some(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Option<u64>, E> {
        Ok(u64::try_from(v).ok())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<u64>, A::Error> {
        Skip.visit_seq(seq).map(|_| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<u64>, A::Error> {
        Skip.visit_map(map).map(|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the handlers read before: a parsed JSON tree.
    fn as_a_tree(body: &[u8]) -> Result<DeleteOptionsBody, String> {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        Ok(DeleteOptionsBody {
            grace_period_seconds: v
                .get("gracePeriodSeconds")
                .and_then(serde_json::Value::as_u64),
            dry_run: v
                .get("dryRun")
                .and_then(serde_json::Value::as_array)
                .is_some_and(|a| !a.is_empty()),
        })
    }

    #[test]
    fn reads_what_a_parsed_tree_gives() {
        for body in [
            &br#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"propagationPolicy":"Background"}"#[..],
            br#"{"gracePeriodSeconds": 30, "dryRun": ["All"]}"#,
            br#"{"gracePeriodSeconds": -1, "dryRun": []}"#,
            br#"{"gracePeriodSeconds": 1.5, "dryRun": "All"}"#,
            br#"{"gracePeriodSeconds": "5", "dryRun": {"a": [1]}}"#,
            br#"{"gracePeriodSeconds": 5, "gracePeriodSeconds": null, "dryRun": ["All"], "dryRun": []}"#,
            br#"{"gracePeriodSeconds": 18446744073709551615, "preconditions": {"uid": "x"}}"#,
            br#"[{"gracePeriodSeconds": 5}]"#,
            br#""x""#,
            b"null",
            b"7",
        ] {
            let want = as_a_tree(body).unwrap();
            assert_eq!(
                decode_delete_options(body).unwrap(),
                want,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn refuses_what_a_parsed_tree_refuses() {
        let deep = format!(r#"{{"x": {}}}"#, "[".repeat(200));
        for body in [&b"{"[..], b"{} {}", br#"{"a":}"#, deep.as_bytes()] {
            let want = as_a_tree(body).unwrap_err();
            match decode_delete_options(body) {
                Err(ApiError::BadRequest(m)) => {
                    assert_eq!(m, format!("invalid DeleteOptions: {want}"))
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
