//! Kubernetes' protobuf encoding at the level of the object model: the wire format read with
//! bounds ([`wire`]), the error every protobuf layer reports ([`ProtobufError`]), and an object's
//! `ObjectMeta` read off the wire ([`object_meta`], [`object_meta_of`]). The envelope, the watch
//! framing, list pages and `Status` are the reflector's (`reflector::protobuf`).

pub(crate) mod compact;
mod meta;
pub mod wire;

pub use meta::{object_meta, object_meta_of};

/// Why protobuf input could not be read (or an object could not be written as protobuf).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf object: the k8s\\0 prefix is missing")]
    BadMagic,
    /// The input ends inside a field or a frame.
    #[error("truncated protobuf input in {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A watch frame announces more bytes than the decoder's bound.
    #[error("a watch frame of {len} bytes exceeds the bound of {max} bytes")]
    FrameTooLarge {
        /// The announced length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Bytes that are not a protobuf message of the expected shape.
    #[error("malformed protobuf in {what}: {why}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// No message is known for this kind (a custom resource, or a group not compiled in).
    #[error("no protobuf message is known for kind {kind:?} of {api_version:?}")]
    UnknownKind {
        /// The envelope's or object's `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// A field number the message's descriptor does not define.
    #[error("unknown field number {number} in {path}")]
    UnknownField {
        /// Where, as `Kind.field.field`.
        path: String,
        /// The field number.
        number: u32,
    },
    /// A message that does not decode into its type.
    #[error("invalid protobuf message at {path}: {why}")]
    Message {
        /// Where, as `Kind.field.field`.
        path: String,
        /// What the decoder said.
        why: String,
    },
    /// A JSON object whose shape does not fit its kind's message.
    #[error("the object does not fit its protobuf message at {path}: {why}")]
    Json {
        /// Where, as `.field.field`.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The object type cannot be decoded from protobuf (its `Decode` says so): the client asked
    /// for JSON, or the server answered protobuf where JSON was asked for.
    #[error("{type_name} cannot be decoded from protobuf")]
    Unsupported {
        /// The Rust type.
        type_name: &'static str,
    },
}

#[cfg(test)]
mod tests;
