//! Shard selectors: a slice of a resource's objects chosen by a hash of one of their fields, the
//! way kube-apiserver's server-side sharded list and watch chooses them (the
//! `ShardedListAndWatch` feature, alpha in Kubernetes 1.36).
//!
//! The field (`metadata.uid` or `metadata.namespace`) is hashed with 64-bit FNV-1a over its UTF-8
//! bytes ([`shard_hash`]; an absent field hashes as the empty string, as the server reads it);
//! an object belongs to a selector when its hash lies in one of the selector's half-open ranges
//! `[start, end)`, where `end` may be 2^64. On the wire a selector is the expression the server
//! parses and echoes back, each range a `shardRange(...)` call, joined by `||`:
//!
//! ```text
//! shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
//! ```
//!
//! A [`ShardSelector`] always renders in the server's own normal form (a space after each
//! comma, ` || ` between calls, 16 lower-case hex digits), so the echo of a server that applied
//! it compares equal to what was sent. [`FromStr`] reads what the server accepts (spaces
//! anywhere between tokens, either quote, parentheses around calls) and refuses the rest with a
//! [`ShardSelectorError`] naming the problem: a server answers a bad selector with a
//! `500 Internal Server Error`, which a client would retry, so bad input must be caught here.
//!
//! Invariants of [`ShardSelector`] (checked at construction, and by the property test
//! `rendering_and_parsing_are_inverse`):
//! - **SR1**: it has at least one range and at most [`ShardSelector::MAX_RANGES`];
//! - **SR2**: every range has `start < end <= 2^64`;
//! - **SR3**: parsing its rendering gives the same selector back.
//!
//! ```
//! use store_index::{DynamicObject, ShardField, ShardRange, ShardSelector};
//!
//! // The second of four equal slices of the uid hash space.
//! let selector = ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(1, 4)?])?;
//! assert_eq!(
//!     selector.to_string(),
//!     "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')"
//! );
//! assert_eq!(selector.to_string().parse::<ShardSelector>()?, selector);
//!
//! // FNV-1a 64 of "383d4e86-3295-4b65-b95d-bc4dd48c9fde" is 0x229986c8b34b011c: the first slice.
//! let pod = DynamicObject::new("v1", "Pod").named("a").with_uid("383d4e86-3295-4b65-b95d-bc4dd48c9fde");
//! assert!(!selector.matches(&pod));
//! assert!(ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(0, 4)?])?.matches(&pod));
//! # Ok::<(), store_index::ShardSelectorError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use crate::object::Object;

/// 2^64: the exclusive end of the whole hash space.
const SPACE_END: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `value`'s UTF-8 bytes: the hash a shard selector ranges over.
///
/// ```
/// assert_eq!(store_index::shard_hash(""), 0xcbf29ce484222325);
/// assert_eq!(store_index::shard_hash("default"), 0xebada5168620c5fe);
/// ```
pub fn shard_hash(value: &str) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    value.bytes().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// The object field a shard selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardField {
    /// `object.metadata.uid`: objects spread evenly; an object never changes slice.
    Uid,
    /// `object.metadata.namespace`: all of a namespace's objects in one slice (cluster-scoped
    /// objects hash the empty string).
    Namespace,
}

impl ShardField {
    /// The field's path in the selector grammar (`object.metadata.uid`).
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    /// The value of this field in `object` (the empty string when absent, as the server reads
    /// it).
    pub fn value_of<O: Object + ?Sized>(self, object: &O) -> &str {
        match self {
            ShardField::Uid => object.uid(),
            ShardField::Namespace => object.namespace(),
        }
        .unwrap_or("")
    }

    fn from_path(path: &str) -> Option<Self> {
        match path {
            "object.metadata.uid" => Some(ShardField::Uid),
            "object.metadata.namespace" => Some(ShardField::Namespace),
            _ => None,
        }
    }
}

/// One half-open range `[start, end)` of the 64-bit hash space; `end` may be 2^64, so a range
/// can reach the last hash value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    start: u64,
    /// Invariant SR2: `start < end <= 2^64`.
    end: u128,
}

