//! The simulator answers the corpus as kube-apiserver did when the golden files were recorded,
//! but for the differences listed as deliberate: what `cargo test` checks on every change of
//! the simulator, with no Go and no real server (`cargo xtask differential record` rewrites the
//! golden files from a real one).

use std::collections::BTreeSet;

use differential::target::Target;
use differential::{allowlist, corpus, golden};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_the_corpus_as_kube_apiserver_did_but_for_the_listed_differences() {
    let groups = corpus::load(&corpus::default_dir()).expect("the corpus loads");
    let entries = allowlist::load(&allowlist::default_path()).expect("the allowlist loads");
    let target = Target::sim().await.expect("the simulator starts");
    let dir = golden::default_dir();
    let mut report = differential::compare(&target, &groups, &dir, entries, true, None)
        .await
        .expect("the corpus replays");
    report
        .problems
        .extend(differential::orphan_problems(&dir, &groups));
    target.stop().expect("the simulator stops");
    println!("{report}");
    assert!(report.passed(), "{report}");
}

#[test]
fn every_deliberate_difference_is_explained_in_the_simulators_guide() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulator.md"),
    )
    .expect("docs/simulator.md");
    let section = guide
        .split("## Differences from kube-apiserver, found by the differential corpus")
        .nth(1)
        .expect("docs/simulator.md has the section of the corpus's differences");
    let entries = allowlist::load(&allowlist::default_path()).expect("the allowlist loads");
    let missing: Vec<&str> = entries
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| !section.contains(&format!("`{id}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "deliberate differences not explained in docs/simulator.md: {missing:?}"
    );
}

#[test]
fn golden_files_hold_no_value_of_one_run() {
    let groups = corpus::load(&corpus::default_dir()).expect("the corpus loads");
    let uid = regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("valid");
    let time = regex::Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}").expect("valid");
    let rv = regex::Regex::new(r#""resourceVersion":"\d"#).expect("valid");
    let mut names = BTreeSet::new();
    for group in &groups {
        let golden = golden::read(&golden::default_dir(), &group.name).expect("golden file");
        let text = serde_json::to_string(&golden.answers).expect("serializes");
        assert!(!uid.is_match(&text), "{}: a uid is left", group.name);
        assert!(!time.is_match(&text), "{}: a timestamp is left", group.name);
        assert!(
            !rv.is_match(&text),
            "{}: a resourceVersion is left",
            group.name
        );
        names.insert(group.name.clone());
    }
    assert!(names.len() >= 10, "the corpus has its groups");
}
