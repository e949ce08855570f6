//! Decoding with every list allocated at exactly its length, in one pass and without a copy.
//!
//! JSON does not say how long an array is, so serde grows each `Vec` it decodes by doubling: a
//! decoded object keeps up to half of each list's capacity unused, and its larger elements are
//! moved at each growth. When the object's text is known before it is decoded (a watch event's
//! object, whose extent the watch decoder finds), one quick pass counts the elements of each of
//! its arrays ([`ArrayLengths::scan`]); the decode then runs through [`Exact`], a deserializer
//! wrapper that hands each sequence its count as serde's size hint, so `Vec`s are allocated once,
//! at their length.
//!
//! Invariants (checked by this module's tests):
//! - **S1 (same value)**: decoding through [`Exact`] gives the same value as decoding without it,
//!   whatever the text: the counts are hints, never used for anything but capacity.
//! - **S2 (in step)**: the counts are handed out in the order the arrays' `[` appear in the text,
//!   which is the order serde visits them in, since every value (ignored ones included) is visited
//!   through the wrapper. A sequence that turns out to have another length than its count puts the
//!   wrapper out of step, and no count is handed out after it: a wrong count costs at most that
//!   one list's capacity (serde caps a hint at 1 MiB of elements), never every list after it.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// The element counts of a JSON text's arrays, in the order of their `[`, handed out one by one.
pub(crate) struct ArrayLengths {
    lengths: Vec<u32>,
    next: Cell<usize>,
    in_step: Cell<bool>,
}

impl ArrayLengths {
    /// Counts the elements of every array of `text` (valid JSON or not: on malformed text the
    /// counts are whatever the scan found, and the decode's own error is what the caller sees).
    pub(crate) fn scan(text: &[u8]) -> Self {
        // Open containers: for an array, its index in `lengths`, its commas so far and whether it
        // has an element; `None` for an object.
        let mut open: Vec<Option<(usize, u32, bool)>> = Vec::new();
        let mut lengths = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let c = text[i];
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
                b',' => {
                    if let Some(Some((_, commas, _))) = open.last_mut() {
                        *commas += 1;
                    }
                }
                b']' | b'}' => {
                    if let Some(Some((index, commas, nonempty))) = open.pop() {
                        lengths[index] = commas + u32::from(nonempty);
                    }
                }
                _ => {
                    // A value starts or goes on (a string, a container, a number or a literal).
                    if let Some(Some((_, _, nonempty))) = open.last_mut() {
                        *nonempty = true;
                    }
                    match c {
                        b'"' => {
                            // To the closing quote, a byte search at a time (escapes skipped).
                            i += 1;
                            loop {
                                let rest = text.get(i..).unwrap_or_default();
                                match memchr::memchr2(b'"', b'\\', rest) {
                                    Some(at) if rest[at] == b'"' => {
                                        i += at;
                                        break;
                                    }
                                    Some(at) => i += at + 2,
                                    None => {
                                        i = text.len();
                                        break;
                                    }
                                }
                            }
                            if i >= text.len() {
                                break;
                            }
                        }
                        b'[' => {
                            open.push(Some((lengths.len(), 0, false)));
                            lengths.push(0);
                        }
                        b'{' => open.push(None),
                        _ => {}
                    }
                }
            }
            i += 1;
        }
        ArrayLengths {
            lengths,
            next: Cell::new(0),
            in_step: Cell::new(true),
        }
    }

    /// The next array's count, if still in step (S2).
    fn take(&self) -> Option<usize> {
        let next = self.next.get();
        self.next.set(next + 1);
        if !self.in_step.get() {
            return None;
        }
        let length = self.lengths.get(next).map(|&n| n as usize);
        if length.is_none() {
            self.in_step.set(false);
        }
        length
    }
}

/// A deserializer that gives every sequence inside it its element count as size hint (see the
/// [module docs](self)).
pub(crate) struct Exact<'l, D> {
    inner: D,
    lengths: &'l ArrayLengths,
}

