//! The module check: inside each library crate, the simulator (`tests/sim-apiserver`) and xtask,
//! no import circle between modules, and no module importing one of a layer above its own where a
//! crate declares layers (its walls: the reflector's and the simulator's); in the simulator, no
//! function over 80 lines.
//!
//! It reads the sources only, as the layering check reads `cargo metadata`: every `.rs` file under
//! `crates/*/src` (and the other trees' `src`) is a module (`lib.rs` the root, `a.rs` and `a/mod.rs` the module `a`, `a/b.rs`
//! the module `a::b`), and a module depends on another when its non-test code names a path into it
//! through `crate::` or `super::` (in a `use` or anywhere in the code). Test code (`#[cfg(test)]`
//! items and modules named `tests`) may use anything, as dev-dependencies may. Edges between a
//! module and its own ancestors or descendants are structure (declaring and re-exporting children,
//! children using what their parent gathers), not dependencies, and are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside a crate (`["client", "api"]`; empty for the crate root).
pub type ModPath = Vec<String>;

/// A crate's walls: layers bottom first, each a list of module path prefixes (`"client"` covers
/// `client` and every module under it). A module may import modules of its own layer and below.
/// Modules that no layer names (the crate root) are unchecked by the walls.
pub struct Walls {
    pub krate: &'static str,
    pub layers: &'static [(&'static str, &'static [&'static str])],
}

/// The walls CI keeps. The reflector: the wire format below the HTTP client below the
/// list-and-watch loop. The simulator: what a handler speaks, the resource model and the store
/// below the state every handler shares, the handlers above it, the server's routing on top.
pub const WALLS: &[Walls] = &[REFLECTOR_WALLS, SIMULATOR_WALLS];

const REFLECTOR_WALLS: Walls = Walls {
    krate: "reflector",
    layers: &[
        ("wire", &["wire"]),
        ("client", &["client"]),
        (
            "list-and-watch",
            &[
                "backoff",
                "decode_lane",
                "error",
                "http_lister_watcher",
                "list",
                "lister_watcher",
                "metrics",
                "reclaim",
                "reflector",
                "shard_filter",
                "watch_idle",
                "watch_stream",
            ],
        ),
    ],
};

const SIMULATOR_WALLS: Walls = Walls {
    krate: "sim-apiserver",
    layers: &[
        (
            "vocabulary",
            &[
                "body",
                "compression",
                "continue_token",
                "events_convert",
                "fixtures",
                "go_json",
                "metrics",
                "patch",
                "procstat",
                "protobuf",
                "representation",
                "shard_selector",
                "status",
                "time",
                "tls",
                "users",
                "watch_event",
            ],
        ),
        (
            "model",
            &[
                "apply",
                "authz",
                "builtin",
                "crd",
                "defaults",
                "field_validation",
                "label_syntax",
                "openapi",
                "params",
                "resources",
                "selectors",
                "smp",
                "unknown_fields",
                "validation",
            ],
        ),
        ("store", &["crd::serving", "faults", "storage", "write_log"]),
        (
            "shared",
            &["builder", "resource_path", "response", "shared"],
        ),
        (
            "handlers",
            &[
                "deletion",
                "discovery",
                "fault_responses",
                "list",
                "managed_fields",
                "openapi::serve",
                "protobuf::serve",
                "reads",
                "table",
                "watch",
                "writes",
            ],
        ),
        (
            "server",
            &["churn", "prebuilt", "server", "sim_server", "test_server"],
        ),
    ],
};

