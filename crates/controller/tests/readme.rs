//! The README's and the guide's snippets are this crate's doctests, so they compile with this
//! crate's dependencies, which a reader copying one into a crate of their own does not have. What
//! they need beyond our crates must be said beside them: these tests read both documents for it.

/// The documents whose Rust snippets are this crate's doctests, with their text.
const DOCUMENTS: [(&str, &str); 2] = [
    ("README.md", include_str!("../../../README.md")),
    ("docs/guide.md", include_str!("../../../docs/guide.md")),
];

/// The Rust snippets of `text`, each with the paragraph just before it.
fn snippets_of(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut prose = String::new();
    // A blank line ends the paragraph: the next line of text starts a new one.
    let mut ended = false;
    let mut code: Option<String> = None;
    for line in text.lines() {
        match &mut code {
            Some(body) if line.starts_with("```") => {
                out.push((std::mem::take(&mut prose), std::mem::take(body)));
                code = None;
            }
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
            None if line.starts_with("```rust") => code = Some(String::new()),
            None if line.starts_with("```") => prose.clear(),
            None if line.starts_with('#') => prose.clear(),
            None if line.trim().is_empty() => ended = true,
            None => {
                if std::mem::take(&mut ended) {
                    prose.clear();
                }
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    out
}

/// The Rust snippets of every document in [`DOCUMENTS`].
fn snippets() -> Vec<(String, String)> {
    DOCUMENTS
        .iter()
        .flat_map(|(_, text)| snippets_of(text))
        .collect()
}

#[test]
fn every_document_with_snippets_is_compiled_as_this_crates_doctests() {
    let lib = include_str!("../src/lib.rs");
    for (path, _) in DOCUMENTS {
        let include = format!("#[doc = include_str!(\"../../../{path}\")]");
        assert!(
            lib.contains(&include),
            "{path}'s snippets are read here but not compiled: src/lib.rs lacks `{include}`"
        );
    }
}

#[test]
fn the_readme_keeps_its_controller_and_the_guide_one_example_per_layer() {
    let readme = snippets_of(DOCUMENTS[0].1);
    assert!(
        readme
            .iter()
            .any(|(_, code)| code.contains("ControllerBuilder::new")),
        "the README's example is a controller"
    );
    let guide = snippets_of(DOCUMENTS[1].1);
    for layer in [
        "store_index",
        "delta_fifo",
        "shared_informer",
        "workqueue",
        "sim_apiserver",
    ] {
        assert!(
            guide.iter().any(|(_, code)| code.contains(layer)),
            "no guide snippet uses {layer}"
        );
    }
    let all = snippets();
    assert!(all.len() >= 8, "{} snippets found", all.len());
}

#[test]
fn readme_snippets_take_the_cancellation_token_from_our_crates() {
    for (_, code) in &snippets() {
        assert!(
            !code.contains("tokio_util"),
            "a snippet names tokio_util, a dependency its reader may not have; use the \
             crates' CancellationToken re-export:\n{code}"
        );
    }
}

#[test]
fn a_readme_snippet_that_needs_the_k8s_pb_feature_says_so_beside_it() {
    let mut needing = 0;
    for (prose, code) in snippets() {
        if code.contains("k8s_pb") || code.contains("PbView") || code.contains("Pb<") {
            needing += 1;
            assert!(
                prose.contains("feature `k8s-pb`"),
                "the paragraph before this snippet does not name the feature `k8s-pb`:\n{prose}\n{code}"
            );
        }
    }
    assert!(needing >= 1);
}

/// The README's controller fits in a screenful (at most 40 lines of `main`, `reconcile` and their
/// helpers, not counting `use` lines and blank ones), and docs/controller.md states its count
/// and the README repeats it, so neither can drift from the code.
#[test]
fn the_readme_controller_fits_and_its_line_count_is_stated() {
    let readme = include_str!("../../../README.md");
    let (_, code) = snippets_of(readme)
        .into_iter()
        .find(|(_, code)| code.contains("ControllerBuilder"))
        .expect("the README's controller");
    let lines = code
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("use "))
        .count();
    assert!(lines <= 40, "the README's controller has {lines} lines");
    let stated = format!("| **{lines}** |");
    assert!(
        include_str!("../../../docs/controller.md").contains(&stated),
        "docs/controller.md does not state {lines} lines"
    );
    assert!(
        readme.contains(&format!("are {lines} lines")),
        "the README does not state {lines} lines"
    );
}
