//! The deliberate differences: where the simulator answers otherwise than kube-apiserver on
//! purpose, each with its reason (`deliberate.json`, read by the test and by `compare`; the
//! same list, in words, is in docs/simulator.md). An entry names steps (`group/step`, `*`
//! matching anything) and places in their answers (a path as [`crate::diff`] writes them, `*`
//! matching anything; a place covers everything under it). A difference no entry covers fails
//! the comparison, and so does an entry that covers none (what it excused was fixed, or the
//! corpus changed): the list stays exactly as long as the truth.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::Error;

/// The allowlist file of this crate.
pub fn default_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deliberate.json")
}

/// One deliberate difference.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A short name, for the report.
    pub id: String,
    /// Why the simulator differs here.
    pub reason: String,
    /// The steps, `group/step` patterns.
    pub steps: Vec<String>,
    /// The places in their answers, path patterns.
    pub paths: Vec<String>,
    /// Covers only what the simulator's answer leaves out (kube-apiserver has it, the
    /// simulator has nothing there): for what the simulator does not serve, so that a wrong
    /// value where both answer still fails.
    #[serde(default)]
    pub absent_only: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    deliberate: Vec<Entry>,
}

/// Reads the allowlist at `path`.
pub fn load(path: &Path) -> Result<Vec<Entry>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let file: File = serde_json::from_str(&text).map_err(|e| Error::Allowlist {
        file: path.to_path_buf(),
        problem: e.to_string(),
    })?;
    for (i, entry) in file.deliberate.iter().enumerate() {
        let problem = if entry.id.is_empty() || entry.reason.trim().is_empty() {
            Some("every entry has an `id` and a `reason`".to_string())
        } else if entry.steps.is_empty() || entry.paths.is_empty() {
            Some(format!("`{}` names no step or no path", entry.id))
        } else if file.deliberate[..i].iter().any(|e| e.id == entry.id) {
            Some(format!("two entries are `{}`", entry.id))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(Error::Allowlist {
                file: path.to_path_buf(),
                problem,
            });
        }
    }
    Ok(file.deliberate)
}

impl Entry {
    /// Whether this entry covers `difference` in the answer of `step` (`group/step`).
    pub fn covers(&self, step: &str, difference: &crate::diff::Difference) -> bool {
        (!self.absent_only || difference.actual.is_none())
            && self.steps.iter().any(|p| glob(p, step))
            && self.paths.iter().any(|p| covers_path(p, &difference.path))
    }
}

/// Whether `pattern` matches `path` or one of its ancestors.
fn covers_path(pattern: &str, path: &str) -> bool {
    if glob(pattern, path) {
        return true;
    }
    path.char_indices()
        .filter(|(_, c)| *c == '/')
        .any(|(i, _)| i > 0 && glob(pattern, &path[..i]))
}

/// `*` matches any run of characters (`/` too); everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(steps: &[&str], paths: &[&str]) -> Entry {
        Entry {
            id: "x".into(),
            reason: "y".into(),
            steps: steps.iter().map(|s| s.to_string()).collect(),
            paths: paths.iter().map(|s| s.to_string()).collect(),
            absent_only: false,
        }
    }

    fn at(path: &str) -> crate::diff::Difference {
        crate::diff::Difference {
            path: path.into(),
            golden: Some(serde_json::json!(1)),
            actual: Some(serde_json::json!(2)),
        }
    }

    #[test]
    fn a_path_covers_what_is_under_it_and_stars_match_runs() {
        let e = entry(&["discovery/*"], &["/body/groups"]);
        assert!(e.covers("discovery/apis", &at("/body/groups/[name=batch]")));
        assert!(e.covers("discovery/apis", &at("/body/groups")));
        assert!(!e.covers("discovery/apis", &at("/body/groupsx")));
        assert!(!e.covers("lists/apis", &at("/body/groups")));
        let e = entry(&["*/table-*"], &["/body/rows/*/cells/2"]);
        assert!(e.covers("tables/table-list", &at("/body/rows/0/cells/2")));
        assert!(!e.covers("tables/table-list", &at("/body/rows/0/cells/1")));
    }

    #[test]
    fn an_absent_only_entry_covers_only_what_the_simulator_leaves_out() {
        let mut e = entry(&["discovery/*"], &["/body/resources"]);
        e.absent_only = true;
        let mut missing = at("/body/resources/[name=nodes]");
        missing.actual = None;
        assert!(e.covers("discovery/core-v1", &missing));
        assert!(!e.covers(
            "discovery/core-v1",
            &at("/body/resources/[name=pods]/verbs/0")
        ));
    }
}
