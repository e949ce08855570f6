//! A message's wire bytes read through serde as Kubernetes' JSON form of it, with no JSON tree in
//! between: what [`decode_message_as`](super::transcode::decode_message_as) builds as a
//! `serde_json::Value`, handed field by field to any `Deserialize` type (a `k8s_openapi` object,
//! `DynamicObject`, a struct of your own). [`convert::decode_message_into`](super::convert::decode_message_into)
//! is its entry point.
//!
//! The walk is the transcoder's (`transcode::wire_to_json`), kept lazy: a message's fields are
//! read (spans of the input, nothing decoded) when the type asks for the message, and a field's
//! value is converted only when the type asks for it, straight into what it builds (a string
//! once, into the type's own `String`). The types whose JSON differs from their message
//! (`Time`, `Quantity`, `IntOrString`, …) are converted as the tree builder converts them, and
//! the same fields are left out (nulls, empty strings, empty packed lists).
//!
//! Invariant **WS1**: deserializing any type from this reader gives what `serde_json::from_value`
//! gives from `decode_message_as`'s JSON of the same bytes, or both fail (the tests
//! `the_serde_reader_agrees_with_the_json_tree_*` in `transcode.rs`, on realistic objects and on
//! generated, damaged and doubled messages, into `serde_json::Value` and into `k8s_openapi`
//! types).

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use base64::Engine as _;
use bytes::Bytes;
use prost_reflect::{Kind, MessageDescriptor};
use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use smallvec::{smallvec, SmallVec};

use super::transcode::{
    is_inline, items_wrapper, json_name, next_raw, read_fixed, read_varint, wire_type, Raw,
    DURATION, FIELDS_V1, FIXED32, FIXED64, INT_OR_STRING, LEN, MAX_DEPTH, MICRO_TIME, QUANTITY,
    RAW_EXTENSION, TIME, VARINT,
};
use super::{time, ProtobufError};

/// An error of the reader: the transcoder's error where the bytes are at fault, a
/// [`ProtobufError::Message`] carrying the type's complaint where the object does not fit the
/// type; `at` is where, innermost first, gathered as the error travels out (nothing is spent on
/// paths while nothing fails).
#[derive(Debug)]
pub(super) struct DeError {
    error: ProtobufError,
    at: Vec<String>,
}

impl DeError {
    fn wire(error: ProtobufError) -> DeError {
        DeError {
            error,
            at: Vec::new(),
        }
    }

    fn message(why: impl Into<String>) -> DeError {
        DeError::wire(ProtobufError::Message {
            path: String::new(),
            why: why.into(),
        })
    }

    fn at(mut self, segment: impl FnOnce() -> String) -> DeError {
        self.at.push(segment());
        self
    }