impl ShardRange {
    /// The whole hash space, `[0, 2^64)`.
    pub const FULL: ShardRange = ShardRange {
        start: 0,
        end: SPACE_END,
    };

    /// `[start, end)`: refused unless `start < end <= 2^64`.
    pub fn new(start: u64, end: u128) -> Result<Self, ShardSelectorError> {
        if end > SPACE_END {
            return Err(ShardSelectorError::BoundTooLarge { end });
        }
        if u128::from(start) >= end {
            return Err(ShardSelectorError::EmptyRange { start, end });
        }
        Ok(ShardRange { start, end })
    }

    /// Slice `index` of `count` equal slices of the hash space (the last one absorbs the
    /// remainder): `equal_part(0, 2)` is `[0, 2^63)`, `equal_part(1, 2)` is `[2^63, 2^64)`.
    pub fn equal_part(index: u32, count: u32) -> Result<Self, ShardSelectorError> {
        if index >= count {
            return Err(ShardSelectorError::NoSuchPart { index, count });
        }
        let bound = |i: u32| SPACE_END * u128::from(i) / u128::from(count);
        ShardRange::new(bound(index) as u64, bound(index + 1))
    }

    /// The first hash in the range.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The first hash after the range (2^64 at most).
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` lies in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }
}

/// Which objects of a resource a list or watch selects, by the hash of one field: those whose
/// hash lies in any of its ranges. On the wire it is kube-apiserver's `shardRange(...)` calls joined
/// by `||`, in the normal form its `Display` writes and `FromStr` reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    /// Invariants SR1 and SR2: between 1 and `MAX_RANGES` ranges, each non-empty; kept in the
    /// order given, as the server keeps and echoes them.
    ranges: Vec<ShardRange>,
}

impl ShardSelector {
    /// The most ranges a selector may have: each is about 80 bytes of query string, and a request
    /// line must stay within what servers and proxies accept.
    pub const MAX_RANGES: usize = 64;

    /// Objects whose `field` hashes into any of `ranges` (in this order): refused when there is
    /// none or more than [`MAX_RANGES`](Self::MAX_RANGES).
    pub fn new(
        field: ShardField,
        ranges: impl IntoIterator<Item = ShardRange>,
    ) -> Result<Self, ShardSelectorError> {
        let ranges: Vec<ShardRange> = ranges.into_iter().collect();
        if ranges.is_empty() {
            return Err(ShardSelectorError::NoRanges);
        }
        if ranges.len() > Self::MAX_RANGES {
            return Err(ShardSelectorError::TooManyRanges {
                count: ranges.len(),
            });
        }
        Ok(ShardSelector { field, ranges })
    }

    /// The field hashed.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order given.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether a field value of `value` is selected.
    pub fn matches_value(&self, value: &str) -> bool {
        let hash = shard_hash(value);
        self.ranges.iter().any(|r| r.contains(hash))
    }

    /// Whether `object` is selected.
    pub fn matches<O: Object + ?Sized>(&self, object: &O) -> bool {
        self.matches_value(self.field.value_of(object))
    }
}

fn write_bound(f: &mut fmt::Formatter<'_>, bound: u128) -> fmt::Result {
    if bound == SPACE_END {
        f.write_str("'0x10000000000000000'")
    } else {
        write!(f, "'0x{bound:016x}'")
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(f, "shardRange({}, ", self.field.path())?;
            write_bound(f, u128::from(range.start))?;
            f.write_str(", ")?;
            write_bound(f, range.end)?;
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Which bound of a range a [`ShardSelectorError::BadBound`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeBound {
    /// The first argument after the field (`start`).
    Start,
    /// The last argument (`end`).
    End,
}

impl fmt::Display for RangeBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RangeBound::Start => "start",
            RangeBound::End => "end",
        })
    }
}

/// Why a shard selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardSelectorError {
    /// The text was empty (omit the selector to select everything).
    #[error("empty shard selector (omit it to select every object)")]
    Empty,
    /// The text does not follow the grammar.
    #[error("shard selector syntax: expected {expected} at byte {position}, found {found}")]
    Syntax {
        /// Byte offset of the problem.
        position: usize,
        /// What the grammar allows there.
        expected: &'static str,
        /// What is there instead (quoted text, or `the end`).
        found: String,
    },
    /// A function other than `shardRange`.
    #[error(
        "unsupported function {0:?} in a shard selector: only shardRange() and || are allowed"
    )]
    UnsupportedFunction(String),
    /// A field other than `object.metadata.uid` or `object.metadata.namespace`.
    #[error(
        "unsupported shard field {0:?}: supported are object.metadata.uid and object.metadata.namespace"
    )]
    UnsupportedField(String),
    /// The ranges name different fields.
    #[error("all ranges of a shard selector must hash the same field, found {first} and {other}")]
    MixedFields {
        /// The first range's field path.
        first: &'static str,
        /// The field of a later range.
        other: &'static str,
    },
    /// A bound that is not `'0x'` followed by 16 lower-case hex digits (or `'0x10000000000000000'`
    /// for the end of the space).
    #[error("shard range {which} {value:?} must be '0x' and 16 lower-case hex digits, or '0x10000000000000000' (2^64)")]
    BadBound {
        /// Which bound.
        which: RangeBound,
        /// The text given.
        value: String,
    },
    /// `start >= end`.
    #[error("shard range start {start:#018x} must be less than its end {end:#x}")]
    EmptyRange {
        /// The start.
        start: u64,
        /// The end.
        end: u128,
    },
    /// An end beyond 2^64.
    #[error("shard range end {end:#x} is beyond the hash space (2^64 at most)")]
    BoundTooLarge {
        /// The end given.
        end: u128,
    },
    /// No range at all.
    #[error("a shard selector needs at least one range")]
    NoRanges,
    /// More ranges than [`ShardSelector::MAX_RANGES`].
    #[error("a shard selector has {count} ranges, more than the {max} allowed", max = ShardSelector::MAX_RANGES)]
    TooManyRanges {
        /// How many were given.
        count: usize,
    },
    /// [`ShardRange::equal_part`] with `index >= count`.
    #[error("there is no part {index} of {count} equal parts")]
    NoSuchPart {
        /// The index asked for.
        index: u32,
        /// The number of parts.
        count: u32,
    },
}

impl FromStr for ShardSelector {
    type Err = ShardSelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().is_empty() {
            return Err(ShardSelectorError::Empty);
        }
        let mut parser = Parser { text, at: 0 };
        let mut calls = Vec::new();
        parser.expression(&mut calls)?;
        parser.skip_space();
        if parser.at < text.len() {
            return Err(parser.syntax("`||` or the end"));
        }
        let field = calls[0].0;
        if let Some((other, _)) = calls.iter().find(|(f, _)| *f != field) {
            return Err(ShardSelectorError::MixedFields {
                first: field.path(),
                other: other.path(),
            });
        }
        ShardSelector::new(field, calls.into_iter().map(|(_, range)| range))
    }
}

/// A recursive-descent reader of the selector grammar:
/// `expression := term ('||' term)*`, `term := '(' expression ')' | call`,
/// `call := 'shardRange' '(' path ',' string ',' string ')'`, `path := ident ('.' ident)*`.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn syntax(&self, expected: &'static str) -> ShardSelectorError {
        let found = match self.rest().chars().next() {
            None => "the end".to_string(),
            Some(_) => format!("{:?}", self.rest().chars().take(12).collect::<String>()),
        };
        ShardSelectorError::Syntax {
            position: self.at,
            expected,
            found,
        }
    }

    /// Consumes `token` (after spaces) if it is next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str, expected: &'static str) -> Result<(), ShardSelectorError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.syntax(expected))
        }
    }

    fn expression(
        &mut self,
        calls: &mut Vec<(ShardField, ShardRange)>,
    ) -> Result<(), ShardSelectorError> {
        loop {
            if calls.len() >= ShardSelector::MAX_RANGES {
                // Bounded before reading further: a hostile text cannot grow the list.
                return Err(ShardSelectorError::TooManyRanges {
                    count: calls.len() + 1,
                });
            }
            self.term(calls)?;
            if !self.eat("||") {
                return Ok(());
            }
        }
    }

    fn term(
        &mut self,
        calls: &mut Vec<(ShardField, ShardRange)>,
    ) -> Result<(), ShardSelectorError> {
        if self.eat("(") {
            self.expression(calls)?;
            return self.expect(")", "`)`");
        }
        calls.push(self.call()?);
        Ok(())
    }

    fn identifier(&mut self) -> Option<String> {
        self.skip_space();
        let rest = self.rest();
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return None;
        }
        let start = self.at;
        self.at += len;
        Some(self.text[start..self.at].to_string())
    }

    fn call(&mut self) -> Result<(ShardField, ShardRange), ShardSelectorError> {
        let Some(function) = self.identifier() else {
            return Err(self.syntax("shardRange(...) or `(`"));
        };
        self.expect("(", "`(` after a function name")?;
        if function != "shardRange" {
            return Err(ShardSelectorError::UnsupportedFunction(function));
        }
        let Some(mut path) = self.identifier() else {
            return Err(self.syntax("a field path such as object.metadata.uid"));
        };
        while self.eat(".") {
            let Some(part) = self.identifier() else {
                return Err(self.syntax("a field name after `.`"));
            };
            path.push('.');
            path.push_str(&part);
        }
        let field =
            ShardField::from_path(&path).ok_or(ShardSelectorError::UnsupportedField(path))?;
        self.expect(",", "`,` after the field")?;
        let start = self.bound(RangeBound::Start)?;
        self.expect(",", "`,` after the start")?;
        let end = self.bound(RangeBound::End)?;
        self.expect(")", "`)` after the end")?;
        let start = u64::try_from(start).map_err(|_| ShardSelectorError::BadBound {
            which: RangeBound::Start,
            value: format!("0x{start:x}"),
        })?;
        Ok((field, ShardRange::new(start, end)?))
    }

    /// A quoted bound: `'0x` and 16 lower-case hex digits `'`, or `'0x10000000000000000'`.
    fn bound(&mut self, which: RangeBound) -> Result<u128, ShardSelectorError> {
        self.skip_space();
        let quote = match self.rest().chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(self.syntax("a quoted hex bound such as '0x8000000000000000'")),
        };
        let body_start = self.at + 1;
        let Some(len) = self.text[body_start..].find(quote) else {
            return Err(self.syntax("a closing quote"));
        };
        let value = &self.text[body_start..body_start + len];
        self.at = body_start + len + 1;
        let bad = || ShardSelectorError::BadBound {
            which,
            value: value.to_string(),
        };
        let digits = value.strip_prefix("0x").ok_or_else(bad)?;
        let lower_hex = digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        match digits.len() {
            16 if lower_hex => u128::from_str_radix(digits, 16).map_err(|_| bad()),
            17 if digits == "10000000000000000" => Ok(SPACE_END),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;
    use proptest::prelude::*;

    /// FNV-1a 64 values computed apart from this code (Python, over the UTF-8 bytes); the uids
    /// are ConfigMaps' of a kube-apiserver 1.36.3, whose sharded list agreed with them.
    const REFERENCE: &[(&str, u64)] = &[
        ("", 0xcbf29ce484222325),
        ("a", 0xaf63dc4c8601ec8c),
        ("default", 0xebada5168620c5fe),
        ("kube-system", 0xdf65c7bc1d82b35e),
        ("6a401f32-7c09-4900-82e3-293f835f0157", 0x86ce133f3c33c1c1),
        ("fa18191a-18b4-436f-808d-41bea75760e0", 0x628250b592fab14c),
        ("383d4e86-3295-4b65-b95d-bc4dd48c9fde", 0x229986c8b34b011c),
        ("ünïcode", 0xb1b0d40350a25beb),
    ];

    #[test]
    fn the_hash_is_fnv1a_64_over_utf8_bytes() {
        for &(value, hash) in REFERENCE {
            assert_eq!(shard_hash(value), hash, "{value:?}");
        }
    }

    #[test]
    fn an_object_is_selected_by_the_hash_of_its_field() {
        let half = |i| ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(i, 2).unwrap()]);
        let (low, high) = (half(0).unwrap(), half(1).unwrap());
        for &(uid, hash) in REFERENCE {
            let object = DynamicObject::new("v1", "ConfigMap")
                .named("x")
                .with_uid(uid);
            assert_eq!(low.matches(&object), hash < 1 << 63, "{uid}");
            assert_eq!(high.matches(&object), hash >= 1 << 63, "{uid}");
        }
        let by_namespace = ShardSelector::new(
            ShardField::Namespace,
            [ShardRange::new(0xebada5168620c5fe, 0xebada5168620c5ff).unwrap()],
        )
        .unwrap();
        let in_default = DynamicObject::new("v1", "Pod").within("default").named("a");
        let cluster_scoped = DynamicObject::new("v1", "Node").named("a");
        assert!(by_namespace.matches(&in_default));
        assert!(!by_namespace.matches(&cluster_scoped));
    }

    #[test]
    fn equal_parts_tile_the_space() {
        for count in [1, 2, 3, 7, 64, 1000] {
            let parts: Vec<_> = (0..count)
                .map(|i| ShardRange::equal_part(i, count).unwrap())
                .collect();
            assert_eq!(parts[0].start(), 0);
            assert_eq!(parts[count as usize - 1].end(), SPACE_END);
            for pair in parts.windows(2) {
                assert_eq!(u128::from(pair[1].start()), pair[0].end());
            }
        }
        assert_eq!(
            ShardRange::equal_part(2, 2),
            Err(ShardSelectorError::NoSuchPart { index: 2, count: 2 })
        );
    }

    #[test]
    fn renders_the_servers_normal_form() {
        let selector = ShardSelector::new(
            ShardField::Uid,
            [
                ShardRange::equal_part(0, 4).unwrap(),
                ShardRange::equal_part(3, 4).unwrap(),
            ],
        )
        .unwrap();
        // As kube-apiserver 1.36.3 echoed it in a list's shardInfo.
        assert_eq!(
            selector.to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || \
             shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
        );
    }

    #[test]
    fn reads_what_the_server_accepts() {
        let expected = ShardSelector::new(
            ShardField::Uid,
            [ShardRange::new(0, 0x8000000000000000).unwrap()],
        )
        .unwrap();
        for text in [
            "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
            "  shardRange  (  object . metadata . uid ,'0x0000000000000000','0x8000000000000000' )  ",
            r#"shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")"#,
            "(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'))",
        ] {
            assert_eq!(text.parse::<ShardSelector>(), Ok(expected.clone()), "{text}");
        }
        let two: ShardSelector = "(shardRange(object.metadata.namespace, '0x0000000000000000', \
             '0x4000000000000000')) || shardRange(object.metadata.namespace, \
             '0x8000000000000000', '0x10000000000000000')"
            .parse()
            .unwrap();
        assert_eq!(two.field(), ShardField::Namespace);
        assert_eq!(two.ranges().len(), 2);
    }

    #[test]
    fn refuses_what_the_server_refuses_naming_the_problem() {
        use ShardSelectorError as E;
        let error = |text: &str| text.parse::<ShardSelector>().unwrap_err();
        assert_eq!(error("  "), E::Empty);
        assert!(matches!(error("bogus"), E::Syntax { position: 5, .. }));
        assert!(matches!(
            error("shardRange("),
            E::Syntax { position: 11, .. }
        ));
        assert_eq!(
            error("foo(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"),
            E::UnsupportedFunction("foo".into())
        );
        assert_eq!(
            error("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')"),
            E::UnsupportedField("object.metadata.name".into())
        );
        assert_eq!(
            error("shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')"),
            E::UnsupportedField("metadata.uid".into())
        );
        for (text, which, value) in [
            ("'0x0', '0x8000000000000000'", RangeBound::Start, "0x0"),
            (
                "'0X0000000000000000', '0x8000000000000000'",
                RangeBound::Start,
                "0X0000000000000000",
            ),
            (
                "'0x000000000000000g', '0x8000000000000000'",
                RangeBound::Start,
                "0x000000000000000g",
            ),
            (
                "'0x0000000000000000', '0xFFFFFFFFFFFFFFFF'",
                RangeBound::End,
                "0xFFFFFFFFFFFFFFFF",
            ),
            (
                "'0x0000000000000000', '0x10000000000000001'",
                RangeBound::End,
                "0x10000000000000001",
            ),
            (
                "'0x10000000000000000', '0x10000000000000000'",
                RangeBound::Start,
                "0x10000000000000000",
            ),
        ] {
            assert_eq!(
                error(&format!("shardRange(object.metadata.uid, {text})")),
                E::BadBound {
                    which,
                    value: value.into()
                },
                "{text}"
            );
        }
        assert!(matches!(
            error("shardRange(object.metadata.uid, 0, '0x8000000000000000')"),
            E::Syntax { .. }
        ));
        assert!(matches!(
            error("shardRange(object.metadata.uid, '0x0000000000000000')"),
            E::Syntax { .. }
        ));
        assert!(matches!(
            error("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000',)"),
            E::Syntax { .. }
        ));
        assert_eq!(
            error("shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')"),
            E::EmptyRange {
                start: 1 << 63,
                end: 1 << 63
            }
        );
        assert_eq!(
            error(
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || \
                 shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
            ),
            E::MixedFields { first: "object.metadata.uid", other: "object.metadata.namespace" }
        );
        assert!(matches!(
            error(
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') && \
                 shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
            ),
            E::Syntax { .. }
        ));
        let many =
            vec!["shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"; 65]
                .join(" || ");
        assert_eq!(error(&many), E::TooManyRanges { count: 65 });
    }

    #[test]
    fn constructors_refuse_impossible_ranges() {
        assert_eq!(
            ShardRange::new(5, 5),
            Err(ShardSelectorError::EmptyRange { start: 5, end: 5 })
        );
        assert_eq!(
            ShardRange::new(0, SPACE_END + 1),
            Err(ShardSelectorError::BoundTooLarge { end: SPACE_END + 1 })
        );
        assert_eq!(
            ShardSelector::new(ShardField::Uid, []),
            Err(ShardSelectorError::NoRanges)
        );
        assert_eq!(
            ShardSelector::new(ShardField::Uid, vec![ShardRange::FULL; 65]),
            Err(ShardSelectorError::TooManyRanges { count: 65 })
        );
    }

    fn any_range() -> impl Strategy<Value = ShardRange> {
        (any::<u64>(), 1u128..=SPACE_END).prop_map(|(a, b)| {
            let start = a.min((b - 1) as u64);
            ShardRange::new(start, b.max(u128::from(start) + 1)).unwrap()
        })
    }

    proptest! {
        /// SR1–SR3: any selector built from valid ranges renders to text that parses back to it,
        /// and membership agrees with the ranges, bound by bound.
        #[test]
        fn rendering_and_parsing_are_inverse(
            namespace in any::<bool>(),
            ranges in prop::collection::vec(any_range(), 1..8),
            value in ".{0,40}",
        ) {
            let field = if namespace { ShardField::Namespace } else { ShardField::Uid };
            let selector = ShardSelector::new(field, ranges.clone()).unwrap();
            prop_assert_eq!(selector.to_string().parse::<ShardSelector>(), Ok(selector.clone()));
            let hash = shard_hash(&value);
            let inside = ranges.iter().any(|r| u128::from(r.start()) <= u128::from(hash) && u128::from(hash) < r.end());
            prop_assert_eq!(selector.matches_value(&value), inside);
        }
    }
}
