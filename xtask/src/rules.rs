//! The rule-id check: every rule id and invariant label the code and docs cite means one thing,
//! and is defined once, in docs/semantics.md.
//!
//! Two kinds of names are checked, both read from docs/semantics.md:
//! - rule ids (`A1.1`, `C13`, `EV3`, `L`): the first cell of a table row under `## Rule index`;
//! - invariant labels (`W1`, `G2`): the rows of the table under `## Invariant labels`, each naming a
//!   range (`W1–W5`) and the one file that defines it.
//!
//! It fails when a rule id is defined twice; when a letter prefix names both rules and invariants,
//! or invariants of two files; when a label's file does not mention it, or a file other than its
//! own defines it (writes it in bold, `**Q1**`, as definitions are written); and when a token with
//! a known prefix (`D2.1`, `X7`) is cited in a source file or a document but defined nowhere.
//! It reads files only, so it runs before anything is built.
//!
//! `cargo xtask rules` also runs the issue-number check ([`crate::issue_numbers`]): no file cites
//! a tracker's issue number.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where the ids are defined, relative to the workspace root.
pub const SEMANTICS: &str = "docs/semantics.md";

/// The documents checked for citations besides every `.rs` file (relative to the workspace root).
const DOCUMENTS: [&str; 9] = [
    "README.md",
    "CHANGELOG.md",
    "docs/architecture.md",
    "docs/semantics.md",
    "docs/benchmarks.md",
    "docs/benchmarks-archive.md",
    "docs/guide.md",
    "docs/performance.md",
    "docs/sharding.md",
];

/// This checker, whose tests cite undefined ids on purpose.
const SELF: &str = "xtask/src/rules.rs";

/// The folders searched for `.rs` files.
const SOURCE_ROOTS: [&str; 4] = ["crates", "tests", "xtask", "benches"];

/// An invariant label range: `prefix` numbered `first..=last`, defined in `file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRange {
    pub prefix: String,
    pub first: u32,
    pub last: u32,
    pub file: String,
}

impl LabelRange {
    /// `W1–W5`, or `W1` for a range of one.
    pub fn name(&self) -> String {
        match self.first == self.last {
            true => format!("{}{}", self.prefix, self.first),
            false => format!("{p}{}–{p}{}", self.first, self.last, p = self.prefix),
        }
    }
}

/// What docs/semantics.md defines.
#[derive(Debug, Default)]
pub struct Definitions {
    /// Each rule id with the number of rows defining it.
    pub rules: BTreeMap<String, usize>,
    pub labels: Vec<LabelRange>,
}

/// Splits `token` (`EV3`, `C13.6`, `L`) into its letter prefix and the rest; `None` if it is not
/// shaped as an id: one or two capitals, then nothing or a number of one or two digits, then any
/// `.number` parts.
fn id_shape(token: &str) -> Option<(&str, &str)> {
    let letters = token.bytes().take_while(u8::is_ascii_uppercase).count();
    if !(1..=2).contains(&letters) {
        return None;
    }
    let (prefix, rest) = token.split_at(letters);
    if rest.is_empty() {
        return Some((prefix, rest));
    }
    let mut parts = rest.split('.');
    let head = parts.next()?;
    let number = |p: &str| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    (number(head) && parts.all(number)).then_some((prefix, rest))
}

/// The first cell of a Markdown table row, trimmed, or `None` if `line` is not a row.
fn first_cell(line: &str) -> Option<&str> {
    let row = line.trim().strip_prefix('|')?;
    Some(row.split('|').next()?.trim())
}

/// Reads the rule index and the invariant label table from docs/semantics.md's text.
pub fn definitions(semantics: &str) -> Result<Definitions, String> {
    let mut defs = Definitions::default();
    let mut section = "";
    for (number, line) in semantics.lines().enumerate() {
        if let Some(title) = line.strip_prefix("## ") {
            section = title.trim();
            continue;
        }
        let Some(cell) = first_cell(line) else {
            continue;
        };
        match section {
            "Rule index" if id_shape(cell).is_some() => {
                *defs.rules.entry(cell.to_string()).or_default() += 1;
            }
            "Invariant labels" => {
                if cell == "label" || cell.starts_with("---") {
                    continue;
                }
                let file = line
                    .split('|')
                    .nth(2)
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .filter(|f| !f.is_empty())
                    .ok_or_else(|| {
                        format!("{SEMANTICS}:{}: a label row needs a file", number + 1)
                    })?;
                let range = label_range(cell, file).ok_or_else(|| {
                    format!(
                        "{SEMANTICS}:{}: `{cell}` is not a label or a range like `W1–W5`",
                        number + 1
                    )
                })?;
                defs.labels.push(range);
            }
            _ => {}
        }
    }
    if defs.rules.is_empty() {
        return Err(format!("{SEMANTICS} has no `## Rule index` table"));
    }
    Ok(defs)
}