    /// The error as the transcoder reports it, its path starting at `root` (the kind).
    pub(super) fn into_protobuf(self, root: &str) -> ProtobufError {
        let mut path = root.to_string();
        for segment in self.at.iter().rev() {
            path.push_str(segment);
        }
        match self.error {
            ProtobufError::Message { path: inner, why } => ProtobufError::Message {
                path: path + &inner,
                why,
            },
            ProtobufError::UnknownField {
                path: inner,
                number,
            } => ProtobufError::UnknownField {
                path: path + &inner,
                number,
            },
            ProtobufError::Json { path: inner, why } => ProtobufError::Json {
                path: path + &inner,
                why,
            },
            other => other,
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> DeError {
        DeError::message(msg.to_string())
    }
}

impl From<ProtobufError> for DeError {
    fn from(error: ProtobufError) -> DeError {
        DeError::wire(error)
    }
}

/// One field value as the wire has it, owning its bytes (a slice of the input, counted).
#[derive(Clone)]
enum Val {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(Bytes),
}

impl Val {
    fn of(input: &Bytes, raw: Raw<'_>) -> Val {
        match raw {
            Raw::Varint(v) => Val::Varint(v),
            Raw::Fixed64(b) => Val::Fixed64(b),
            Raw::Fixed32(b) => Val::Fixed32(b),
            Raw::Bytes(b) => Val::Bytes(input.slice_ref(b)),
        }
    }
}

/// A field's values as the wire gave them: one, almost always, held inline.
type Vals = SmallVec<[Val; 1]>;

/// A singular message field's values merged, as protobuf reads a message given more than once.
fn merged(values: &[Val]) -> Bytes {
    let mut parts = values.iter().filter_map(|v| match v {
        Val::Bytes(b) => Some(b),
        _ => None,
    });
    match (parts.next(), values.len()) {
        (Some(only), 1) => only.clone(),
        (first, _) => {
            let mut all = first.map(|b| b.to_vec()).unwrap_or_default();
            for part in parts {
                all.extend_from_slice(part);
            }
            Bytes::from(all)
        }
    }
}

/// What the reader needs of a message type, taken from its descriptor once per thread: each
/// field's JSON name, kind and shape, found by number without a descriptor call. Descriptor
/// calls (each builds a `Kind` or looks a name up) were a fifth of the reader's time.
struct Plan {
    /// The full name, if the type's JSON is not an object (`TIME`, `QUANTITY`, …).
    special: Option<&'static str>,
    /// The `items` field of a single-`items` wrapper, whose JSON is the bare array.
    items: Option<usize>,
    map_entry: bool,
    fields: Vec<FieldPlan>,
    /// Field number → index in `fields` + 1 (0: no such field), for numbers below its length.
    by_number: Vec<u16>,
}

struct FieldPlan {
    number: u32,
    json: String,
    kind: Kind,
    wire: u32,
    list: bool,
    map: bool,
    inline: bool,
    /// The plan of a message-typed field's message, made when first needed.
    nested: OnceCell<Rc<Plan>>,
}

impl FieldPlan {
    fn nested(&self) -> Option<Rc<Plan>> {
        match &self.kind {
            Kind::Message(m) => Some(self.nested.get_or_init(|| plan_of(m)).clone()),
            _ => None,
        }
    }
}

const SPECIAL: [&str; 7] = [
    TIME,
    MICRO_TIME,
    DURATION,
    QUANTITY,
    INT_OR_STRING,
    RAW_EXTENSION,
    FIELDS_V1,
];

impl Plan {
    fn new(desc: &MessageDescriptor) -> Plan {
        let fields: Vec<FieldPlan> = desc
            .fields()
            .map(|f| {
                let kind = f.kind();
                FieldPlan {
                    number: f.number(),
                    json: json_name(&f).to_string(),
                    wire: wire_type(&kind),
                    list: f.is_list(),
                    map: f.is_map(),
                    inline: is_inline(&f),
                    kind,
                    nested: OnceCell::new(),
                }
            })
            .collect();
        let mut by_number = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            if let (Ok(n), Ok(index)) = (usize::try_from(f.number), u16::try_from(i + 1)) {
                if n < 1024 {
                    if by_number.len() <= n {
                        by_number.resize(n + 1, 0);
                    }
                    by_number[n] = index;
                }
            }
        }
        let items = items_wrapper(desc)
            .and_then(|items| fields.iter().position(|f| f.number == items.number()));
        Plan {
            special: SPECIAL.iter().copied().find(|s| *s == desc.full_name()),
            items,
            map_entry: desc.is_map_entry(),
            fields,
            by_number,
        }
    }

    /// The index of field `number`.
    fn field(&self, number: u32) -> Option<usize> {
        match self.by_number.get(number as usize) {
            Some(&i) if i > 0 => Some(usize::from(i) - 1),
            Some(_) => None,
            None => self.fields.iter().position(|f| f.number == number),
        }
    }

    /// The index of the field of JSON name `name`.
    fn named(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.json == name)
    }
}

thread_local! {
    /// The plans made on this thread, one per message type read (at most the descriptor set's
    /// messages, a few thousand).
    static PLANS: RefCell<HashMap<String, Rc<Plan>>> = RefCell::new(HashMap::new());
}

