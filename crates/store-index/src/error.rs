//! Error types of the store layer.

use thiserror::Error;

/// A boxed error from user code (index functions, custom key functions).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a key could not be computed or parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The object has no metadata to take a namespace and name from.
    #[error("object has no meta")]
    NoMeta,
    /// A key with more than one `/`.
    #[error("unexpected key format: {0:?}")]
    UnexpectedFormat(String),
    /// An index function used as a key function yielded several values.
    #[error("too many keys: {0:?}")]
    TooManyKeys(Vec<String>),
    /// An index function used as a key function yielded no value.
    #[error("unexpected empty indexKeys")]
    EmptyIndexKeys,
    /// A custom key function failed.
    #[error("{0}")]
    Custom(String),
}

/// Errors of [`Indexer`](crate::Indexer) operations.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key function failed for an object; nothing was changed.
    #[error("couldn't create key for object {object}: {source}")]
    Key {
        /// A description of the object (its Rust type and whatever metadata it has).
        object: String,
        /// The key function's error.
        #[source]
        source: KeyError,
    },
    /// A query named an index that was never registered.
    #[error("Index with name {0} does not exist")]
    IndexNotFound(String),
    /// `add_indexers` named an index that already exists; nothing was added.
    #[error("indexer conflict: {0:?}")]
    IndexerConflict(Vec<String>),
    /// An index function failed; the write was not applied (items and indexes are unchanged).
    #[error("index function {index:?} failed for key {key:?}: {source}")]
    IndexFunc {
        /// The index's name.
        index: String,
        /// The object's key (empty for a query object).
        key: String,
        /// The index function's error.
        #[source]
        source: BoxError,
    },
}

impl StoreError {
    /// The innermost [`KeyError`], if this is a key failure.
    pub fn key_error(&self) -> Option<&KeyError> {
        match self {
            StoreError::Key { source, .. } => Some(source),
            _ => None,
        }
    }

    pub(crate) fn key<K: crate::Object + ?Sized>(obj: &K, source: KeyError) -> Self {
        StoreError::Key {
            object: describe(obj),
            source,
        }
    }
}

/// A short description of an object for error messages: its Rust type and whatever metadata it has.
pub fn describe<K: crate::Object + ?Sized>(obj: &K) -> String {
    let ty = std::any::type_name::<K>();
    if obj.has_meta() {
        format!(
            "{ty}{{namespace: {:?}, name: {:?}}}",
            obj.namespace().unwrap_or(""),
            obj.name()
        )
    } else {
        ty.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    struct NoMeta;
    impl crate::Object for NoMeta {}

    #[test]
    fn key_error_text_names_the_object_and_exposes_the_inner_error() {
        let err = StoreError::key(&NoMeta, KeyError::NoMeta);
        let text = err.to_string();
        assert!(
            text.starts_with("couldn't create key for object "),
            "{text}"
        );
        assert!(text.ends_with(": object has no meta"), "{text}");
        let inner = err.source().unwrap().downcast_ref::<KeyError>().unwrap();
        assert_eq!(inner, &KeyError::NoMeta);
        assert_eq!(err.key_error(), Some(&KeyError::NoMeta));
    }

    #[test]
    fn index_not_found_text_matches_client_go() {
        assert_eq!(
            StoreError::IndexNotFound("byUser".into()).to_string(),
            "Index with name byUser does not exist"
        );
    }
}