/// `W1–W5` or `W1` (with an en dash or a hyphen) as a range of `file`.
fn label_range(cell: &str, file: String) -> Option<LabelRange> {
    let (from, to) = match cell.split_once(['–', '-']) {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (cell, cell),
    };
    let (prefix, first) = id_shape(from)?;
    let (prefix_to, last) = id_shape(to)?;
    let first: u32 = first.parse().ok()?;
    let last: u32 = last.parse().ok()?;
    (prefix == prefix_to && first <= last).then(|| LabelRange {
        prefix: prefix.to_string(),
        first,
        last,
        file,
    })
}

/// Every token of `text` shaped as an id whose prefix is in `prefixes`, with its line number:
/// a maximal run of capitals not preceded by a letter, digit or `_`, its digits and dotted parts,
/// not followed by a letter, digit or `_`. A token right after `::` is a Rust path segment (an
/// enum variant such as `Value::I64`), not a citation.
fn citations<'a>(text: &'a str, prefixes: &BTreeSet<&str>) -> Vec<(usize, &'a str)> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            line += 1;
            i += 1;
            continue;
        }
        if !bytes[i].is_ascii_uppercase() || (i > 0 && word(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_uppercase() {
            i += 1;
        }
        let letters_end = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == letters_end {
            continue; // no number: a word, not a citation (group ids are cited with a number)
        }
        // Dotted parts: `.digits`, but not a sentence's full stop.
        while i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
        if i < bytes.len() && word(bytes[i]) {
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            continue;
        }
        let token = &text[start..i];
        if text[..start].ends_with("::") {
            continue;
        }
        if let Some((prefix, _)) = id_shape(token) {
            if prefixes.contains(prefix) {
                found.push((line, token));
            }
        }
    }
    found
}

/// Whether `text` defines `label`: writes it in bold, alone or opening a bold phrase
/// (`**Q1**`, `**Q1 (heap order):**`).
fn defines(text: &str, label: &str) -> bool {
    let needle = format!("**{label}");
    text.match_indices(&needle).any(|(at, _)| {
        let next = text.as_bytes().get(at + needle.len()).copied();
        !matches!(next, Some(b) if b.is_ascii_alphanumeric() || b == b'.')
    })
}

/// Every problem found, given docs/semantics.md's text and each checked file's path and text.
pub fn check(semantics: &str, files: &[(String, String)]) -> Result<Vec<String>, String> {
    let defs = definitions(semantics)?;
    let mut problems = Vec::new();
    for (id, count) in &defs.rules {
        if *count > 1 {
            problems.push(format!(
                "rule {id} is defined {count} times in {SEMANTICS}'s rule index"
            ));
        }
    }
    let rule_prefixes: BTreeSet<&str> = defs
        .rules
        .keys()
        .filter_map(|id| id_shape(id).map(|(p, _)| p))
        .collect();
    let mut label_files: BTreeMap<&str, &str> = BTreeMap::new();
    for range in &defs.labels {
        if rule_prefixes.contains(range.prefix.as_str()) {
            problems.push(format!(
                "invariant labels {} ({}) share their prefix with rule ids",
                range.name(),
                range.file
            ));
        }
        if let Some(other) = label_files.insert(&range.prefix, &range.file) {
            problems.push(format!(
                "invariant label prefix {} is given to both {other} and {}",
                range.prefix, range.file
            ));
        }
        match files.iter().find(|(path, _)| *path == range.file) {
            None => problems.push(format!(
                "invariant labels {}: {} is not a checked file",
                range.name(),
                range.file
            )),
            Some((_, text)) => {
                for n in range.first..=range.last {
                    let label = format!("{}{n}", range.prefix);
                    if citations(text, &BTreeSet::from([range.prefix.as_str()]))
                        .iter()
                        .all(|(_, t)| *t != label)
                    {
                        problems.push(format!(
                            "invariant {label} is listed for {} but that file never names it",
                            range.file
                        ));
                    }
                }
            }
        }
    }
    let is_label = |token: &str| {
        id_shape(token).is_some_and(|(prefix, number)| {
            defs.labels.iter().any(|r| {
                r.prefix == prefix
                    && number
                        .parse::<u32>()
                        .is_ok_and(|n| (r.first..=r.last).contains(&n))
            })
        })
    };
    let prefixes: BTreeSet<&str> = rule_prefixes
        .iter()
        .copied()
        .chain(defs.labels.iter().map(|r| r.prefix.as_str()))
        .collect();
    for (path, text) in files {
        let mut undefined: BTreeMap<&str, usize> = BTreeMap::new();
        for (line, token) in citations(text, &prefixes) {
            if !defs.rules.contains_key(token) && !is_label(token) {
                undefined.entry(token).or_insert(line);
            }
            if is_label(token) && defines(text, token) {
                let own = defs
                    .labels
                    .iter()
                    .find(|r| id_shape(token).is_some_and(|(p, _)| p == r.prefix))
                    .map(|r| r.file.as_str());
                if own != Some(path.as_str()) {
                    problems.push(format!(
                        "{path}:{line}: defines invariant {token}, which belongs to {}",
                        own.unwrap_or("no file")
                    ));
                }
            }
        }
        for (token, line) in undefined {
            problems.push(format!(
                "{path}:{line}: cites {token}, which {SEMANTICS} defines neither as a rule nor as an invariant label"
            ));
        }
    }
    problems.sort();
    problems.dedup();
    Ok(problems)
}

