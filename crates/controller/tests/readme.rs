//! The README's snippets are this crate's doctests, so they compile with this crate's
//! dependencies, which a reader copying one into a crate of their own does not have. What they
//! need beyond our crates must be said beside them: these tests read the README for it.

/// The Rust snippets of the README, each with the paragraph just before it.
fn snippets() -> Vec<(String, String)> {
    let readme = include_str!("../../../README.md");
    let mut out = Vec::new();
    let mut prose = String::new();
    // A blank line ends the paragraph: the next line of text starts a new one.
    let mut ended = false;
    let mut code: Option<String> = None;
    for line in readme.lines() {
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

#[test]
fn readme_snippets_take_the_cancellation_token_from_our_crates() {
    let snippets = snippets();
    assert!(snippets.len() >= 8, "{} snippets found", snippets.len());
    for (_, code) in &snippets {
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