impl<'l, D> Exact<'l, D> {
    /// Wraps `inner`, whose text `lengths` was scanned from.
    pub(crate) fn new(inner: D, lengths: &'l ArrayLengths) -> Self {
        Exact { inner, lengths }
    }
}

/// Forwards each `deserialize_*` method to the inner deserializer with the visitor wrapped.
macro_rules! forward_wrapped {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* Wrap { inner: visitor, lengths: self.lengths })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Exact<'_, D> {
    type Error = D::Error;

    forward_wrapped! {
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
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
    }

    /// Visited, not skipped: an ignored value's arrays are counted too, so the wrapper stays in
    /// step (S2).
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(Wrap {
            inner: visitor,
            lengths: self.lengths,
        })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor whose nested deserializers, sequences, maps and enums are wrapped in turn.
struct Wrap<'l, V> {
    inner: V,
    lengths: &'l ArrayLengths,
}

/// Forwards `visit_*` methods that carry a plain value.
macro_rules! forward_values {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: serde::de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_values! {
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

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Exact::new(d, self.lengths))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Exact::new(d, self.lengths))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let expected = self.lengths.take();
        let mut seq = ExactSeq {
            inner: seq,
            lengths: self.lengths,
            expected,
            seen: 0,
        };
        let value = self.inner.visit_seq(&mut seq)?;
        if expected != Some(seq.seen) {
            // The count was not this array's: hand out no more (S2).
            self.lengths.in_step.set(false);
        }
        Ok(value)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(ExactMap {
            inner: map,
            lengths: self.lengths,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(ExactEnum {
            inner: data,
            lengths: self.lengths,
        })
    }
}

/// A seed whose deserializer is wrapped.
struct Seed<'l, S> {
    inner: S,
    lengths: &'l ArrayLengths,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Exact::new(d, self.lengths))
    }
}

struct ExactSeq<'l, A> {
    inner: A,
    lengths: &'l ArrayLengths,
    /// The array's count from the scan, if still in step.
    expected: Option<usize>,
    /// Elements read so far.
    seen: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for ExactSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let element = self.inner.next_element_seed(Seed {
            inner: seed,
            lengths: self.lengths,
        })?;
        self.seen += usize::from(element.is_some());
        Ok(element)
    }

    fn size_hint(&self) -> Option<usize> {
        match self.expected {
            Some(n) => Some(n.saturating_sub(self.seen)),
            None => self.inner.size_hint(),
        }
    }
}

struct ExactMap<'l, A> {
    inner: A,
    lengths: &'l ArrayLengths,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for ExactMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.inner.next_key_seed(Seed {
            inner: seed,
            lengths: self.lengths,
        })
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(Seed {
            inner: seed,
            lengths: self.lengths,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

struct ExactEnum<'l, A> {
    inner: A,
    lengths: &'l ArrayLengths,
}

impl<'de, 'l, A: EnumAccess<'de>> EnumAccess<'de> for ExactEnum<'l, A> {
    type Error = A::Error;
    type Variant = ExactEnum<'l, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, variant) = self.inner.variant_seed(Seed {
            inner: seed,
            lengths: self.lengths,
        })?;
        Ok((
            value,
            ExactEnum {
                inner: variant,
                lengths: self.lengths,
            },
        ))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for ExactEnum<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.newtype_variant_seed(Seed {
            inner: seed,
            lengths: self.lengths,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.inner.tuple_variant(
            len,
            Wrap {
                inner: visitor,
                lengths: self.lengths,
            },
        )
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.inner.struct_variant(
            fields,
            Wrap {
                inner: visitor,
                lengths: self.lengths,
            },
        )
    }
}

