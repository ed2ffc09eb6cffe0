//! The decoding pass: the typed object is decoded straight from the body, through a wrapper
//! around serde_json's deserializer that sees every key before the types do.
//!
//! The wrapper keeps the path it is at (steps borrowed from the body: nothing is rendered
//! unless a problem is reported there), the keys met in each object (to find repeated ones),
//! and counts the values it reads. A key is shown to the types only once it is known to be
//! wanted: a repeated key, a field the types do not know, a dropped `status`, a `null` member
//! of the top level are handled here and their values skipped by serde_json without building
//! anything, as kube-apiserver skips them. So the types never see a repeated or unknown field
//! (serde's derived structs would stop at the first with an error of their own), and what is
//! kept is what the object holds, plus the container fields that pass through.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde_json::{Map, Value};

use super::problems::{Kind, Problems, Step};
use super::scan::{KeySeed, Shape};
use super::{MAX_VALUES, Passed, Segment};

/// What becomes of a field the types do not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// A strict-decoding problem (`unknown field "…"`).
    Refuse,
    /// Kept as it came (and checked for repeated keys), to be sent on to kube-apiserver.
    PassThrough,
    /// Skipped, as kube-apiserver drops a field it does not know: not looked into.
    Drop,
}

/// How a body is decoded.
#[derive(Clone, Copy)]
pub(crate) struct Rules {
    /// What becomes of a field the types do not know, by its path (its own key last).
    pub(crate) unknown: fn(&[Step<'_>]) -> Unknown,
    /// The top-level rules of a create body: `status` is read-only and dropped whatever it
    /// holds (its repeated keys are still problems), and a known member whose value is `null`
    /// is absent, as Go leaves such a field at its zero value.
    pub(crate) create_body: bool,
}

/// The state of one decoding.
pub(crate) struct Ctx<'de> {
    rules: Rules,
    shape: Shape<'de>,
    path: Vec<Step<'de>>,
    pub(crate) problems: Problems,
    values: usize,
    /// Set when the body held more than [`MAX_VALUES`] values: the decoding was stopped.
    pub(crate) over_limit: bool,
    /// Fields kept for kube-apiserver: their paths and values.
    pub(crate) pass_through: Passed,
}

impl<'de> Ctx<'de> {
    pub(crate) fn new(rules: Rules, shape: Shape<'de>) -> Self {
        Ctx {
            rules,
            shape,
            path: Vec::new(),
            problems: Problems::default(),
            values: 0,
            over_limit: false,
            pass_through: Vec::new(),
        }
    }

    /// Count one more value read; past [`MAX_VALUES`] the decoding stops.
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        self.values += 1;
        if self.values > MAX_VALUES {
            self.over_limit = true;
            return Err(E::custom(format_args!("more than {MAX_VALUES} values")));
        }
        Ok(())
    }

    /// Handle the value of an unknown field at the current path, as the rules say.
    fn unknown_value<D: Deserializer<'de>>(
        &mut self,
        how: Unknown,
        value: D,
    ) -> Result<(), D::Error> {
        match how {
            Unknown::Refuse => {
                self.problems.report(Kind::Unknown, &self.path, None);
                value.deserialize_ignored_any(IgnoredAny)?;
            }
            // Once the answer is a 400 anyway, nothing is kept.
            Unknown::PassThrough if !self.problems.full() => {
                let kept = Walk {
                    ctx: &mut *self,
                    build: true,
                }
                .deserialize(value)?;
                let path = self.path.iter().map(Segment::from).collect();
                self.pass_through.push((path, kept.unwrap_or(Value::Null)));
            }
            Unknown::PassThrough | Unknown::Drop => {
                value.deserialize_ignored_any(IgnoredAny)?;
            }
        }
        Ok(())
    }
}

impl From<&Step<'_>> for Segment {
    fn from(s: &Step<'_>) -> Self {
        match s {
            Step::Key(k) => Segment::Key(k.as_ref().to_owned()),
            Step::Index(i) => Segment::Index(*i),
        }
    }
}

