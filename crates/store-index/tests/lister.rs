//! Listers with label selectors, with and without the namespace index.

use std::sync::Arc;

use store_index::{DynamicObject, Indexer, Indexers, Lister, Object, Selector};

fn pod(ns: &str, name: &str, app: &str) -> Arc<DynamicObject> {
    Arc::new(
        DynamicObject::new("v1", "Pod")
            .within(ns)
            .named(name)
            .with_label("app", app),
    )
}

fn fill(indexer: &Indexer<DynamicObject>) {
    for (ns, name, app) in [
        ("a", "w1", "web"),
        ("a", "d1", "db"),
        ("b", "w2", "web"),
        ("", "n1", "node"),
    ] {
        indexer.add(pod(ns, name, app)).unwrap();
    }
}

fn names(mut objs: Vec<Arc<DynamicObject>>) -> Vec<String> {
    objs.sort_by(|x, y| x.name().cmp(y.name()));
    objs.iter().map(|o| o.name().to_string()).collect()
}

#[test]
fn namespaced_lister_filters_by_namespace_and_selector_with_or_without_the_index() {
    for indexers in [Indexers::new().with_namespace_index(), Indexers::new()] {
        let indexer = Indexer::new(indexers);
        fill(&indexer);
        let lister = Lister::new(indexer);
        let web: Selector = "app=web".parse().unwrap();
        assert_eq!(names(lister.list(&web)), ["w1", "w2"]);
        assert_eq!(names(lister.list(&Selector::everything())).len(), 4);
        assert_eq!(
            names(lister.namespaced("a").list(&Selector::everything())),
            ["d1", "w1"]
        );
        assert_eq!(
            names(lister.namespaced("a").list(&"app!=web".parse().unwrap())),
            ["d1"]
        );
        assert!(lister.namespaced("b").get("w2").is_some());
        assert!(lister.namespaced("a").get("w2").is_none());
        assert!(lister.get("n1").is_some());
    }
}