/// Decodes a `T` whose JSON is exactly `text` (whitespace may follow), every list at its length.
pub fn from_str_exact<'de, T: serde::Deserialize<'de>>(
    text: &'de str,
) -> Result<T, serde_json::Error> {
    let lengths = ArrayLengths::scan(text.as_bytes());
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(Exact::new(&mut de, &lengths))?;
    de.end()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::IgnoredAny;
    use serde_json::Value;

    #[test]
    fn the_scan_counts_each_array_in_the_order_of_its_bracket() {
        let text = br#"{"a":[1,[2,3],[],"x,]\"[,"],"b":{"c":[{"d":[true]}, null]},"e":"[,"}"#;
        let lengths = ArrayLengths::scan(text);
        assert_eq!(lengths.lengths, vec![4, 2, 0, 2, 1]);
        // An unterminated string ends the scan; arrays not closed keep what was counted.
        let lengths = ArrayLengths::scan(br#"[1,[2,"3,]"#);
        assert_eq!(lengths.lengths, vec![0, 0]);
    }

    #[test]
    fn typed_vectors_get_exactly_their_length() {
        #[derive(serde::Deserialize)]
        struct Obj {
            env: Vec<String>,
            conditions: Vec<Condition>,
            #[allow(dead_code)]
            other: Option<Value>,
        }
        #[derive(serde::Deserialize)]
        struct Condition {
            reasons: Vec<u8>,
        }
        let text = r#"{"unknown":[[1],[2,3]],"env":["a","b","c"],"other":{"x":[1,2]},
            "conditions":[{"reasons":[1,2,3,4,5]},{"reasons":[]},{"reasons":[9]},{"reasons":[1]},{"reasons":[2]}]}"#;
        let obj: Obj = from_str_exact(text).unwrap();
        assert_eq!((obj.env.len(), obj.env.capacity()), (3, 3));
        assert_eq!((obj.conditions.len(), obj.conditions.capacity()), (5, 5));
        assert_eq!(obj.conditions[0].reasons.capacity(), 5);
        // Without the counts serde doubles: room for 4 and 8.
        let plain: Obj = serde_json::from_str(text).unwrap();
        assert_eq!(plain.env.capacity(), 4);
    }

    #[test]
    fn a_count_that_does_not_fit_puts_the_wrapper_out_of_step() {
        let lengths = ArrayLengths {
            lengths: vec![1, 2],
            next: Cell::new(0),
            in_step: Cell::new(true),
        };
        let mut de = serde_json::Deserializer::from_str("[[1,2,3],[4,5]]");
        let v: Vec<Vec<u8>> =
            serde::Deserialize::deserialize(Exact::new(&mut de, &lengths)).unwrap();
        assert_eq!(v, vec![vec![1, 2, 3], vec![4, 5]]);
        assert!(!lengths.in_step.get(), "the first array's count was wrong");
        assert_eq!(lengths.take(), None, "no count is handed out after it");
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(Value::from),
            "[a-z\\[\\]{},:\"\\\\ ]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// S1 and S2: any JSON decodes through the wrapper to what it decodes to without it, and
        /// every count matches its array (the wrapper never goes out of step on valid JSON).
        #[test]
        fn proptest_exact_decoding_changes_nothing_but_capacity(value in any_json()) {
            let text = serde_json::to_string_pretty(&value).unwrap();
            let lengths = ArrayLengths::scan(text.as_bytes());
            let mut de = serde_json::Deserializer::from_str(&text);
            let decoded: Value = serde::Deserialize::deserialize(Exact::new(&mut de, &lengths)).unwrap();
            prop_assert_eq!(&decoded, &value);
            prop_assert!(lengths.in_step.get());
            // Ignored values are walked, so the counts stay in step for what follows them.
            let wrapped = format!("[{text},{text}]");
            let lengths = ArrayLengths::scan(wrapped.as_bytes());
            let mut de = serde_json::Deserializer::from_str(&wrapped);
            let (_, second): (IgnoredAny, Value) =
                serde::Deserialize::deserialize(Exact::new(&mut de, &lengths)).unwrap();
            prop_assert_eq!(&second, &value);
            prop_assert!(lengths.in_step.get());
        }
    }
}
