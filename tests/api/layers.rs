//! The crate's layers, checked from its own source: each top-level module of `src/` belongs to
//! one layer, and may import (`crate::…`, `super::…` across modules) only from its own layer or
//! those below; top-level modules import each other without cycles; only the HTTP adapters and
//! the assembly name axum types. ARCHITECTURE.md draws the picture; this test keeps it true.
//!
//! Run alone: `cargo test --test api layers:: -- --nocapture` prints the module graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of every top-level module, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    ("protocol", &["protocol", "untrusted", "redact"]),
    ("leaves", &["config", "metrics", "telemetry", "bus", "principal", "yaml"]),
    (
        "core services",
        &[
            "store",
            "audit",
            "auth",
            "authserver",
            "limits",
            "caller",
            "cluster",
            "tasks",
            "session",
            "tool",
            "catalog",
            "server",
            "tooldef",
            "packs",
            "admission",
            "vault",
            "upstream",
            "approval",
            "virtual_servers",
        ],
    ),
    ("HTTP adapters", &["transport", "admin", "health", "authserver_http"]),
    // `cli` is the binary's own (subcommands beside `main.rs`), reaching the library as `toolgate::`.
    ("assembly", &["app", "cli"]),
];

/// The layers allowed to name axum types.
const AXUM_LAYERS: &[&str] = &["HTTP adapters", "assembly"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for `lib.rs` and `main.rs`).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The code of a file without its `#[cfg(test)]` module and without comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Top-level modules a file's code names through `crate::`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            found.insert(name);
        }
        rest = after;
    }
    // `use crate::{a, b::c}` groups
    for group in code.split("crate::{").skip(1) {
        let inner = group.split('}').next().unwrap_or("");
        for part in inner.split(',') {
            let name: String = part.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

struct Graph {
    /// (from module, to module) → the files that make the arrow.
    arrows: BTreeMap<(String, String), Vec<String>>,
    axum: Vec<String>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut arrows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut axum = Vec::new();
    for file in files {
        let Some(module) = top_module(&src, &file) else { continue };
        let text = code(&std::fs::read_to_string(&file).expect("readable file"));
        let shown = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
        for target in imports(&text) {
            if target != module && layer_of(&target).is_some() {
                arrows.entry((module.clone(), target)).or_default().push(shown.clone());
            }
        }
        let layer = layer_of(&module).map(|l| LAYERS[l].0);
        if text.contains("axum::") && !layer.is_some_and(|l| AXUM_LAYERS.contains(&l)) {
            axum.push(shown);
        }
    }
    Graph { arrows, axum }
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let unplaced: BTreeSet<String> = files.iter().filter_map(|f| top_module(&src, f)).filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "give these modules a layer in tests/layers.rs: {unplaced:?}");
}

#[test]
fn no_module_imports_from_a_higher_layer() {
    let g = graph();
    let upward: Vec<String> = g
        .arrows
        .iter()
        .filter(|((from, to), _)| layer_of(to) > layer_of(from))
        .map(|((from, to), files)| format!("{from} -> {to} ({})", files.join(", ")))
        .collect();
    assert!(upward.is_empty(), "imports from a higher layer:\n{}", upward.join("\n"));
}

#[test]
fn top_level_modules_import_each_other_without_cycles() {
    let g = graph();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in g.arrows.keys() {
        edges.entry(from).or_default().insert(to);
    }
    // Depth-first search for a back edge; reports the first cycle found.
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node);
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for start in edges.keys() {
        if let Some(cycle) = visit(start, &edges, &mut Vec::new(), &mut done) {
            panic!("an import cycle between top-level modules: {}", cycle.join(" -> "));
        }
    }
    let nodes: BTreeSet<&str> = edges.keys().copied().collect();
    println!("{} modules, {} arrows: {edges:#?}", nodes.len(), g.arrows.len());
}

#[test]
fn only_http_adapters_and_the_assembly_name_axum_types() {
    let g = graph();
    assert!(g.axum.is_empty(), "axum types outside the HTTP adapters and the assembly: {:?}", g.axum);
}
