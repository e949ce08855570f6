//! Contract section (a): keys, store and indexer behaviour, one test per rule.

use std::collections::BTreeSet;
use std::sync::Arc;

use store_index::{
    DynamicObject, Indexer, Indexers, KeyError, Object, ObjectMeta, StoreError, NAMESPACE_INDEX,
};

/// A test object whose `value` is indexed by comma-splitting it.
#[derive(Debug, PartialEq)]
struct Item {
    meta: ObjectMeta,
    value: String,
}

impl Object for Item {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.meta)
    }
}

fn item(name: &str, value: &str) -> Arc<Item> {
    Arc::new(Item {
        meta: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        value: value.into(),
    })
}

fn comma_index() -> Indexers<Item> {
    Indexers::new().with("by_val", |i: &Item| {
        Ok(i.value
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    })
}

fn keys(idx: &Indexer<Item>, value: &str) -> Vec<String> {
    idx.index_keys("by_val", value)
        .unwrap()
        .into_iter()
        .map(|k| k.to_string())
        .collect()
}

fn pod(ns: &str, name: &str) -> DynamicObject {
    DynamicObject::new("v1", "Pod").within(ns).named(name)
}

#[test]
fn update_moves_keys_between_buckets_and_drops_empty_ones() {
    let idx = Indexer::new(comma_index());
    idx.add(item("key1", "foo")).unwrap();
    idx.add(item("key2", "bar")).unwrap();
    idx.update(item("key2", "foo,bar")).unwrap();
    assert_eq!(keys(&idx, "foo"), ["key1", "key2"]);
    assert_eq!(keys(&idx, "bar"), ["key2"]);
    idx.update(item("key1", "foo,bar")).unwrap();
    assert_eq!(keys(&idx, "bar"), ["key1", "key2"]);
    idx.add(item("key3", "foo,bar,baz")).unwrap();
    idx.update(item("key1", "foo")).unwrap();
    assert_eq!(keys(&idx, "bar"), ["key2", "key3"]);
    idx.update(item("key2", "bar")).unwrap();
    assert_eq!(keys(&idx, "foo"), ["key1", "key3"]);
    idx.delete(item("key1", "ignored")).unwrap();
    assert_eq!(keys(&idx, "foo"), ["key3"]);
    idx.delete_by_key("key3").unwrap();
    assert!(keys(&idx, "foo").is_empty());
    assert!(keys(&idx, "baz").is_empty());
    assert_eq!(keys(&idx, "bar"), ["key2"]);
    let values: BTreeSet<String> = idx.list_index_func_values("by_val").into_iter().collect();
    assert_eq!(values, BTreeSet::from(["bar".to_string()]));
}

#[test]
fn delete_uses_the_stored_objects_index_values_not_the_argument() {
    let idx = Indexer::new(comma_index());
    idx.add(item("testKey", "testKey")).unwrap();
    idx.delete(item("testKey", "something-else")).unwrap();
    assert!(idx.list_index_func_values("by_val").is_empty());

    idx.add(item("a", "shared")).unwrap();
    idx.add(item("b", "shared")).unwrap();
    idx.delete(item("a", "")).unwrap();
    assert_eq!(keys(&idx, "shared"), ["b"]);
}

#[test]
fn deleting_a_missing_key_is_a_silent_no_op() {
    let idx = Indexer::new(comma_index());
    idx.add(item("a", "x")).unwrap();
    idx.delete(item("missing", "x")).unwrap();
    assert_eq!(idx.delete_by_key("missing").unwrap(), None);
    assert_eq!(keys(&idx, "x"), ["a"]);
}

#[test]
fn index_queries_match_the_label_and_users_examples() {
    let by_label = |o: &DynamicObject| Ok(o.label("foo").map(str::to_string).into_iter().collect());
    let idx = Indexer::new(Indexers::new().with("testmodes", by_label));
    idx.add(Arc::new(pod("", "one").with_label("foo", "bar")))
        .unwrap();
    idx.add(Arc::new(pod("", "two").with_label("foo", "bar")))
        .unwrap();
    idx.add(Arc::new(pod("", "tre").with_label("foo", "biz")))
        .unwrap();
    let values: BTreeSet<String> = idx
        .list_index_func_values("testmodes")
        .into_iter()
        .collect();
    assert_eq!(
        values,
        BTreeSet::from(["bar".to_string(), "biz".to_string()])
    );

    let users = Indexer::new(comma_index());
    users.add(item("one", "ernie,bert")).unwrap();
    users.add(item("two", "bert,oscar")).unwrap();
    users.add(item("tre", "ernie,elmo")).unwrap();
    assert_eq!(keys(&users, "ernie"), ["one", "tre"]);
    assert_eq!(keys(&users, "bert"), ["one", "two"]);
    assert_eq!(keys(&users, "elmo"), ["tre"]);
    assert_eq!(keys(&users, "oscar"), ["two"]);
    assert!(keys(&users, "elmo1").is_empty());
    users.delete_by_key("tre").unwrap();
    assert_eq!(keys(&users, "ernie"), ["one"]);
    assert!(keys(&users, "elmo").is_empty());
    users.update(item("two", "oscar")).unwrap();
    assert_eq!(keys(&users, "bert"), ["one"]);
}

#[test]
fn index_returns_the_union_of_buckets_each_object_once() {
    let idx = Indexer::new(comma_index());
    idx.add(item("one", "a,b")).unwrap();
    idx.add(item("two", "b,c")).unwrap();
    idx.add(item("tre", "d")).unwrap();
    let mut names: Vec<String> = idx
        .index("by_val", &item("query", "a,b,c"))
        .unwrap()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["one", "two"]);
}

