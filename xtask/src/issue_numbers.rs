//! The issue-number check, part of `cargo xtask rules`: no source file or document cites a
//! tracker's issue number.
//!
//! A number means nothing to a reader without the tracker, which is not part of the project, and
//! it ages: the code and the docs say what a piece of work was and why, never which ticket asked
//! for it. The check reads every `.rs`, `.md` and `.toml` file of the repository (build output and
//! hidden folders skipped) and fails on a mention shaped as one: `issue 32`, `Issue #32`,
//! `issue-32`, `issues 31 and 32` (the first number is enough), or a bare `(#123)`. It reads files
//! only, so it runs before anything is built.

use std::path::{Path, PathBuf};

/// The extensions of the files read.
const EXTENSIONS: [&str; 3] = ["rs", "md", "toml"];

/// This checker, whose tests cite issue numbers on purpose.
const SELF: &str = "xtask/src/issue_numbers.rs";

/// Each mention of an issue number in `text`, as its line number and the mention.
pub fn mentions(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for (at, _) in lower.match_indices("issue") {
            if let Some(end) = issue_word_then_number(&lower, at) {
                found.push((index + 1, line[at..end].to_string()));
            }
        }
        for (at, _) in lower.match_indices("(#") {
            let digits = digits_at(&lower, at + 2);
            if digits > 0 && lower[at + 2 + digits..].starts_with(')') {
                found.push((index + 1, line[at..at + 3 + digits].to_string()));
            }
        }
    }
    found
}

/// The end of the mention if the word `issue` or `issues` at `at` of the lowercase `line` is
/// followed by a number: a space or a hyphen, an optional `#`, then digits.
fn issue_word_then_number(line: &str, at: usize) -> Option<usize> {
    let bytes = line.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    if at > 0 && word(bytes[at - 1]) {
        return None; // part of a longer word
    }
    let mut i = at + "issue".len();
    if bytes.get(i) == Some(&b's') {
        i += 1;
    }
    if !matches!(bytes.get(i), Some(b' ' | b'-')) {
        return None;
    }
    i += 1;
    if bytes.get(i) == Some(&b'#') {
        i += 1;
    }
    let digits = digits_at(line, i);
    (digits > 0).then_some(i + digits)
}

/// How many ASCII digits `text` has from byte `at` on.
fn digits_at(text: &str, at: usize) -> usize {
    text.as_bytes().get(at..).map_or(0, |rest| {
        rest.iter().take_while(|b| b.is_ascii_digit()).count()
    })
}

/// Whether `relative` (a path from the workspace root, `/`-separated) is read by the check.
fn is_checked(relative: &str) -> bool {
    relative != SELF
}

/// Every checked file under `dir`, as its path relative to `root`.
fn files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let relative_text = relative.to_string_lossy().replace('\\', "/");
        if !is_checked(&relative_text) {
            continue;
        }
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files(root, &path, out)?;
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(relative.to_path_buf());
        }
    }
    Ok(())
}

/// Every mention in the repository at `root`, as `path:line: mention`.
pub fn check(root: &Path) -> Result<(usize, Vec<String>), String> {
    let mut paths = Vec::new();
    files(root, root, &mut paths)?;
    paths.sort();
    let mut problems = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(root.join(path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        for (line, mention) in mentions(&text) {
            problems.push(format!(
                "{}:{line}: cites `{mention}`; say what the work was and why, not its issue number",
                path.display()
            ));
        }
    }
    Ok((paths.len(), problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cited(text: &str) -> Vec<String> {
        mentions(text).into_iter().map(|(_, m)| m).collect()
    }

    #[test]
    fn every_shape_of_an_issue_number_is_found_with_its_line() {
        let text =
            "fine\nas issue 32 says; Issue #7 too\n(issue-34) and issues 31 and 32\nsee (#123).\n";
        assert_eq!(
            mentions(text),
            [
                (2, "issue 32".to_string()),
                (2, "Issue #7".to_string()),
                (3, "issue-34".to_string()),
                (3, "issues 31".to_string()),
                (4, "(#123)".to_string()),
            ]
        );
    }

    #[test]
    fn words_that_are_not_an_issue_number_pass() {
        let text = "\
the issue's bound; an issue number is meaningless; issued 3 tokens; tissue 5\n\
SyncTracker and the tracker; #[derive(Debug)] and (#[cfg(test)]); `pods (DynamicObject)#2`\n\
issues: none; (#) (#x)\n";
        assert!(cited(text).is_empty(), "{:?}", cited(text));
    }

    #[test]
    fn every_file_but_this_one_is_read() {
        assert!(!is_checked(SELF));
        assert!(is_checked("crates/reflector/src/lib.rs"));
        assert!(is_checked("tests/real-apiserver/src/server.rs"));
        assert!(is_checked("crates/controller/src/lib.rs"));
        assert!(is_checked("README.md"));
    }
}
