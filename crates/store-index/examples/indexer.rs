//! An indexed cache: add objects, query an index, list with a label selector.
//! Run with `cargo run -p store-index --example indexer`.

use std::sync::Arc;

use store_index::{DynamicObject, Indexer, Indexers, Lister, Object, Selector};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let by_node = |pod: &DynamicObject| {
        Ok(pod
            .data
            .get("spec")
            .and_then(|s| s["nodeName"].as_str())
            .map(str::to_string)
            .into_iter()
            .collect())
    };
    let indexer = Indexer::new(Indexers::new().with_namespace_index().with("node", by_node));
    for (ns, name, node, app) in [
        ("shop", "web-1", "n1", "web"),
        ("shop", "db-1", "n2", "db"),
        ("blog", "web-2", "n1", "web"),
    ] {
        let pod = DynamicObject::new("v1", "Pod")
            .within(ns)
            .named(name)
            .with_label("app", app)
            .with_field("spec", serde_json::json!({ "nodeName": node }));
        indexer.add(Arc::new(pod))?;
    }
    let on_n1: Vec<String> = indexer
        .index_keys("node", "n1")?
        .iter()
        .map(|k| k.to_string())
        .collect();
    println!("pods on node n1: {on_n1:?}");
    let web: Selector = "app in (web)".parse()?;
    let lister = Lister::new(indexer);
    for pod in lister.namespaced("shop").list(&web) {
        println!("web pod in shop: {}", pod.name());
    }
    Ok(())
}