/// Blanks out comments and the contents of string and character literals (keeping newlines), so
/// that what remains is code whose braces and paths can be read without a parser.
pub fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#, with as many hashes closing as opening.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                out.push(blank(chars[j]));
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a), which stays.
            if next == Some('\\') {
                out.push('\'');
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    out.push(' ');
                    i += 1;
                }
                out.push_str(" '");
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Removes `#[cfg(test)]` items from code that [`code_only`] has cleaned: the attribute, any
/// attributes after it, and the item up to its `;` or its matching closing brace.
pub fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let bytes = item.as_bytes();
        let mut i = "#[cfg(test)]".len();
        let mut depth = 0usize;
        let mut end = bytes.len();
        while i < bytes.len() {
            match bytes[i] {
                b'[' | b'(' => depth += 1,
                b']' | b')' => depth = depth.saturating_sub(1),
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                b'{' if depth == 0 => {
                    let mut braces = 0usize;
                    while i < bytes.len() {
                        match bytes[i] {
                            b'{' => braces += 1,
                            b'}' => {
                                braces -= 1;
                                if braces == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    end = (i + 1).min(bytes.len());
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        // Keep the line count, so line numbers in messages stay true.
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Reads an identifier at `i`, returning it and the index after it.
fn ident(bytes: &[u8], mut i: usize) -> Option<(String, usize)> {
    let start = i;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    (i > start && !bytes[start].is_ascii_digit())
        .then(|| (String::from_utf8_lossy(&bytes[start..i]).into_owned(), i))
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Reads a path tree after `crate::` or `super::` (`a::b`, `a::{b, c::{d, e}}`, `a::*`), pushing
/// each full path (prefixed with `prefix`) to `out`; returns the index after the tree.
fn path_tree(bytes: &[u8], i: usize, prefix: &ModPath, out: &mut Vec<ModPath>) -> usize {
    let mut i = skip_space(bytes, i);
    let mut path = prefix.clone();
    loop {
        if bytes.get(i) == Some(&b'{') {
            i += 1;
            loop {
                i = skip_space(bytes, i);
                match bytes.get(i) {
                    None => return i,
                    Some(b'}') => return i + 1,
                    Some(b',') => i += 1,
                    Some(_) => {
                        let before = i;
                        i = path_tree(bytes, i, &path, out);
                        if i == before {
                            i += 1; // not a path: skip a character rather than loop
                        }
                    }
                }
            }
        }
        match ident(bytes, i) {
            Some((name, after)) => {
                if name != "self" {
                    path.push(name);
                }
                i = skip_space(bytes, after);
                if bytes.get(i..i + 2) == Some(b"::") {
                    i = skip_space(bytes, i + 2);
                    continue;
                }
                out.push(path);
                return i;
            }
            None => {
                // `*` or nothing: the path so far.
                if bytes.get(i) == Some(&b'*') {
                    i += 1;
                }
                out.push(path);
                return i;
            }
        }
    }
}

/// Every path (relative to the crate root) that `code` names through `crate::` or `super::`,
/// `module` being the module the code is in and `is_dir_module` whether it is a `mod.rs` (or the
/// root), whose `super` is its parent.
pub fn referenced_paths(code: &str, module: &ModPath) -> Vec<ModPath> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if boundary && bytes[i..].starts_with(b"crate::") {
            i = path_tree(bytes, i + "crate::".len(), &Vec::new(), &mut out);
        } else if boundary && bytes[i..].starts_with(b"super::") {
            let mut base = module.clone();
            base.pop();
            let mut j = i + "super::".len();
            while bytes[j..].starts_with(b"super::") {
                base.pop();
                j += "super::".len();
            }
            i = path_tree(bytes, j, &base, &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// The module a path names: its longest prefix that is a module of the crate.
fn resolve<'a>(path: &ModPath, modules: &'a BTreeSet<ModPath>) -> Option<&'a ModPath> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n].to_vec()))
}

fn related(a: &ModPath, b: &ModPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn display(module: &ModPath) -> String {
    match module.is_empty() {
        true => "(crate root)".to_string(),
        false => module.join("::"),
    }
}

/// The crate root's re-exports (`pub use wire::object::{Decode, DecodeSource};`): each name, and
/// the module that defines it, so that `crate::Decode` counts as an import of `wire::object`,
/// not of the root (which every module may name).
fn root_reexports(
    files: &BTreeMap<ModPath, String>,
    modules: &BTreeSet<ModPath>,
) -> BTreeMap<String, ModPath> {
    let mut out = BTreeMap::new();
    let Some(root) = files.get(&Vec::new()) else {
        return out;
    };
    let code = without_tests(&code_only(root));
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("pub use ") {
        let mut paths = Vec::new();
        path_tree(bytes, at + "pub use ".len(), &Vec::new(), &mut paths);
        for path in paths {
            let (Some(name), Some(first)) = (path.last(), path.first()) else {
                continue;
            };
            if first == "crate" || path.len() < 2 {
                continue;
            }
            if let Some(module) = resolve(&path, modules).filter(|m| !m.is_empty()) {
                out.insert(name.clone(), module.clone());
            }
        }
    }
    out
}

/// One crate's module graph: module → the modules it imports (ancestors and descendants left out).
pub fn graph(files: &BTreeMap<ModPath, String>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let reexports = root_reexports(files, &modules);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, source) in files {
        let code = without_tests(&code_only(source));
        let entry = edges.entry(module.clone()).or_default();
        for path in referenced_paths(&code, module) {
            let through_root = path
                .first()
                .filter(|_| resolve(&path, &modules).is_some_and(|m| m.is_empty()))
                .and_then(|name| reexports.get(name));
            if let Some(target) = through_root.or_else(|| resolve(&path, &modules)) {
                if !related(module, target) {
                    entry.insert(target.clone());
                }
            }
        }
    }
    edges
}

/// Every import circle, as the modules of each strongly connected component (Tarjan's), with one
/// circle through them spelled out.
pub fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<String> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        components: Vec<Vec<&'a ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.components.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    let mut out = Vec::new();
    for component in state.components {
        let members: BTreeSet<&ModPath> = component.iter().copied().collect();
        let start = *members.iter().next().expect("a component has members");
        // A shortest way back to `start` inside the component, by breadth-first search.
        let mut previous: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
        let mut frontier = vec![start];
        let mut back = None;
        'search: while !frontier.is_empty() {
            let mut next = Vec::new();
            for v in frontier {
                for w in edges.get(v).into_iter().flatten() {
                    if !members.contains(w) {
                        continue;
                    }
                    if w == start {
                        back = Some(v);
                        break 'search;
                    }
                    if !previous.contains_key(w) {
                        previous.insert(w, v);
                        next.push(w);
                    }
                }
            }
            frontier = next;
        }
        // Walk back from the last step to `start`, then read the steps forwards.
        let mut middle = Vec::new();
        let mut at = back.expect("a component of two or more has a circle");
        while at != start {
            middle.push(at);
            at = previous[at];
        }
        middle.reverse();
        let path = std::iter::once(start)
            .chain(middle)
            .chain(std::iter::once(start));
        let shown: Vec<String> = path.map(display).collect();
        out.push(shown.join(" → "));
    }
    out
}

/// The layer of `module` under `walls`, by its longest matching prefix.
fn layer_of(walls: &Walls, module: &ModPath) -> Option<usize> {
    let name = module.join("::");
    walls
        .layers
        .iter()
        .enumerate()
        .flat_map(|(n, (_, prefixes))| prefixes.iter().map(move |p| (n, *p)))
        .filter(|(_, p)| name == *p || name.starts_with(&format!("{p}::")))
        .max_by_key(|(_, p)| p.len())
        .map(|(n, _)| n)
}

/// Every import that goes up through a wall.
pub fn wall_breaches(walls: &Walls, edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, targets) in edges {
        let Some(low) = layer_of(walls, from) else {
            continue;
        };
        for to in targets {
            if let Some(high) = layer_of(walls, to).filter(|h| *h > low) {
                out.push(format!(
                    "{}: `{}` ({}) imports `{}` ({}), a layer above it",
                    walls.krate,
                    display(from),
                    walls.layers[low].0,
                    display(to),
                    walls.layers[high].0
                ));
            }
        }
    }
    out
}

/// Crates whose functions are held short, with the most lines a function may span (from its
/// `fn` to its closing brace, both included). The simulator's handlers read as steps this way.
pub const SHORT_FUNCTIONS: &[(&str, usize)] = &[("sim-apiserver", 80)];

/// A function longer than its crate allows.
#[derive(Debug, PartialEq, Eq)]
pub struct LongFunction {
    pub name: String,
    /// The line of its `fn`, from 1.
    pub line: usize,
    /// The lines it spans.
    pub lines: usize,
}

/// Every function with a body in `source` that spans more than `max` lines, test code included
/// (a nested function counts in its own right and in the one around it).
pub fn long_functions(source: &str, max: usize) -> Vec<LongFunction> {
    let code = code_only(source);
    let bytes = code.as_bytes();
    let line_at = |at: usize| 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = code[i..].find("fn") {
        let at = i + found;
        i = at + 2;
        let boundary = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let spaced = bytes.get(at + 2).is_some_and(u8::is_ascii_whitespace);
        if !boundary || !spaced {
            continue;
        }
        let Some((name, after)) = ident(bytes, skip_space(bytes, at + 2)) else {
            continue;
        };
        let Some(close) = body_end(bytes, after) else {
            continue;
        };
        let (first, last) = (line_at(at), line_at(close));
        if last - first + 1 > max {
            out.push(LongFunction {
                name,
                line: first,
                lines: last - first + 1,
            });
        }
    }
    out
}

/// The index of the closing brace of the body of the function whose signature starts at `i`, or
/// `None` for a declaration without a body (`fn f();` in a trait).
fn body_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'<' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            // `->` is no closing angle bracket.
            b'>' if bytes[i - 1] != b'-' => depth = depth.saturating_sub(1),
            b';' if depth == 0 => return None,
            b'{' if depth == 0 => break,
            _ => {}
        }
        i += 1;
    }
    let mut braces = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => braces += 1,
            b'}' => {
                braces -= 1;
                if braces == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Every `.rs` file under `src`, tests and binaries included, with its text.
fn read_sources(src: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        paths.sort();
        for path in paths {
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                out.push((path, text));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(src, &mut out)?;
    Ok(out)
}

/// A crate's modules and their sources, read from `src`.
fn read_crate(src: &Path) -> Result<BTreeMap<ModPath, String>, String> {
    fn walk(dir: &Path, base: &ModPath, out: &mut BTreeMap<ModPath, String>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        paths.sort();
        for path in paths {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            if path.is_dir() {
                if name != "bin" && name != "tests" {
                    let mut sub = base.clone();
                    sub.push(name);
                    walk(&path, &sub, out)?;
                }
                continue;
            }
            let Some(stem) = name.strip_suffix(".rs") else {
                continue;
            };
            let module = match stem {
                "lib" | "main" if base.is_empty() => base.clone(),
                "mod" => base.clone(),
                "tests" => continue,
                other => {
                    let mut m = base.clone();
                    m.push(other.to_string());
                    m
                }
            };
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            out.insert(module, text);
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(src, &Vec::new(), &mut out)?;
    Ok(out)
}

/// The source trees checked besides every crate under `crates/`: the simulator and this tool.
const OTHER_TREES: &[(&str, &str)] = &[
    ("sim-apiserver", "tests/sim-apiserver/src"),
    ("xtask", "xtask/src"),
];

/// The trees to check: each crate under `crates/` (named after its folder), then [`OTHER_TREES`].
fn trees() -> Result<Vec<(String, PathBuf)>, String> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir("crates")
        .map_err(|e| format!("crates: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    let mut out: Vec<(String, PathBuf)> = crates
        .iter()
        .map(|dir| {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            (name.to_string(), dir.join("src"))
        })
        .collect();
    out.extend(
        OTHER_TREES
            .iter()
            .map(|(name, src)| (name.to_string(), PathBuf::from(src))),
    );
    Ok(out)
}

/// One tree's problems: its import circles, its modules outside every layer of its walls, its
/// imports up through them, and its functions over their length where it has a limit.
fn check_tree(
    krate: &str,
    files: &BTreeMap<ModPath, String>,
    sources: &[(PathBuf, String)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let edges = graph(files);
    for circle in circles(&edges) {
        problems.push(format!("{krate}: import circle {circle}"));
    }
    if let Some(walls) = WALLS.iter().find(|w| w.krate == krate) {
        for module in files.keys().filter(|m| !m.is_empty()) {
            if layer_of(walls, module).is_none() {
                problems.push(format!(
                    "{krate}: module `{}` is in no layer of its walls (xtask/src/modules.rs)",
                    display(module)
                ));
            }
        }
        problems.extend(wall_breaches(walls, &edges));
    }
    if let Some((_, max)) = SHORT_FUNCTIONS.iter().find(|(k, _)| *k == krate) {
        problems.extend(function_lengths(krate, *max, sources));
    }
    problems
}

/// Every function of `sources` over `max` lines.
fn function_lengths(krate: &str, max: usize, sources: &[(PathBuf, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, source) in sources {
        for f in long_functions(source.as_str(), max) {
            problems.push(format!(
                "{krate}: {}:{}: `fn {}` is {} lines, over {max}",
                path.display(),
                f.line,
                f.name,
                f.lines
            ));
        }
    }
    problems
}

/// Runs the check on every crate under `crates/` of the workspace at the current directory, the
/// simulator and xtask.
pub fn run() -> Result<(), String> {
    let mut problems = Vec::new();
    let trees = trees()?;
    let mut counted = 0;
    for (krate, src) in &trees {
        let files = read_crate(src)?;
        counted += files.len();
        let sources = read_sources(src)?;
        problems.extend(check_tree(krate, &files, &sources));
    }
    if problems.is_empty() {
        println!(
            "modules: {counted} modules in {} crates, no import circle, every wall kept, \
             no function too long",
            trees.len()
        );
        Ok(())
    } else {
        for p in &problems {
            println!("  {p}");
        }
        Err(format!("{} module problem(s)", problems.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str) -> ModPath {
        match path {
            "" => Vec::new(),
            p => p.split("::").map(str::to_string).collect(),
        }
    }

    fn files(list: &[(&str, &str)]) -> BTreeMap<ModPath, String> {
        list.iter().map(|(p, t)| (m(p), t.to_string())).collect()
    }

    #[test]
    fn paths_are_read_from_use_trees_and_code() {
        let code = "use crate::{list::ObjectList, object::{Decode, DecodeSource}};\n\
                    fn f() { crate::error::E::new(); super::sib::g(); }";
        let paths = referenced_paths(code, &m("client::api"));
        assert_eq!(
            paths,
            [
                m("list::ObjectList"),
                m("object::Decode"),
                m("object::DecodeSource"),
                m("error::E::new"),
                m("client::sib::g"),
            ]
        );
    }

    #[test]
    fn comments_strings_and_test_code_are_not_imports() {
        let code = code_only(
            "// crate::a::x\nlet s = \"crate::b::y\"; let r = r#\"crate::c\"#; let c = '{';\n\
             #[cfg(test)]\nmod tests { use crate::d::z; fn f() { let _ = '}'; } }\nuse crate::e::w;",
        );
        let code = without_tests(&code);
        assert_eq!(referenced_paths(&code, &m("")), [m("e::w")]);
        assert_eq!(code.lines().count(), 5, "line numbers kept");
    }

    #[test]
    fn a_circle_is_found_and_spelled_out() {
        let crate_files = files(&[
            ("", "mod a; mod b; mod c; pub use a::A;"),
            ("a", "use crate::b::B;"),
            ("b", "use crate::c::C;"),
            ("c", "fn f() -> crate::a::A { todo!() }"),
            ("d", "use crate::a::A;"),
        ]);
        assert_eq!(circles(&graph(&crate_files)), ["a → b → c → a"]);
    }

    #[test]
    fn parents_and_children_are_structure_not_circles() {
        let crate_files = files(&[
            ("", "pub mod client; use crate::client::Client;"),
            (
                "client",
                "mod api; pub use api::Api; use crate::client::api::X;",
            ),
            (
                "client::api",
                "use super::Client; use crate::client::Thing;",
            ),
        ]);
        assert!(circles(&graph(&crate_files)).is_empty());
    }

    #[test]
    fn an_import_through_a_root_reexport_counts_as_one_of_the_defining_module() {
        const WALLS_UNDER_TEST: Walls = Walls {
            krate: "k",
            layers: &[("wire", &["wire"]), ("client", &["client"])],
        };
        let crate_files = files(&[
            (
                "",
                "mod client; mod wire; pub use client::http::{Client, Other};",
            ),
            ("client", "pub mod http;"),
            ("client::http", "pub struct Client;"),
            ("wire", "fn f(_: crate::Client) {}"),
        ]);
        assert_eq!(
            wall_breaches(&WALLS_UNDER_TEST, &graph(&crate_files)),
            ["k: `wire` (wire) imports `client::http` (client), a layer above it"]
        );
    }

    #[test]
    fn an_import_through_a_wall_is_refused() {
        const WALLS_UNDER_TEST: Walls = Walls {
            krate: "k",
            layers: &[("wire", &["wire"]), ("client", &["client"])],
        };
        let crate_files = files(&[
            ("wire", "use crate::client::Client;"),
            ("client", "use crate::wire::Frame;"),
        ]);
        assert_eq!(
            wall_breaches(&WALLS_UNDER_TEST, &graph(&crate_files)),
            ["k: `wire` (wire) imports `client` (client), a layer above it"]
        );
    }

    #[test]
    fn the_simulators_walls_refuse_the_store_importing_a_handler() {
        let crate_files = files(&[
            (
                "storage",
                "use crate::watch_event::EventType; use crate::writes::W;",
            ),
            ("watch_event", "pub enum EventType {}"),
            (
                "writes",
                "use crate::storage::Storage; use crate::shared::Shared;",
            ),
            ("shared", "use crate::storage::Storage;"),
        ]);
        assert_eq!(
            wall_breaches(&SIMULATOR_WALLS, &graph(&crate_files)),
            ["sim-apiserver: `storage` (store) imports `writes` (handlers), a layer above it"]
        );
    }

    #[test]
    fn a_submodule_named_in_a_higher_layer_is_judged_by_it() {
        // `crd` is the model, `crd::serving` the store: the store may use the model, not the
        // reverse, however the two share a folder.
        let crate_files = files(&[
            ("crd", "pub(crate) mod serving;"),
            ("crd::serving", "use crate::storage::Storage;"),
            ("storage", "use crate::crd::admit;"),
            ("validation", "use crate::crd::serving::CrdState;"),
        ]);
        assert_eq!(
            wall_breaches(&SIMULATOR_WALLS, &graph(&crate_files)),
            ["sim-apiserver: `validation` (model) imports `crd::serving` (store), a layer above it"]
        );
    }

    fn lines(n: usize) -> String {
        "    step();\n".repeat(n)
    }

    #[test]
    fn a_function_is_measured_from_its_fn_to_its_closing_brace() {
        let source = format!(
            "/// doc\n#[inline]\nfn short() {{\n{}}}\n\nfn long(\n    a: u8,\n) -> Option<Box<dyn Fn() -> u8>> {{\n{}}}\n",
            lines(3),
            lines(5)
        );
        assert_eq!(
            long_functions(&source, 5),
            [LongFunction {
                name: "long".to_string(),
                line: 9,
                lines: 9,
            }]
        );
        assert!(
            long_functions(&source, 9).is_empty(),
            "the limit itself is allowed"
        );
    }

    #[test]
    fn declarations_strings_comments_and_pointers_are_not_functions() {
        let source = format!(
            "trait T {{\n    fn declared(&self);\n}}\n\
             // fn commented() {{\n\
             const S: &str = \"fn quoted() {{\";\n\
             type P = fn(u8) -> u8;\n\
             fn outer() {{\n    fn inner() {{\n{}    }}\n}}\n",
            lines(4)
        );
        let found: Vec<(String, usize)> = long_functions(&source, 4)
            .into_iter()
            .map(|f| (f.name, f.lines))
            .collect();
        assert_eq!(found, [("outer".to_string(), 8), ("inner".to_string(), 6)]);
    }

    #[test]
    fn the_simulators_long_functions_are_reported_by_file_and_line() {
        let source = format!("fn handler() {{\n{}}}\n", lines(80));
        let problems = check_tree(
            "sim-apiserver",
            &files(&[("", "")]),
            &[(PathBuf::from("src/server.rs"), source.clone())],
        );
        assert_eq!(
            problems.first().map(String::as_str),
            Some("sim-apiserver: src/server.rs:1: `fn handler` is 82 lines, over 80")
        );
        let elsewhere = check_tree(
            "reflector",
            &files(&[("", "")]),
            &[(PathBuf::from("src/lib.rs"), source)],
        );
        assert!(
            elsewhere.is_empty(),
            "only the crates SHORT_FUNCTIONS names are held short"
        );
    }

    #[test]
    fn the_simulator_and_xtask_are_checked_beside_the_crates() {
        std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::env::set_current_dir("..").unwrap();
        let names: Vec<String> = trees().unwrap().into_iter().map(|(n, _)| n).collect();
        for name in ["reflector", "controller", "sim-apiserver", "xtask"] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
    }

    #[test]
    fn every_long_function_is_refused_and_a_short_one_passes() {
        let long = format!("fn step() {{\n{}}}\n", lines(10));
        let short = "fn step() {}\n".to_string();
        let sources = |text: &str| vec![(PathBuf::from("t/src/smp/mod.rs"), text.to_string())];
        assert!(function_lengths("k", 5, &sources(&short)).is_empty());
        assert_eq!(
            function_lengths("k", 5, &sources(&long)),
            ["k: t/src/smp/mod.rs:1: `fn step` is 12 lines, over 5"]
        );
    }
}