fn plan_of(desc: &MessageDescriptor) -> Rc<Plan> {
    PLANS.with(|plans| {
        if let Some(plan) = plans.borrow().get(desc.full_name()) {
            return plan.clone();
        }
        let plan = Rc::new(Plan::new(desc));
        plans
            .borrow_mut()
            .insert(desc.full_name().to_string(), plan.clone());
        plan
    })
}

/// The fields of the message `input` of `plan`, each with every value the wire gave it, in the
/// order of their first appearance: `transcode::read_message`'s reading (the same checks, the
/// same errors), by plan.
fn read_fields(plan: &Plan, input: &Bytes) -> Result<Vec<(usize, Vals)>, DeError> {
    let mut fields: Vec<(usize, Vals)> = Vec::with_capacity(plan.fields.len().min(16));
    let mut buf: &[u8] = input;
    let mut seen = [0u8; 64];
    while let Some((number, raw)) = next_raw(&mut buf, "")? {
        let Some(index) = plan.field(number) else {
            if plan.map_entry {
                continue;
            }
            return Err(ProtobufError::UnknownField {
                path: String::new(),
                number,
            }
            .into());
        };
        let f = &plan.fields[index];
        let fits = match raw {
            Raw::Bytes(_) => f.wire == LEN || f.list,
            Raw::Varint(_) => f.wire == VARINT,
            Raw::Fixed64(_) => f.wire == FIXED64,
            Raw::Fixed32(_) => f.wire == FIXED32,
        };
        if !fits {
            return Err(DeError::message(format!(
                "field {number} has the wrong wire type"
            )));
        }
        let value = Val::of(input, raw);
        // Where field `index` already is in `fields`: from `seen` for the first 64 fields of a
        // message (all of most; positions fit a byte, as a message has fewer than 256 fields),
        // else by search.
        let at = match seen.get(index).filter(|_| plan.fields.len() < 256) {
            Some(&p) => usize::from(p).checked_sub(1),
            None => fields.iter().position(|(i, _)| *i == index),
        };
        match at {
            Some(p) => fields[p].1.push(value),
            None => {
                fields.push((index, smallvec![value]));
                if let (Some(slot), Ok(p)) = (seen.get_mut(index), u8::try_from(fields.len())) {
                    *slot = p;
                }
            }
        }
    }
    Ok(fields)
}

/// One value of the object's JSON form, not yet converted: the node the tree builder would make a
/// `Value` of.
enum Node {
    /// A message that is a JSON object.
    Message {
        plan: Rc<Plan>,
        bytes: Bytes,
        depth: usize,
    },
    /// A repeated field's values (messages one a value, scalars packed or not); `elem` is the
    /// plan of message elements.
    List {
        kind: Kind,
        elem: Option<Rc<Plan>>,
        values: Vals,
        depth: usize,
    },
    /// A map field's entries (`entry`: the entry message's plan).
    Map {
        entry: Rc<Plan>,
        values: Vals,
        depth: usize,
    },
    /// A scalar field's value.
    Scalar {
        kind: Kind,
        value: Val,
    },
    /// The default of a scalar a map entry leaves out.
    Default(Kind),
    /// A string made here (a time, a duration, a quantity).
    Text(String),
    /// An integer made here (an `IntOrString`'s).
    Int(i64),
    /// Inline JSON (`RawExtension`, `FieldsV1`).
    Json(Bytes),
    Null,
}