/// A deserializer of one value of the body, tracked.
pub(crate) struct Tracked<'c, 'de, D> {
    de: D,
    ctx: &'c mut Ctx<'de>,
    /// The top-level value: the create-body rules apply to its members.
    root: bool,
    /// Already counted: the content of an option or a newtype is the same JSON value.
    counted: bool,
}

impl<'c, 'de, D: Deserializer<'de>> Tracked<'c, 'de, D> {
    /// The deserializer of a whole body.
    pub(crate) fn root(de: D, ctx: &'c mut Ctx<'de>) -> Self {
        Tracked {
            de,
            ctx,
            root: true,
            counted: false,
        }
    }

    fn count(&mut self) -> Result<(), D::Error> {
        if self.counted {
            return Ok(());
        }
        self.counted = true;
        self.ctx.count()
    }

    fn wrap<V>(self, inner: V, fields: Option<&'static [&'static str]>) -> (D, Wrap<'c, 'de, V>) {
        (
            self.de,
            Wrap {
                inner,
                ctx: self.ctx,
                fields,
                root: self.root,
            },
        )
    }
}

macro_rules! forward_tracked {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(
                mut self,
                $($arg: $ty,)*
                visitor: V,
            ) -> Result<V::Value, D::Error> {
                self.count()?;
                let (de, visitor) = self.wrap(visitor, None);
                de.$method($($arg,)* visitor)
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Tracked<'_, 'de, D> {
    type Error = D::Error;

    forward_tracked! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.count()?;
        let (de, visitor) = self.wrap(visitor, Some(fields));
        de.deserialize_struct(name, fields, visitor)
    }

    /// The types ignore this value: the key it belongs to is a field they do not know (one
    /// the wrapper could not tell from a struct's field list).
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let how = (self.ctx.rules.unknown)(&self.ctx.path);
        self.ctx.unknown_value(how, self.de)?;
        visitor.visit_unit()
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A visitor of the types, wrapped so that what it is given is tracked.
struct Wrap<'c, 'de, V> {
    inner: V,
    ctx: &'c mut Ctx<'de>,
    /// The fields of the struct being decoded, when it is one.
    fields: Option<&'static [&'static str]>,
    root: bool,
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, 'de, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_some(Tracked {
            de: d,
            ctx: self.ctx,
            root: false,
            counted: true,
        })
    }

    fn visit_newtype_struct<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_newtype_struct(Tracked {
            de: d,
            ctx: self.ctx,
            root: false,
            counted: true,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        // serde's derived structs also read an array, as a tuple; kube-apiserver does not.
        if self.fields.is_some() {
            return Err(de::Error::invalid_type(Unexpected::Seq, &self));
        }
        self.inner.visit_seq(TrackedSeq {
            seq,
            ctx: self.ctx,
            next: 0,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(TrackedMap {
            map,
            ctx: self.ctx,
            fields: self.fields,
            root: self.root,
            ordinal: 0,
            fields_seen: 0,
            fields_reported: 0,
            keys: HashMap::new(),
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(TrackedEnum {
            data,
            ctx: self.ctx,
        })
    }
}

/// The seed of a value, tracked.
struct TrackedSeed<'c, 'de, S> {
    seed: S,
    ctx: &'c mut Ctx<'de>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for TrackedSeed<'_, 'de, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Tracked {
            de: d,
            ctx: self.ctx,
            root: false,
            counted: false,
        })
    }
}

struct TrackedSeq<'c, 'de, A> {
    seq: A,
    ctx: &'c mut Ctx<'de>,
    next: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for TrackedSeq<'_, 'de, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.ctx.path.push(Step::Index(self.next));
        self.next += 1;
        let r = self.seq.next_element_seed(TrackedSeed {
            seed,
            ctx: &mut *self.ctx,
        });
        self.ctx.path.pop();
        r
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// What a member of an object is to the types.
#[derive(Clone, Copy)]
enum Member {
    /// The field at this index of the struct's field list.
    Field(usize),
    /// An entry of a map (or of any object not decoded as a struct).
    Entry,
    /// A field the struct does not have.
    Unknown(Unknown),
    /// The top-level `status` of a create body.
    Status,
}

struct TrackedMap<'c, 'de, A> {
    map: A,
    ctx: &'c mut Ctx<'de>,
    fields: Option<&'static [&'static str]>,
    root: bool,
    /// Members read so far.
    ordinal: usize,
    /// Known fields met, by index (the first 64, which is every field of these types), and
    /// those already reported repeated.
    fields_seen: u64,
    fields_reported: u64,
    /// Other keys met, each with whether it was already reported repeated: as many as the
    /// values read (entries, fields kept), the problems (refused fields) or the fields of a
    /// struct.
    keys: HashMap<Cow<'de, str>, bool>,
}

impl<'de, A: MapAccess<'de>> TrackedMap<'_, 'de, A> {
    /// Whether `key` (a `member`) was met before in this object, and if so whether that is
    /// the first time it repeats.
    fn repeated(&mut self, member: Member, key: Cow<'de, str>) -> Option<bool> {
        match member {
            Member::Field(i) if i < 64 => {
                let bit = 1u64 << i;
                if self.fields_seen & bit == 0 {
                    self.fields_seen |= bit;
                    return None;
                }
                let first = self.fields_reported & bit == 0;
                self.fields_reported |= bit;
                Some(first)
            }
            // kube-apiserver never looks at a field it drops, so neither at its repeats.
            Member::Unknown(Unknown::Drop) => None,
            // A repeated field would stop serde's derived structs, and a repeated entry would
            // be read again: always tracked (as many as the fields, or the values read).
            Member::Field(_) | Member::Entry => self.seen(key),
            // Skipped once the problems are full: no longer tracked, so that the keys kept
            // stay as many as the problems (refused fields) or the values read (the others).
            Member::Unknown(_) | Member::Status if self.ctx.problems.full() => None,
            Member::Unknown(_) | Member::Status => self.seen(key),
        }
    }

    fn seen(&mut self, key: Cow<'de, str>) -> Option<bool> {
        match self.keys.get_mut(key.as_ref()) {
            Some(reported) => {
                let first = !*reported;
                *reported = true;
                Some(first)
            }
            None => {
                self.keys.insert(key, false);
                None
            }
        }
    }

    fn skip_value(&mut self) -> Result<(), A::Error> {
        self.map.next_value::<IgnoredAny>()?;
        self.ctx.path.pop();
        Ok(())
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for TrackedMap<'_, 'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key_seed(KeySeed)? else {
                return Ok(None);
            };
            let ordinal = self.ordinal;
            self.ordinal += 1;
            self.ctx.path.push(Step::Key(key.clone()));
            let create_root = self.root && self.ctx.rules.create_body;
            let member = match self.fields.map(|f| f.iter().position(|n| *n == key)) {
                _ if create_root && key == "status" => Member::Status,
                None => Member::Entry,
                Some(Some(i)) => Member::Field(i),
                Some(None) => Member::Unknown((self.ctx.rules.unknown)(&self.ctx.path)),
            };
            if let Some(first) = self.repeated(member, key.clone()) {
                if first {
                    self.ctx
                        .problems
                        .report(Kind::Duplicate, &self.ctx.path, None);
                }
                self.skip_value()?;
                continue;
            }
            match member {
                Member::Field(_) if create_root && self.ctx.shape.null_member(ordinal) => {
                    self.skip_value()?;
                }
                Member::Field(_) | Member::Entry => {
                    let shown = match key {
                        Cow::Borrowed(k) => seed.deserialize(BorrowedStrDeserializer::new(k)),
                        Cow::Owned(k) => seed.deserialize(StringDeserializer::new(k)),
                    };
                    // The path keeps the key until its value is read.
                    return shown.map(Some);
                }
                Member::Status if self.ctx.problems.full() => self.skip_value()?,
                Member::Status => {
                    self.map.next_value_seed(Walk {
                        ctx: &mut *self.ctx,
                        build: false,
                    })?;
                    self.ctx.path.pop();
                }
                Member::Unknown(how) => {
                    self.map.next_value_seed(UnknownSeed {
                        ctx: &mut *self.ctx,
                        how,
                    })?;
                    self.ctx.path.pop();
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let r = self.map.next_value_seed(TrackedSeed {
            seed,
            ctx: &mut *self.ctx,
        });
        self.ctx.path.pop();
        r
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The value of an unknown field, handled as the rules say.
struct UnknownSeed<'c, 'de> {
    ctx: &'c mut Ctx<'de>,
    how: Unknown,
}

impl<'de> DeserializeSeed<'de> for UnknownSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.ctx.unknown_value(self.how, d)
    }
}

struct TrackedEnum<'c, 'de, A> {
    data: A,
    ctx: &'c mut Ctx<'de>,
}

impl<'c, 'de, A: EnumAccess<'de>> EnumAccess<'de> for TrackedEnum<'c, 'de, A> {
    type Error = A::Error;
    type Variant = TrackedEnum<'c, 'de, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let (v, data) = self.data.variant_seed(seed)?;
        Ok((
            v,
            TrackedEnum {
                data,
                ctx: self.ctx,
            },
        ))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for TrackedEnum<'_, 'de, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.data.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.data.newtype_variant_seed(TrackedSeed {
            seed,
            ctx: self.ctx,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.data.tuple_variant(
            len,
            Wrap {
                inner: visitor,
                ctx: self.ctx,
                fields: None,
                root: false,
            },
        )
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.data.struct_variant(
            fields,
            Wrap {
                inner: visitor,
                ctx: self.ctx,
                fields: Some(fields),
                root: false,
            },
        )
    }
}

/// A value without a type (a dropped `status`, a field passed through): read for its
/// repeated keys, and built when `build`. Every value counts; once the problems are full the
/// rest is skipped.
struct Walk<'c, 'de> {
    ctx: &'c mut Ctx<'de>,
    build: bool,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, 'de> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl Walk<'_, '_> {
    fn scalar<E: de::Error>(self, v: impl FnOnce() -> Value) -> Result<Option<Value>, E> {
        self.ctx.count()?;
        Ok(self.build.then(v))
    }
}

impl<'de> Visitor<'de> for Walk<'_, 'de> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.scalar(|| Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.scalar(|| Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.scalar(|| Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.scalar(|| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.scalar(|| Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.scalar(|| Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.scalar(|| Value::Null)
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        self.ctx.count()?;
        let mut out = Vec::new();
        let mut index = 0;
        loop {
            if self.ctx.problems.full() {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                break;
            }
            self.ctx.path.push(Step::Index(index));
            index += 1;
            let next = seq.next_element_seed(Walk {
                ctx: &mut *self.ctx,
                build: self.build,
            });
            self.ctx.path.pop();
            match next? {
                Some(v) => out.extend(v),
                None => break,
            }
        }
        Ok(self.build.then_some(Value::Array(out)))
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        self.ctx.count()?;
        let mut out = Map::new();
        let mut keys: HashMap<Cow<'de, str>, bool> = HashMap::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            // Once the problems are full the answer is a 400 whatever this holds.
            if self.ctx.problems.full() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.ctx.path.push(Step::Key(key.clone()));
            if let Some(reported) = keys.get_mut(&key) {
                if !*reported {
                    *reported = true;
                    self.ctx
                        .problems
                        .report(Kind::Duplicate, &self.ctx.path, None);
                }
                map.next_value::<IgnoredAny>()?;
                self.ctx.path.pop();
                continue;
            } else {
                keys.insert(key.clone(), false);
            }
            let v = map.next_value_seed(Walk {
                ctx: &mut *self.ctx,
                build: self.build,
            })?;
            self.ctx.path.pop();
            if let Some(v) = v {
                out.insert(key.into_owned(), v);
            }
        }
        Ok(self.build.then_some(Value::Object(out)))
    }
}