/// Every `.rs` file under `dir`, skipping build output and hidden folders.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") && !path.ends_with(SELF) {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs the check on the workspace at the current directory.
pub fn run() -> Result<(), String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let semantics = read(Path::new(SEMANTICS))?;
    let mut paths: Vec<PathBuf> = DOCUMENTS
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    for root in SOURCE_ROOTS {
        rust_files(Path::new(root), &mut paths)?;
    }
    paths.sort();
    let mut files = Vec::with_capacity(paths.len());
    for path in &paths {
        files.push((path.display().to_string(), read(path)?));
    }
    let problems = check(&semantics, &files)?;
    let (read, issue_numbers) = crate::issue_numbers::check(&crate::tools::workspace_root())?;
    if problems.is_empty() && issue_numbers.is_empty() {
        println!(
            "rules: {} files cite only ids and labels that {SEMANTICS} defines once; \
             {read} files cite no issue number",
            files.len()
        );
        return Ok(());
    }
    for p in problems.iter().chain(&issue_numbers) {
        println!("  {p}");
    }
    Err(format!(
        "{} rule-id problem(s), {} issue number(s) cited",
        problems.len(),
        issue_numbers.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEMANTICS_TEXT: &str = "\
## Rule index

| id | behaviour |
|---|---|
| A1 | keys |
| A1.1 | namespace/name |
| EV2 | spam |

## Invariant labels

| label | file | what |
|---|---|---|
| W1–W2 | `src/watch.rs` | watch |
";

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn defined_ids_and_labels_pass() {
        let problems = check(
            SEMANTICS_TEXT,
            &files(&[
                (
                    "src/watch.rs",
                    "//! - **W1** ordered\n//! - **W2** bounded\n",
                ),
                (
                    "src/a.rs",
                    "// A1.1, EV2 and W2. An X509 cert, K8s, E2E, HTTP2, A1.",
                ),
            ]),
        )
        .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn an_undefined_rule_id_is_named_with_its_file_and_line() {
        let problems = check(
            SEMANTICS_TEXT,
            &files(&[
                ("src/watch.rs", "W1 W2"),
                ("src/a.rs", "fine\n// see A3.1 and EV7\n"),
            ]),
        )
        .unwrap();
        assert_eq!(
            problems,
            [
                "src/a.rs:2: cites A3.1, which docs/semantics.md defines neither as a rule nor as an invariant label",
                "src/a.rs:2: cites EV7, which docs/semantics.md defines neither as a rule nor as an invariant label",
            ]
        );
    }

    #[test]
    fn a_rule_defined_twice_is_refused() {
        let twice = SEMANTICS_TEXT.replace("| EV2 | spam |", "| EV2 | spam |\n| A1 | again |");
        let problems = check(&twice, &files(&[("src/watch.rs", "W1 W2")])).unwrap();
        assert_eq!(
            problems,
            ["rule A1 is defined 2 times in docs/semantics.md's rule index"]
        );
    }

    #[test]
    fn a_label_defined_in_another_file_or_sharing_a_rule_prefix_is_refused() {
        let problems = check(
            SEMANTICS_TEXT,
            &files(&[
                ("src/watch.rs", "W1 W2"),
                ("src/heap.rs", "//! - **W1 (heap order):** a different W1\n"),
            ]),
        )
        .unwrap();
        assert_eq!(
            problems,
            ["src/heap.rs:1: defines invariant W1, which belongs to src/watch.rs"]
        );
        let clash = SEMANTICS_TEXT.replace("| W1–W2 | `src/watch.rs`", "| A1–A2 | `src/watch.rs`");
        let problems = check(&clash, &files(&[("src/watch.rs", "A1 A2")])).unwrap();
        assert_eq!(
            problems,
            ["invariant labels A1–A2 (src/watch.rs) share their prefix with rule ids"]
        );
    }

    #[test]
    fn a_label_its_file_never_names_is_refused() {
        let problems = check(SEMANTICS_TEXT, &files(&[("src/watch.rs", "only W1")])).unwrap();
        assert_eq!(
            problems,
            ["invariant W2 is listed for src/watch.rs but that file never names it"]
        );
    }

    #[test]
    fn a_rust_path_segment_is_not_a_citation() {
        let prefixes = BTreeSet::from(["I", "F"]);
        let text = "set(PValue::I64(1)); // I64 rule\nlet x = Kind::F32;";
        let cited: Vec<&str> = citations(text, &prefixes).iter().map(|(_, t)| *t).collect();
        assert_eq!(cited, ["I64"], "only the one in the comment");
    }

    #[test]
    fn ids_are_shaped_as_one_or_two_capitals_and_short_numbers() {
        assert_eq!(id_shape("C13.6"), Some(("C", "13.6")));
        assert_eq!(id_shape("EV"), Some(("EV", "")));
        assert_eq!(id_shape("X509"), None);
        assert_eq!(id_shape("HTTP2"), None);
        assert_eq!(id_shape("a1"), None);
    }
}