/// The node of a message of `plan` in `bytes`: the types whose JSON is not an object converted
/// now, as `wire_to_json` converts them (they are small), the others left to be read.
fn message_node(plan: Rc<Plan>, bytes: Bytes, depth: usize) -> Result<Node, DeError> {
    if depth > MAX_DEPTH {
        return Err(DeError::message(format!(
            "messages nested deeper than {MAX_DEPTH}"
        )));
    }
    let Some(name) = plan.special else {
        if let Some(items) = plan.items {
            let values = read_fields(&plan, &bytes)?
                .into_iter()
                .find(|(i, _)| *i == items)
                .map_or_else(Vals::new, |(_, values)| values);
            let f = &plan.fields[items];
            return Ok(Node::List {
                kind: f.kind.clone(),
                elem: f.nested(),
                values,
                depth,
            });
        }
        return Ok(Node::Message { plan, bytes, depth });
    };
    let fields = read_fields(&plan, &bytes)?;
    let last = |field: &str| {
        let index = plan.named(field).expect("a field of the special type");
        fields
            .iter()
            .find(|(i, _)| *i == index)
            .and_then(|(_, values)| values.last())
    };
    let int = |value: Option<&Val>| match value {
        Some(Val::Varint(v)) => Some(*v as i64),
        _ => None,
    };
    let text = |value: Option<&Val>| -> Result<Option<String>, DeError> {
        match value {
            Some(Val::Bytes(b)) => std::str::from_utf8(b)
                .map(|s| Some(s.to_string()))
                .map_err(|_| DeError::message("a string that is not UTF-8")),
            _ => Ok(None),
        }
    };
    Ok(match name {
        TIME | MICRO_TIME => match int(last("seconds")) {
            // Go writes a zero time as an empty message, which reads back as null.
            None => Node::Null,
            Some(secs) => {
                let nanos = int(last("nanos")).map_or(0, |n| n as i32);
                let digits = if name == MICRO_TIME { 6 } else { 0 };
                Node::Text(time::format_rfc3339(secs, nanos, digits))
            }
        },
        DURATION => Node::Text(time::format_duration(int(last("duration")).unwrap_or(0))),
        QUANTITY => Node::Text(text(last("string"))?.unwrap_or_else(|| "0".to_string())),
        INT_OR_STRING => {
            if int(last("type")) == Some(1) {
                Node::Text(text(last("strVal"))?.unwrap_or_default())
            } else {
                Node::Int(int(last("intVal")).map_or(0, |i| i64::from(i as i32)))
            }
        }
        _ => {
            // RawExtension and FieldsV1: one bytes field of inline JSON.
            let raw = fields.first().and_then(|(_, values)| values.last());
            match raw {
                Some(Val::Bytes(b)) if !b.is_empty() => Node::Json(b.clone()),
                _ => Node::Null,
            }
        }
    })
}

/// The node of field `f`'s values.
fn field_node(f: &FieldPlan, values: Vals, depth: usize) -> Result<Node, DeError> {
    if f.map {
        let entry = f.nested().expect("a map field's kind is its entry message");
        return Ok(Node::Map {
            entry,
            values,
            depth,
        });
    }
    if f.list {
        return Ok(Node::List {
            kind: f.kind.clone(),
            elem: f.nested(),
            values,
            depth,
        });
    }
    if let Some(inner) = f.nested() {
        return message_node(inner, merged(&values), depth + 1);
    }
    let value = values
        .last()
        .cloned()
        .expect("a field is read with a value");
    Ok(Node::Scalar {
        kind: f.kind.clone(),
        value,
    })
}

impl Node {
    /// Whether the tree builder leaves this value out of its object: null, an empty string, a
    /// list with no element.
    fn omitted(&self) -> bool {
        match self {
            Node::Null => true,
            Node::Text(s) => s.is_empty(),
            Node::Scalar {
                kind: Kind::String | Kind::Bytes,
                value: Val::Bytes(b),
            } => b.is_empty(),
            // A float that is not finite has no JSON number: serde_json makes it null.
            Node::Scalar {
                kind: Kind::Float,
                value: Val::Fixed32(b),
            } => !f32::from_le_bytes(*b).is_finite(),
            Node::Scalar {
                kind: Kind::Double,
                value: Val::Fixed64(b),
            } => !f64::from_le_bytes(*b).is_finite(),
            Node::Json(raw) => matches!(raw.trim_ascii(), b"null" | b"\"\""),
            // Only packed scalars can give no element: an empty run.
            Node::List { kind, values, .. } => {
                !matches!(kind, Kind::Message(_) | Kind::String | Kind::Bytes)
                    && values
                        .iter()
                        .all(|v| matches!(v, Val::Bytes(b) if b.is_empty()))
            }
            _ => false,
        }
    }
}

