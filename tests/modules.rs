//! The shape of the code: no two modules that import each other, directly or through others.
//! (Modules are split where a concern splits, never to meet a line count: the resolver holds the
//! whole rule in one file so that it can be read top to bottom.)
//!
//! A module is a file under `src/`; a private submodule (`mod x;`, a file split off for size)
//! counts as part of its parent. Imports are the `crate::` and `super::` paths outside the
//! tests, resolved to the longest module they name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

struct File {
    /// `restart::machine`, say; the crate root is "".
    module: String,
    /// The text before its unit tests.
    code: String,
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn load() -> Vec<File> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            File {
                module: parts.join("::"),
                code,
            }
        })
        .collect()
}

/// Private submodules, declared `mod x;`: they belong to their parent.
fn private_children(files: &[File]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        for line in f.code.lines() {
            if let Some(name) = line
                .trim()
                .strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'))
            {
                out.insert(join(&f.module, name));
            }
        }
    }
    out
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}::{child}")
    }
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

/// The module a file's code counts for.
fn node(module: &str, private: &BTreeSet<String>) -> String {
    let mut m = module.to_string();
    while private.contains(&m) {
        m = parent(&m);
    }
    m
}

/// Each `crate::a::b` or `super::a` path in `code`, as a module path (the longest known).
fn imports(file: &File, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (prefix, base) in [
        ("crate::", String::new()),
        ("super::", parent(&file.module)),
    ] {
        for (i, _) in file.code.match_indices(prefix) {
            let before = file.code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &file.code[i + prefix.len()..];
            let mut path = base.clone();
            let mut best = base.clone();
            for seg in rest.split("::") {
                let ident: String = seg
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if ident.is_empty() {
                    break;
                }
                path = join(&path, &ident);
                if known.contains(&path) {
                    best = path.clone();
                }
                if ident.len() != seg.len() {
                    break;
                }
            }
            out.insert(best);
        }
    }
    out
}

#[test]
fn no_two_modules_import_each_other() {
    let files = load();
    let private = private_children(&files);
    let known: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    // The crate root wires everything; `testing` exists for unit tests only.
    let skip = |m: &str| m.is_empty() || m == "testing";
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let from = node(&f.module, &private);
        if skip(&from) {
            continue;
        }
        let edges = graph.entry(from.clone()).or_default();
        // A public submodule is its parent's to declare and use.
        let declared = f.code.lines().filter_map(|l| {
            let name = l.trim().strip_prefix("pub mod ")?.strip_suffix(';')?;
            Some(join(&f.module, name))
        });
        for to in imports(f, &known).into_iter().chain(declared) {
            let to = node(&to, &private);
            if !skip(&to) && to != from {
                edges.insert(to);
            }
        }
    }
    assert!(
        graph.contains_key("restart::machine") && graph["restart"].contains("restart::machine")
    );
    // Depth-first search for a path back to where it started.
    fn cycle(
        graph: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|m| m == at) {
            let mut c = stack[i..].to_vec();
            c.push(at.to_string());
            return Some(c);
        }
        if !done.insert(at.to_string()) {
            return None;
        }
        stack.push(at.to_string());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(c) = cycle(graph, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = Vec::new();
        if let Some(c) = cycle(&graph, start, &mut stack, &mut done) {
            panic!("an import circle: {}", c.join(" -> "));
        }
    }
}