#[test]
fn unknown_index_is_an_error_for_queries_but_empty_for_values() {
    let idx = Indexer::new(comma_index());
    for err in [
        idx.by_index("nope", "x").unwrap_err(),
        idx.index_keys("nope", "x").unwrap_err(),
        idx.index("nope", &item("a", "")).unwrap_err(),
    ] {
        assert_eq!(err.to_string(), "Index with name nope does not exist");
    }
    assert!(idx.list_index_func_values("nope").is_empty());
}

#[test]
fn index_keys_are_sorted_ascending() {
    let idx = Indexer::new(comma_index());
    for name in ["c", "a", "d", "b"] {
        idx.add(item(name, "v")).unwrap();
    }
    assert_eq!(keys(&idx, "v"), ["a", "b", "c", "d"]);
}

#[test]
fn add_indexers_indexes_existing_items_and_rejects_conflicts_atomically() {
    let idx: Indexer<Item> = Indexer::new(Indexers::new());
    idx.add(item("one", "x,y")).unwrap();
    idx.add_indexers(comma_index()).unwrap();
    assert_eq!(keys(&idx, "y"), ["one"]);

    let err = idx
        .add_indexers(comma_index().with("other", |_: &Item| Ok(vec!["o".into()])))
        .unwrap_err();
    assert!(matches!(&err, StoreError::IndexerConflict(n) if n == &["by_val".to_string()]));
    assert!(err.to_string().starts_with("indexer conflict: "), "{err}");
    // Nothing was added: "other" is still unknown.
    assert!(idx.by_index("other", "o").is_err());
    assert_eq!(idx.get_indexers().names().collect::<Vec<_>>(), ["by_val"]);
}

#[test]
fn namespace_index_files_cluster_scoped_objects_under_empty_string() {
    let idx = Indexer::new(Indexers::new().with_namespace_index());
    idx.add(Arc::new(pod("ns1", "a"))).unwrap();
    idx.add(Arc::new(pod("", "node"))).unwrap();
    assert_eq!(idx.index_keys(NAMESPACE_INDEX, "ns1").unwrap(), ["ns1/a"]);
    assert_eq!(idx.index_keys(NAMESPACE_INDEX, "").unwrap(), ["node"]);
}

#[test]
fn replace_swaps_contents_and_rebuilds_indexes() {
    let idx = Indexer::new(comma_index());
    idx.add(item("old", "gone")).unwrap();
    idx.add(item("foo", "stale")).unwrap();
    idx.replace([item("foo", "foo"), item("bar", "bar")], "0")
        .unwrap();
    let mut values: Vec<String> = idx.list().iter().map(|i| i.value.clone()).collect();
    values.sort();
    assert_eq!(values, ["bar", "foo"]);
    assert!(keys(&idx, "gone").is_empty());
    assert!(keys(&idx, "stale").is_empty());
    assert_eq!(keys(&idx, "foo"), ["foo"]);
    assert_eq!(idx.resource_version(), "0");
}

#[test]
fn replace_with_duplicate_keys_keeps_the_last() {
    let idx = Indexer::new(comma_index());
    idx.replace([item("a", "first"), item("a", "second")], "1")
        .unwrap();
    assert_eq!(idx.len(), 1);
    assert_eq!(idx.get_by_key("a").unwrap().value, "second");
    assert!(keys(&idx, "first").is_empty());
}

#[derive(Debug)]
struct Opaque;
impl Object for Opaque {}

#[test]
fn objects_without_meta_get_a_key_error_and_change_nothing() {
    let idx: Indexer<Opaque> = Indexer::new(Indexers::new());
    let err = idx.add(Arc::new(Opaque)).unwrap_err();
    assert_eq!(err.key_error(), Some(&KeyError::NoMeta));
    assert!(err
        .to_string()
        .starts_with("couldn't create key for object"));
    assert!(idx.replace([Arc::new(Opaque)], "9").is_err());
    assert!(idx.is_empty());
    assert_eq!(idx.resource_version(), "");
}