/// An object's key: a field's JSON name (the field `index` of `plan`), or a name given here.
enum Key {
    Field(Rc<Plan>, usize),
    Given(&'static str),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Key::Field(plan, index) => &plan.fields[*index].json,
            Key::Given(s) => s,
        }
    }
}

/// The entries of the message of `plan` in `bytes`, the fields of inline messages in their
/// place, omitted values left out. Each key comes once: `read_fields` gives each field once, and
/// no inline message has a field of its parent's name (checked over every message by the test
/// `inline_messages_share_no_name_with_their_parent`), so the tree's map never sees a key twice
/// either.
fn entries(
    plan: &Rc<Plan>,
    bytes: &Bytes,
    depth: usize,
    out: &mut Vec<(Key, Node)>,
) -> Result<(), DeError> {
    for (index, values) in read_fields(plan, bytes)? {
        let f = &plan.fields[index];
        let node = field_node(f, values, depth).map_err(|e| e.at(|| format!(".{}", f.json)))?;
        if f.inline {
            if let Node::Message { plan, bytes, depth } = node {
                entries(&plan, &bytes, depth, out).map_err(|e| e.at(|| format!(".{}", f.json)))?;
            }
            continue;
        }
        if !node.omitted() {
            out.push((Key::Field(plan.clone(), index), node));
        }
    }
    Ok(())
}

/// `T` from the message `bytes` of `desc` (the kind `api_version`/`kind`).
pub(super) fn deserialize<T: de::DeserializeOwned>(
    desc: MessageDescriptor,
    bytes: Bytes,
    api_version: &str,
    kind: &str,
) -> Result<T, ProtobufError> {
    T::deserialize(Top {
        desc,
        bytes,
        api_version,
        kind,
    })
    .map_err(|e| e.into_protobuf(kind))
}

/// The top-level object, before it is read.
struct Top<'a> {
    desc: MessageDescriptor,
    bytes: Bytes,
    api_version: &'a str,
    kind: &'a str,
}

