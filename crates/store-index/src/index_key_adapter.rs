//! [`index_fn_to_key_fn`]: a single-valued index function used as a key function (contract rule
//! A1.8, client-go's `IndexFuncToKeyFuncAdapter`).
//!
//! A key function is an index function that always yields exactly one value. When a program
//! already has such an index function (say, objects identified by a label that is unique), this
//! adapter lets a store be keyed by it instead of writing the function twice. Objects that yield
//! no value or several cannot be keyed, and the store refuses them with a [`KeyError`].

use std::sync::Arc;

use crate::error::KeyError;
use crate::index::IndexFn;
use crate::key::{KeyFn, ObjectKey};

/// Turns an index function into a key function: its one value becomes the key.
///
/// Fails with [`KeyError::TooManyKeys`] (`too many keys: [...]`) when the index function yields
/// more than one value, [`KeyError::EmptyIndexKeys`] (`unexpected empty indexKeys`) when it yields
/// none, and [`KeyError::Custom`] with the index function's message when it fails. Only useful for
/// index functions whose value is unique per object; a proper key function is better otherwise.
///
/// ```
/// use std::sync::Arc;
/// use store_index::{index_fn_to_key_fn, DynamicObject, IndexFn, Indexer, Indexers, Object};
///
/// let by_id: IndexFn<DynamicObject> =
///     Arc::new(|o: &DynamicObject| Ok(o.label("id").map(str::to_string).into_iter().collect()));
/// let store = Indexer::with_key_fn(index_fn_to_key_fn(by_id), Indexers::new());
/// store.add(Arc::new(DynamicObject::new("v1", "Pod").named("p").with_label("id", "42"))).unwrap();
/// assert!(store.get_by_key("42").is_some());
///
/// let err = store.add(Arc::new(DynamicObject::new("v1", "Pod").named("no-id"))).unwrap_err();
/// assert!(err.to_string().ends_with("unexpected empty indexKeys"), "{err}");
/// ```
pub fn index_fn_to_key_fn<K: 'static>(index_fn: IndexFn<K>) -> KeyFn<K> {
    Arc::new(move |obj: &K| {
        let mut values = index_fn(obj).map_err(|e| KeyError::Custom(e.to_string()))?;
        match values.len() {
            0 => Err(KeyError::EmptyIndexKeys),
            1 => Ok(ObjectKey::from(values.pop().unwrap_or_default())),
            _ => Err(KeyError::TooManyKeys(values)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{namespace_index_fn, DynamicObject, Object};

    fn comma_split() -> IndexFn<DynamicObject> {
        Arc::new(|o: &DynamicObject| {
            Ok(o.label("v")
                .unwrap_or("")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect())
        })
    }

    fn obj(v: &str) -> DynamicObject {
        DynamicObject::new("v1", "Pod")
            .named("p")
            .with_label("v", v)
    }

    #[test]
    fn one_value_becomes_the_key() {
        let key_fn = index_fn_to_key_fn(comma_split());
        assert_eq!(key_fn(&obj("only")).unwrap(), "only");
    }

    #[test]
    fn several_values_are_too_many_keys() {
        let key_fn = index_fn_to_key_fn(comma_split());
        let err = key_fn(&obj("a,b")).unwrap_err();
        assert_eq!(err, KeyError::TooManyKeys(vec!["a".into(), "b".into()]));
        assert_eq!(err.to_string(), r#"too many keys: ["a", "b"]"#);
    }

    #[test]
    fn no_value_is_unexpected_empty_index_keys() {
        let key_fn = index_fn_to_key_fn(comma_split());
        let err = key_fn(&obj("")).unwrap_err();
        assert_eq!(err, KeyError::EmptyIndexKeys);
        assert_eq!(err.to_string(), "unexpected empty indexKeys");
    }

    #[test]
    fn an_index_function_error_is_passed_on() {
        let key_fn = index_fn_to_key_fn(Arc::new(namespace_index_fn::<Opaque>));
        let err = key_fn(&Opaque).unwrap_err();
        assert_eq!(err, KeyError::Custom("object has no meta".into()));
    }

    #[derive(Debug)]
    struct Opaque;
    impl Object for Opaque {}
}