#[test]
fn replace_that_fails_keying_leaves_the_store_untouched() {
    let idx: Indexer<DynamicObject> = Indexer::with_key_fn(
        Arc::new(|o: &DynamicObject| {
            if o.name() == "bad" {
                Err(KeyError::Custom("bad name".into()))
            } else {
                store_index::meta_namespace_key(o)
            }
        }),
        Indexers::new(),
    );
    idx.add(Arc::new(pod("n", "keep"))).unwrap();
    let err = idx
        .replace([Arc::new(pod("n", "new")), Arc::new(pod("n", "bad"))], "5")
        .unwrap_err();
    assert!(err.to_string().ends_with("bad name"), "{err}");
    assert_eq!(idx.list_keys(), ["n/keep"]);
}

#[test]
fn failing_index_function_rejects_the_write_and_keeps_items_and_indexes_consistent() {
    let idx = Indexer::new(comma_index().with("strict", |i: &Item| {
        if i.value.contains("boom") {
            Err("boom is not allowed".into())
        } else {
            Ok(vec![])
        }
    }));
    idx.add(item("a", "x")).unwrap();
    let err = idx.update(item("a", "y,boom")).unwrap_err();
    assert!(err.to_string().contains("boom is not allowed"), "{err}");
    assert_eq!(idx.get_by_key("a").unwrap().value, "x");
    assert_eq!(keys(&idx, "x"), ["a"]);
    assert!(keys(&idx, "y").is_empty());
}

#[test]
fn resource_version_is_the_last_written_not_the_maximum() {
    let idx: Indexer<DynamicObject> = Indexer::new(Indexers::new());
    let rv = |name: &str, rv: &str| Arc::new(pod("ns", name).with_resource_version(rv));
    idx.add(rv("a", "10")).unwrap();
    assert_eq!(idx.resource_version(), "10");
    idx.add(rv("a", "10")).unwrap();
    assert_eq!(idx.resource_version(), "10");
    idx.add(rv("b", "20")).unwrap();
    assert_eq!(idx.resource_version(), "20");
    idx.delete(rv("a", "30")).unwrap();
    assert_eq!(idx.resource_version(), "30");
    idx.add(rv("c", "40")).unwrap();
    assert_eq!(idx.resource_version(), "40");
    idx.delete_by_key("ns/c").unwrap();
    assert_eq!(idx.resource_version(), "40");
    // A tombstone deletes by its own key and, like a delete by key, leaves the version alone.
    idx.add(rv("t", "45")).unwrap();
    idx.delete(store_index::DeletedFinalStateUnknown {
        key: "ns/t".into(),
        obj: Some(rv("t", "44")),
    })
    .unwrap();
    assert!(idx.get_by_key("ns/t").is_none());
    assert_eq!(idx.resource_version(), "45");
    idx.add(rv("d", "5")).unwrap();
    assert_eq!(idx.resource_version(), "5");
    idx.replace([rv("a", "1")], "50").unwrap();
    assert_eq!(idx.resource_version(), "50");
    idx.bookmark("60");
    assert_eq!(idx.resource_version(), "60");
}

#[test]
fn returned_objects_are_shared_not_copied() {
    let idx = Indexer::new(Indexers::new().with_namespace_index());
    let obj = Arc::new(pod("ns", "a"));
    idx.add(Arc::clone(&obj)).unwrap();
    assert!(Arc::ptr_eq(&idx.get_by_key("ns/a").unwrap(), &obj));
    assert!(Arc::ptr_eq(&idx.list()[0], &obj));
    assert!(Arc::ptr_eq(
        &idx.by_index("namespace", "ns").unwrap()[0],
        &obj
    ));
}

#[test]
fn clones_of_an_indexer_share_one_store() {
    let a: Indexer<DynamicObject> = Indexer::default();
    let b = a.clone();
    a.add(Arc::new(pod("ns", "x"))).unwrap();
    assert!(b.get(&pod("ns", "x")).unwrap().is_some());
    assert_eq!(b.len(), 1);
}

#[test]
fn upsert_returns_the_object_it_replaced() {
    let idx = Indexer::new(comma_index());
    assert!(idx.upsert(item("a", "x")).unwrap().is_none());
    let old = idx.upsert(item("a", "y")).unwrap().unwrap();
    assert_eq!(old.value, "x");
    assert_eq!(keys(&idx, "y"), ["a"]);
    assert!(keys(&idx, "x").is_empty());
}