impl<'de> de::Deserializer<'de> for Top<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        deserialize_top(self.desc, self.bytes, self.api_version, self.kind, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The top-level object of `api_version`/`kind` in `bytes` of `desc`, as `decode_message_as`
/// gives it: `kind` and `apiVersion` first, then the message's fields.
fn deserialize_top<'de, V: Visitor<'de>>(
    desc: MessageDescriptor,
    bytes: Bytes,
    api_version: &str,
    kind: &str,
    visitor: V,
) -> Result<V::Value, DeError> {
    let mut out = vec![
        (Key::Given("kind"), Node::Text(kind.to_string())),
        (
            Key::Given("apiVersion"),
            Node::Text(api_version.to_string()),
        ),
    ];
    if let Node::Message { plan, bytes, depth } = message_node(plan_of(&desc), bytes, 0)? {
        entries(&plan, &bytes, depth, &mut out)?;
        // A field named like the two given keys replaces them, as in the tree.
        for name in ["apiVersion", "kind"] {
            let given = out
                .iter()
                .position(|(k, _)| matches!(k, Key::Given(g) if *g == name));
            let field = out
                .iter()
                .rposition(|(k, _)| matches!(k, Key::Field(..)) && k.as_str() == name);
            if let (Some(given), Some(field)) = (given, field) {
                let (_, node) = out.remove(field);
                out[given].1 = node;
            }
        }
    }
    visitor.visit_map(Entries::new(out))
}

/// The entry whose key a map gave last, for its value.
fn pending<T>(slot: &mut Option<T>) -> Result<T, DeError> {
    slot.take()
        .ok_or_else(|| DeError::message("a map value asked for before its key"))
}

/// A message's entries as a serde map.
struct Entries {
    entries: std::vec::IntoIter<(Key, Node)>,
    value: Option<(Key, Node)>,
}

impl Entries {
    fn new(entries: Vec<(Key, Node)>) -> Entries {
        Entries {
            entries: entries.into_iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((key, node)) = self.entries.next() else {
            return Ok(None);
        };
        let k = seed.deserialize(StrDeserializer::<DeError>::new(key.as_str()))?;
        self.value = Some((key, node));
        Ok(Some(k))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        let (key, node) = pending(&mut self.value)?;
        seed.deserialize(node)
            .map_err(|e| e.at(|| format!(".{}", key.as_str())))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A repeated field's elements as a serde sequence; packed runs read as they are reached.
struct Items {
    kind: Kind,
    elem: Option<Rc<Plan>>,
    values: smallvec::IntoIter<[Val; 1]>,
    packed: Option<Bytes>,
    depth: usize,
    index: usize,
    /// How many elements there are, counted before reading: the type's list is allocated once,
    /// at its length.
    len: usize,
}

impl Items {
    fn new(kind: Kind, elem: Option<Rc<Plan>>, values: Vals, depth: usize) -> Items {
        let len = if matches!(kind, Kind::Message(_) | Kind::String | Kind::Bytes) {
            values.len()
        } else {
            values
                .iter()
                .map(|v| match v {
                    // A packed run: one varint ends at each byte without the high bit.
                    Val::Bytes(run) => match wire_type(&kind) {
                        VARINT => run.iter().filter(|b| *b & 0x80 == 0).count(),
                        FIXED64 => run.len() / 8,
                        _ => run.len() / 4,
                    },
                    _ => 1,
                })
                .sum()
        };
        Items {
            kind,
            elem,
            values: values.into_iter(),
            packed: None,
            depth,
            index: 0,
            len,
        }
    }

    fn next_node(&mut self) -> Result<Option<Node>, DeError> {
        loop {
            if let Some(run) = &mut self.packed {
                if !run.is_empty() {
                    let mut buf: &[u8] = run;
                    let value = match wire_type(&self.kind) {
                        VARINT => read_varint(&mut buf).map(Val::Varint),
                        FIXED64 => read_fixed::<8>(&mut buf).map(Val::Fixed64),
                        _ => read_fixed::<4>(&mut buf).map(Val::Fixed32),
                    }
                    .ok_or_else(|| DeError::message("a truncated packed field"))?;
                    let used = run.len() - buf.len();
                    bytes::Buf::advance(run, used);
                    return Ok(Some(Node::Scalar {
                        kind: self.kind.clone(),
                        value,
                    }));
                }
                self.packed = None;
            }
            let Some(value) = self.values.next() else {
                return Ok(None);
            };
            match (&self.kind, value) {
                (Kind::Message(_), Val::Bytes(b)) => {
                    let plan = self
                        .elem
                        .clone()
                        .expect("a message list has its elements' plan");
                    return message_node(plan, b, self.depth + 1).map(Some);
                }
                // A message's value that is not bytes is refused where it is read, as a value
                // of the wrong wire type.
                (Kind::Message(_) | Kind::String | Kind::Bytes, value) => {
                    return Ok(Some(Node::Scalar {
                        kind: self.kind.clone(),
                        value,
                    }))
                }
                (_, Val::Bytes(run)) => self.packed = Some(run),
                (_, value) => {
                    return Ok(Some(Node::Scalar {
                        kind: self.kind.clone(),
                        value,
                    }))
                }
            }
        }
    }
}

impl<'de> SeqAccess<'de> for Items {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let index = self.index;
        let node = self
            .next_node()
            .map_err(|e| e.at(|| format!("[{index}]")))?;
        let Some(node) = node else {
            return Ok(None);
        };
        self.index += 1;
        seed.deserialize(node)
            .map(Some)
            .map_err(|e| e.at(|| format!("[{index}]")))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.len.saturating_sub(self.index))
    }
}

/// A map field's entries as a serde map; an entry given twice is given twice (the type's map
/// keeps the last, as the tree's does).
struct MapEntries {
    entry: Rc<Plan>,
    values: smallvec::IntoIter<[Val; 1]>,
    value: Option<(Bytes, Node)>,
    depth: usize,
}

/// A map key checked to be UTF-8, as a string.
fn key_str(key: &Bytes) -> &str {
    std::str::from_utf8(key).unwrap_or_default()
}

impl MapEntries {
    /// An entry's key (its UTF-8 bytes) and value. A map entry's key is its field 1, its value
    /// its field 2 (protobuf's definition of map fields).
    fn read(&self, bytes: &Bytes) -> Result<(Bytes, Node), DeError> {
        let (key_field, value_field) = (self.entry.field(1), self.entry.field(2));
        let mut key_values = None;
        let mut value_values = None;
        for (index, values) in read_fields(&self.entry, bytes)? {
            if Some(index) == key_field {
                key_values = Some(values);
            } else if Some(index) == value_field {
                value_values = Some(values);
            }
        }
        let key = match key_values.as_ref().and_then(|v| v.last()) {
            Some(Val::Bytes(b)) => {
                std::str::from_utf8(b)
                    .map_err(|_| DeError::message("a map key that is not UTF-8"))?;
                b.clone()
            }
            None => Bytes::new(),
            Some(_) => return Err(DeError::message("a map key that is not a string")),
        };
        let value_plan = &self.entry.fields[value_field.expect("a map entry has a value field")];
        let node = match (value_values, value_plan.nested()) {
            (Some(values), Some(inner)) => message_node(inner, merged(&values), self.depth + 1)?,
            (None, Some(inner)) => message_node(inner, Bytes::new(), self.depth + 1)?,
            (Some(values), None) => Node::Scalar {
                kind: value_plan.kind.clone(),
                value: values.last().cloned().expect("read with a value"),
            },
            (None, None) => Node::Default(value_plan.kind.clone()),
        };
        Ok((key, node))
    }
}

impl<'de> MapAccess<'de> for MapEntries {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(value) = self.values.next() else {
            return Ok(None);
        };
        let Val::Bytes(bytes) = value else {
            unreachable!("read_message keeps only length-delimited values of a map")
        };
        let (key, node) = self.read(&bytes)?;
        let k = seed
            .deserialize(StrDeserializer::<DeError>::new(key_str(&key)))
            .map_err(|e| e.at(|| format!("[{:?}]", key_str(&key))))?;
        self.value = Some((key, node));
        Ok(Some(k))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        let (key, node) = pending(&mut self.value)?;
        seed.deserialize(node)
            .map_err(|e| e.at(|| format!("[{:?}]", key_str(&key))))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.values.len())
    }
}

