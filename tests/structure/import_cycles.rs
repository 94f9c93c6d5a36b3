//! The import graph between the source files of every crate, and the check that it has no cycle.
//!
//! A file is a node; `use crate::a::b`, `super::x`, `self::x`, a child module named without a
//! prefix, and any `crate::`/`super::` path written inline in code is an edge to the file that
//! defines the longest matching module. `#[cfg(test)]` modules are left out (tests may reach
//! anywhere), and so are comments and string literals. An edge to one's own file or to one's own
//! ancestor module through a re-export (`lib.rs`, `mod.rs`) counts like any other: a parent that
//! re-exports a child and a child that imports from its parent form a cycle.
//!
//! Pure text analysis with no dependencies, so it runs in any test binary and in CI as part of
//! `cargo test --workspace`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's source files by module path (`["state", "store"]` for `state/store.rs`).
pub struct CrateGraph {
    /// Module path of each file, and the file.
    pub modules: BTreeMap<Vec<String>, PathBuf>,
    /// Edges between module paths (files).
    pub edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

/// Reads every `.rs` file under `src_dir` and builds the file-level import graph.
pub fn crate_graph(src_dir: &Path) -> CrateGraph {
    let mut modules = BTreeMap::new();
    collect_files(src_dir, src_dir, &mut modules);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let code = strip_tests(&strip_comments_and_strings(&text));
        for path in paths_in(&code) {
            if let Some(target) = resolve(&path, module, &modules)
                && &target != module
            {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    CrateGraph { modules, edges }
}

/// Every cycle (strongly connected component of two or more files), as sorted file lists.
pub fn cycles(graph: &CrateGraph) -> Vec<Vec<String>> {
    let nodes: Vec<&Vec<String>> = graph.modules.keys().collect();
    let index: BTreeMap<&Vec<String>, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph.edges.get(*n).map(|s| s.iter().filter_map(|t| index.get(t).copied()).collect()).unwrap_or_default()
        })
        .collect();
    let mut out = Vec::new();
    for scc in tarjan(&adj) {
        if scc.len() > 1 {
            let mut files: Vec<String> = scc.iter().map(|&i| display(&graph.modules[nodes[i]])).collect();
            files.sort();
            out.push(files);
        }
    }
    out.sort();
    out
}

/// One shortest cycle through the first file of a component, for a readable failure message.
pub fn example_cycle(graph: &CrateGraph, component: &[String]) -> Vec<String> {
    let by_file: BTreeMap<String, &Vec<String>> = graph.modules.iter().map(|(m, f)| (display(f), m)).collect();
    let members: BTreeSet<&Vec<String>> = component.iter().filter_map(|f| by_file.get(f).copied()).collect();
    let Some(start) = members.iter().next().copied() else { return Vec::new() };
    // Breadth-first search from start back to start inside the component.
    let mut prev: BTreeMap<&Vec<String>, &Vec<String>> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in graph.edges.get(node).into_iter().flatten() {
            if !members.contains(next) {
                continue;
            }
            if next == start {
                let mut path = vec![display(&graph.modules[node])];
                let mut cur = node;
                while cur != start {
                    cur = prev[cur];
                    path.push(display(&graph.modules[cur]));
                }
                path.reverse();
                path.push(display(&graph.modules[start]));
                return path;
            }
            if !prev.contains_key(next) {
                prev.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    Vec::new()
}

fn display(file: &Path) -> String {
    file.to_string_lossy().into_owned()
}

fn collect_files(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            // `src/bin/` holds separate crates; a folder of a module holds its children.
            if path.file_name().is_some_and(|n| n == "bin") && dir == root {
                continue;
            }
            collect_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under root");
            let mut module: Vec<String> =
                rel.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            match module.last().map(String::as_str) {
                Some("mod") => {
                    module.pop();
                }
                Some("lib" | "main") if module.len() == 1 => module.clear(),
                _ => {}
            }
            out.entry(module).or_insert(path);
        }
    }
}

/// Replaces comments, string literals and char literals with spaces, keeping line structure.
fn strip_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !prev_is_ident(&b, i) {
            // Raw string: r#*"..."#*
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
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

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// Removes every `#[cfg(test)]` item (a test module or a test-only function) with its body.
fn strip_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its `;` (a `use` or `mod x;`) or at the brace closing its body.
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, ch) in after.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// A path as written: its segments, and whether it came from a `use` (relative child paths count).
struct WrittenPath {
    segments: Vec<String>,
    from_use: bool,
}

fn paths_in(code: &str) -> Vec<WrittenPath> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" && (i == 0 || !matches!(tokens[i - 1].as_str(), "::" | ".")) {
            let mut j = i + 1;
            let mut tree = Vec::new();
            while j < tokens.len() && tokens[j] != ";" {
                tree.push(tokens[j].clone());
                j += 1;
            }
            let mut k = 0;
            expand_use(&tree, &mut k, Vec::new(), &mut out);
            i = j + 1;
            continue;
        }
        if matches!(tokens[i].as_str(), "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut segments = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::") && tokens.get(j + 1).is_some_and(|t| is_ident(t)) {
                segments.push(tokens[j + 1].clone());
                j += 2;
            }
            out.push(WrittenPath { segments, from_use: false });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn expand_use(tree: &[String], k: &mut usize, prefix: Vec<String>, out: &mut Vec<WrittenPath>) {
    let mut path = prefix;
    while *k < tree.len() {
        let t = tree[*k].as_str();
        match t {
            "::" => *k += 1,
            "{" => {
                *k += 1;
                loop {
                    expand_use(tree, k, path.clone(), out);
                    match tree.get(*k).map(String::as_str) {
                        Some(",") => *k += 1,
                        Some("}") => {
                            *k += 1;
                            return;
                        }
                        _ => return,
                    }
                    if tree.get(*k).is_some_and(|t| t == "}") {
                        *k += 1;
                        return;
                    }
                }
            }
            "," | "}" => break,
            "as" => *k += 2,
            "*" => *k += 1,
            _ if is_ident(t) => {
                path.push(t.to_string());
                *k += 1;
            }
            _ => *k += 1,
        }
    }
    if !path.is_empty() {
        out.push(WrittenPath { segments: path, from_use: true });
    }
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// The file a written path lands in: the longest module prefix that is a file of this crate.
fn resolve(path: &WrittenPath, current: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<Vec<String>> {
    let segs = &path.segments;
    let first = segs.first()?.as_str();
    // The module a relative path starts from: a file `a/b.rs` is module a::b, whose children live in
    // `a/b/`; `self` is that module and `super` its parent.
    let mut base: Vec<String> = current.to_vec();
    let rest: &[String] = match first {
        "crate" => {
            base.clear();
            &segs[1..]
        }
        "self" | "super" => {
            let mut k = 0;
            while k < segs.len() && matches!(segs[k].as_str(), "self" | "super") {
                if segs[k] == "super" {
                    base.pop()?;
                }
                k += 1;
            }
            &segs[k..]
        }
        _ if path.from_use => {
            // Uniform paths: `use child::X` names a child module of the current one.
            let mut child = base.clone();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            segs
        }
        _ => return None,
    };
    let mut full = base;
    full.extend(rest.iter().cloned());
    // Longest prefix naming a file.
    for len in (0..=full.len()).rev() {
        if modules.contains_key(&full[..len]) {
            return Some(full[..len].to_vec());
        }
    }
    None
}

/// Tarjan's strongly connected components.
fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.adj[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let n = adj.len();
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
