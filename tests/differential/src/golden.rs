//! Golden files: the real server's normalised answers to one group, `golden/<group>.json`,
//! written by `record` and read by every comparison. They are committed, so that the
//! simulator is held to kube-apiserver by `cargo test` with no Go and no real server.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

/// One group's recorded answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Golden {
    /// The group (the corpus file's stem).
    pub group: String,
    /// What answered (`kube-apiserver v1.36.3`).
    pub recorded_from: String,
    /// One normalised answer per compared step, in order; each names its `step`.
    #[serde(serialize_with = "answers_in_reading_order")]
    pub answers: Vec<Value>,
}

/// The members of an answer a reader looks for first, written in this order before the rest
/// (serde_json's maps are sorted otherwise).
const FIRST_MEMBERS: [&str; 4] = ["step", "request", "status", "headers"];

fn answers_in_reading_order<S: serde::Serializer>(
    answers: &[Value],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::{SerializeMap, SerializeSeq};
    struct Ordered<'a>(&'a Value);
    impl Serialize for Ordered<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let Value::Object(members) = self.0 else {
                return self.0.serialize(serializer);
            };
            let mut map = serializer.serialize_map(Some(members.len()))?;
            for key in FIRST_MEMBERS {
                if let Some(value) = members.get(key) {
                    map.serialize_entry(key, value)?;
                }
            }
            for (key, value) in members {
                if !FIRST_MEMBERS.contains(&key.as_str()) {
                    map.serialize_entry(key, value)?;
                }
            }
            map.end()
        }
    }
    let mut seq = serializer.serialize_seq(Some(answers.len()))?;
    for answer in answers {
        seq.serialize_element(&Ordered(answer))?;
    }
    seq.end()
}

/// The golden directory of this crate.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// The golden file of `group` in `dir`.
pub fn path(dir: &Path, group: &str) -> PathBuf {
    dir.join(format!("{group}.json"))
}

/// Reads the golden file of `group`.
pub fn read(dir: &Path, group: &str) -> Result<Golden, Error> {
    let file = path(dir, group);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Error::Golden(format!(
            "{}: {e}; record it with `cargo xtask differential record`",
            file.display()
        ))
    })?;
    let golden: Golden = serde_json::from_str(&text)
        .map_err(|e| Error::Golden(format!("{}: {e}", file.display())))?;
    if golden.group != group {
        return Err(Error::Golden(format!(
            "{} holds the group `{}`",
            file.display(),
            golden.group
        )));
    }
    Ok(golden)
}

/// Writes `golden` into `dir` (pretty JSON, a newline at the end, so diffs read well).
pub fn write(dir: &Path, golden: &Golden) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let file = path(dir, &golden.group);
    let mut text = serde_json::to_string_pretty(golden)
        .map_err(|e| Error::Golden(format!("{}: {e}", file.display())))?;
    text.push('\n');
    std::fs::write(&file, text).map_err(|e| Error::io(&file, e))
}

/// The golden files in `dir` whose group is not in `groups` (left over from a removed group).
pub fn orphans(dir: &Path, groups: &[&str]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            !groups.contains(&stem)
        })
        .collect();
    out.sort();
    out
}