/// An integer as `serde_json::Value` hands it on: unsigned when it is not negative.
fn visit_int<'de, V: Visitor<'de>>(n: i64, visitor: V) -> Result<V::Value, DeError> {
    match u64::try_from(n) {
        Ok(u) => visitor.visit_u64(u),
        Err(_) => visitor.visit_i64(n),
    }
}

fn visit_float<'de, V: Visitor<'de>>(f: f64, visitor: V) -> Result<V::Value, DeError> {
    if f.is_finite() {
        visitor.visit_f64(f)
    } else {
        visitor.visit_unit()
    }
}

/// A scalar of `kind` as the tree builder converts it (`scalar_to_json`).
fn visit_scalar<'de, V: Visitor<'de>>(
    kind: &Kind,
    value: Val,
    visitor: V,
) -> Result<V::Value, DeError> {
    match (kind, value) {
        (Kind::String, Val::Bytes(b)) => visitor.visit_str(
            std::str::from_utf8(&b).map_err(|_| DeError::message("a string that is not UTF-8"))?,
        ),
        (Kind::Bytes, Val::Bytes(b)) => {
            visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(&b))
        }
        (Kind::Bool, Val::Varint(v)) => visitor.visit_bool(v != 0),
        (Kind::Int32 | Kind::Enum(_), Val::Varint(v)) => visit_int(i64::from(v as i32), visitor),
        (Kind::Int64, Val::Varint(v)) => visit_int(v as i64, visitor),
        (Kind::Uint32, Val::Varint(v)) => visitor.visit_u64(u64::from(v as u32)),
        (Kind::Uint64, Val::Varint(v)) => visitor.visit_u64(v),
        (Kind::Sint32, Val::Varint(v)) => {
            let n = v as u32;
            visit_int(i64::from(((n >> 1) as i32) ^ -((n & 1) as i32)), visitor)
        }
        (Kind::Sint64, Val::Varint(v)) => visit_int(((v >> 1) as i64) ^ -((v & 1) as i64), visitor),
        (Kind::Fixed32, Val::Fixed32(b)) => visitor.visit_u64(u64::from(u32::from_le_bytes(b))),
        (Kind::Sfixed32, Val::Fixed32(b)) => visit_int(i64::from(i32::from_le_bytes(b)), visitor),
        (Kind::Float, Val::Fixed32(b)) => visit_float(f64::from(f32::from_le_bytes(b)), visitor),
        (Kind::Fixed64, Val::Fixed64(b)) => visitor.visit_u64(u64::from_le_bytes(b)),
        (Kind::Sfixed64, Val::Fixed64(b)) => visit_int(i64::from_le_bytes(b), visitor),
        (Kind::Double, Val::Fixed64(b)) => visit_float(f64::from_le_bytes(b), visitor),
        _ => Err(DeError::message("a value of the wrong wire type")),
    }
}

fn json_error(e: serde_json::Error) -> DeError {
    DeError::message(format!("raw is not JSON: {e}"))
}

impl<'de> de::Deserializer<'de> for Node {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self {
            Node::Message { plan, bytes, depth } => {
                let mut out = Vec::with_capacity(plan.fields.len().min(32));
                entries(&plan, &bytes, depth, &mut out)?;
                visitor.visit_map(Entries::new(out))
            }
            Node::List {
                kind,
                elem,
                values,
                depth,
            } => visitor.visit_seq(Items::new(kind, elem, values, depth)),
            Node::Map {
                entry,
                values,
                depth,
            } => visitor.visit_map(MapEntries {
                entry,
                values: values.into_iter(),
                value: None,
                depth,
            }),
            Node::Scalar { kind, value } => visit_scalar(&kind, value, visitor),
            Node::Default(kind) => match kind {
                Kind::String | Kind::Bytes => visitor.visit_str(""),
                Kind::Bool => visitor.visit_bool(false),
                Kind::Double | Kind::Float => visitor.visit_f64(0.0),
                _ => visitor.visit_u64(0),
            },
            Node::Text(s) => visitor.visit_string(s),
            Node::Int(n) => visit_int(n, visitor),
            // Parsed as the tree parses it: a visitor of any lifetime takes a value it owns.
            Node::Json(raw) => serde_json::from_slice::<serde_json::Value>(&raw)
                .map_err(json_error)?
                .deserialize_any(visitor)
                .map_err(|e| DeError::message(e.to_string())),
            Node::Null => visitor.visit_unit(),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self {
            Node::Null => visitor.visit_none(),
            Node::Json(raw) if raw.trim_ascii() == b"null" => visitor.visit_none(),
            Node::Scalar {
                kind: Kind::Float,
                value: Val::Fixed32(b),
            } if !f32::from_le_bytes(b).is_finite() => visitor.visit_none(),
            Node::Scalar {
                kind: Kind::Double,
                value: Val::Fixed64(b),
            } if !f64::from_le_bytes(b).is_finite() => visitor.visit_none(),
            other => visitor.visit_some(other),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self {
            Node::Text(s) => visitor.visit_enum(s.into_deserializer()),
            Node::Scalar {
                kind: Kind::String,
                value: Val::Bytes(b),
            } => {
                let s = std::str::from_utf8(&b)
                    .map_err(|_| DeError::message("a string that is not UTF-8"))?;
                visitor.visit_enum(StrDeserializer::<DeError>::new(s))
            }
            Node::Message { plan, bytes, depth } => {
                let mut out = Vec::with_capacity(plan.fields.len().min(32));
                entries(&plan, &bytes, depth, &mut out)?;
                visitor.visit_enum(MapAccessDeserializer::new(Entries::new(out)))
            }
            other => other.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}
