//! The shape rules of docs/architecture.md, checked: every `crate::` and `super::` path in `src/`
//! (test code aside) must name a module its own module may import, no module's files import each
//! other in a cycle, no parent and child use each other (a child never names its parent's own
//! items: `mod.rs` declares and dispatches), a file's test module is its last item, no file is
//! over 900 lines outside API types and validation rules, no function over 150, and
//! `config`, `store` and `model` name no transport crate, and only the sources (and the wiring) hold
//! the store's writer. Run alone: `cargo test --test library architecture::`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules it may import (besides its own submodules). Keep in step with the table
/// in docs/architecture.md. The longest matching module prefix decides.
const RULES: &[(&str, &[&str])] = &[
    ("config", &[]),
    // Envoy's messages as JSON and protobuf merge: a leaf, no server in it.
    ("envoy", &[]),
    // Envoy patch values (EnvoyFilter) are checked against Envoy's descriptors.
    ("validation", &["config", "envoy::proto_merge"]),
    ("store", &["config"]),
    ("model", &["config", "store"]),
    ("metrics", &[]),
    ("logging", &[]),
    ("activity", &[]),
    ("grpc", &["model::identity"]),
    ("k8s", &["metrics"]),
    (
        "source",
        &["config", "validation", "store", "metrics", "k8s"],
    ),
    // `xds` itself only declares its layers.
    ("xds", &[]),
    ("xds::types", &[]),
    ("xds::resource", &[]),
    ("xds::intern", &[]),
    ("xds::wire", &[]),
    ("xds::proxy", &["model::identity"]),
    ("xds::metrics", &["metrics"]),
    (
        "xds::context",
        &[
            "config",
            "store",
            "model",
            "xds::types",
            "xds::resource",
            "xds::proxy",
        ],
    ),
    (
        "xds::generate",
        &[
            "config",
            "store",
            "model",
            "xds::context",
            "xds::types",
            "xds::resource",
            "xds::proxy",
            "envoy::proto_merge",
        ],
    ),
    (
        "xds::provenance",
        &[
            "config",
            "model",
            "xds::context",
            "xds::generate",
            "xds::types",
        ],
    ),
    (
        "xds::push",
        &[
            "config",
            "store",
            "model",
            "metrics",
            "xds::context",
            "xds::types",
            "xds::metrics",
        ],
    ),
    (
        "xds::server",
        &[
            "activity",
            "grpc",
            "metrics",
            "model::identity",
            "xds::context",
            "xds::generate",
            "xds::provenance",
            "xds::proxy",
            "xds::push",
            "xds::resource",
            "xds::types",
            "xds::metrics",
            "xds::wire",
            "envoy::json",
            "xds::intern",
        ],
    ),
    ("ca", &["config", "grpc", "store", "model", "metrics"]),
    ("analysis", &["config", "store", "model", "metrics", "k8s"]),
    ("gateway_deploy", &["config", "store", "model"]),
    // Registers a VM's WorkloadEntry as its proxy connects: it observes the xDS server through
    // the server's `observer` interface and reads the proxy it is told of.
    (
        "autoregistration",
        &[
            "config",
            "store",
            "model",
            "metrics",
            "xds::proxy",
            "xds::server",
        ],
    ),
    (
        "status",
        &["config", "store", "model", "metrics", "k8s", "analysis"],
    ),
    (
        "webhook",
        &[
            "activity",
            "config",
            "validation",
            "store",
            "model",
            "metrics",
            "k8s",
        ],
    ),
    (
        "admin",
        &[
            "config",
            "store",
            "model",
            "metrics",
            "logging",
            "source",
            "envoy::json",
            "xds::types",
            "xds::server::debug",
            "xds::server::status",
        ],
    ),
    // Compares what two control planes send a proxy (`rudder shadow`, `what-if`): reads a
    // control plane over xDS as istioctl does, and builds Rudder's side with the generators.
    (
        "compare",
        &[
            "config",
            "store",
            "model",
            "xds::context",
            "xds::generate",
            "envoy::json",
            "xds::provenance",
            "xds::proxy",
            "xds::push",
            "xds::types",
        ],
    ),
    // The wiring, the fuzzing harness and the test fixtures reach everything by design.
    ("cmd", &["*"]),
    ("robustness", &["*"]),
    ("testing", &["*"]),
];

fn rule_for(module: &str) -> Option<(&'static str, &'static [&'static str])> {
    RULES
        .iter()
        .filter(|(m, _)| within(module, m))
        .max_by_key(|(m, _)| m.len())
        .copied()
}

/// `module` is `prefix` or one of its submodules.
fn within(module: &str, prefix: &str) -> bool {
    module == prefix
        || module
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The module a source file is, as a path (`src/xds/server/ads.rs` → `xds::server::ads`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts.join("::"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of `file` that is not test code: test files (and folders) are skipped, and a file's own
/// `#[cfg(test)]` module is cut off (it sits at the end, by convention here).
fn non_test_code(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_string_lossy();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let in_tests_folder = file
        .strip_prefix(&src)
        .ok()
        .and_then(Path::parent)
        .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"));
    if name == "tests.rs" || name.ends_with("_tests.rs") || in_tests_folder {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    Some(
        without_test_items(&text)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// `text` without its top-level `#[cfg(test)]` items (`mod tests;`, or a block up to its closing
/// brace at the start of a line): what follows a test module is read like the rest.
fn without_test_items(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line != "#[cfg(test)]" {
            out.push(line);
            continue;
        }
        for item in lines.by_ref() {
            if item.starts_with("#[") || item.trim().is_empty() {
                continue;
            }
            if !item.trim_end().ends_with(';') {
                for inner in lines.by_ref() {
                    if inner.starts_with('}') {
                        break;
                    }
                }
            }
            break;
        }
    }
    out.join("\n")
}

/// Whether a file puts code after its test module: the test module is a file's last item, where a
/// reader stops.
fn code_after_tests(text: &str) -> bool {
    match text.find("\n#[cfg(test)]") {
        Some(i) => without_test_items(&text[i..])
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")),
        None => false,
    }
}

/// The paths a `use` tree or an inline path starting at `text` names: `a::b`, `a::{b, c::d}`, …
fn paths_at(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut head = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_alphanumeric() || c == '_' || c == ':' {
            head.push(c);
            i += 1;
        } else {
            break;
        }
    }
    if text[i..].starts_with('{') && (head.is_empty() || head.ends_with("::")) {
        // A group: split its top level by commas and recurse.
        let mut depth = 0;
        let mut start = i + 1;
        let mut out = Vec::new();
        for (j, ch) in text[i..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    let item = text[start..i + j].trim();
                    if !item.is_empty() && item != "self" {
                        for p in paths_at(item) {
                            out.push(format!("{head}{p}"));
                        }
                    } else if item == "self" {
                        out.push(head.trim_end_matches("::").to_string());
                    }
                    start = i + j + 1;
                    if ch == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    vec![head.trim_end_matches("::").to_string()]
}

/// Every internal module path `code` names, resolved to a path from the crate root.
fn imports(module: &str, code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        for p in paths_at(&code[at + "crate::".len()..]) {
            out.insert(p);
        }
    }
    let parts: Vec<&str> = module.split("::").collect();
    for (at, _) in code.match_indices("super::") {
        let before = &code[..at];
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
            || before.ends_with("super::")
        {
            continue;
        }
        let tail = &code[at..];
        let mut ups = 0;
        let mut t = tail;
        while let Some(r) = t.strip_prefix("super::") {
            ups += 1;
            t = r;
        }
        // In `a/b/mod.rs` (module a::b) and in `a/b.rs` alike, `super` is `a`.
        if ups > parts.len() {
            continue;
        }
        let base = parts[..parts.len() - ups].join("::");
        for p in paths_at(t) {
            if p == "*" || p.is_empty() {
                continue;
            }
            out.insert(if base.is_empty() {
                p
            } else {
                format!("{base}::{p}")
            });
        }
    }
    out
}

struct Source {
    module: String,
    code: String,
    imports: BTreeSet<String>,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .filter_map(|f| {
            let module = module_of(&src, f)?;
            // The crate root and the binaries are not modules of the library.
            if module == "lib" || module == "main" || module.starts_with("bin") {
                return None;
            }
            let code = non_test_code(f)?;
            Some(Source {
                imports: imports(&module, &code),
                code,
                module,
            })
        })
        .collect()
}

#[test]
fn every_module_imports_only_what_its_layer_may() {
    let mut violations = Vec::new();
    for s in sources() {
        let Some((own, allowed)) = rule_for(&s.module) else {
            violations.push(format!("{}: no rule in RULES", s.module));
            continue;
        };
        for target in &s.imports {
            let ok = allowed.contains(&"*")
                || within(target, own)
                || allowed.iter().any(|a| within(target, a));
            if !ok {
                violations.push(format!("{} imports {target}", s.module));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports the layering forbids (docs/architecture.md):\n{}",
        violations.join("\n")
    );
}

/// Every module's children, as a graph: an edge `a -> b` when anything in child `a` (or below it)
/// names child `b` (or below it). Keyed by the parent module (`""` for the crate root).
fn sibling_graphs(sources: &[Source]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in sources {
        let from: Vec<&str> = s.module.split("::").collect();
        for target in &s.imports {
            let to: Vec<&str> = target.split("::").collect();
            // The deepest parent both share, and the children of it each lies in.
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if shared >= from.len() || shared >= to.len() {
                continue; // an import of an ancestor's item, or of one's own submodule
            }
            graphs
                .entry(from[..shared].join("::"))
                .or_default()
                .entry(from[shared].to_string())
                .or_default()
                .insert(to[shared].to_string());
        }
    }
    graphs
}

/// A cycle in `graph`, if there is one (depth-first search for a back edge).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_has_files_that_import_each_other_in_a_cycle() {
    let graphs = sibling_graphs(&sources());
    assert!(
        graphs.contains_key("xds::generate"),
        "the generators were not found"
    );
    let cycles: Vec<String> = graphs
        .iter()
        .filter_map(|(parent, graph)| {
            let cycle = find_cycle(graph)?;
            Some(format!("in {parent:?}: {}", cycle.join(" -> ")))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "files import each other in a cycle:\n{}",
        cycles.join("\n")
    );
}

/// Long files are where a reader gets lost; API types and validation rules are long lists by nature.
const MAX_LINES: usize = 900;
const LONG_BY_NATURE: &[&str] = &["src/config/", "src/validation/"];

#[test]
fn no_file_is_longer_than_a_reader_can_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut long = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(root)
            .unwrap_or(&f)
            .to_string_lossy()
            .to_string();
        if LONG_BY_NATURE.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let lines = std::fs::read_to_string(&f).map_or(0, |t| t.lines().count());
        if lines > MAX_LINES {
            long.push(format!("{rel}: {lines} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by job):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_domain_does_not_know_the_transports() {
    let mut found = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for f in files {
        let Some(module) = module_of(&src, &f) else {
            continue;
        };
        if !["config", "store", "model"]
            .iter()
            .any(|m| within(&module, m))
        {
            continue;
        }
        let Some(code) = non_test_code(&f) else {
            continue;
        };
        for transport in ["tonic", "kube"] {
            let named = code
                .match_indices(&format!("{transport}::"))
                .any(|(at, _)| {
                    !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                });
            if named {
                found.push(format!("{module} names {transport}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "config, store and model take plain values, not transport types:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_sources_hold_the_store_writer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let Some(module) = module_of(&src, &f) else {
            continue;
        };
        let writers = ["store", "source", "cmd", "robustness", "testing"];
        if writers.iter().any(|m| within(&module, m)) {
            continue;
        }
        if non_test_code(&f).is_some_and(|code| code.contains("StoreWriter")) {
            found.push(module);
        }
    }
    assert!(
        found.is_empty(),
        "only the sources write the store (cmd hands them the writer): {found:?}"
    );
}

/// The load generator drives the daemon from outside, as proxies do: it may share the wire
/// vocabulary (framing, types, interning) but not the server's internals.
#[test]
fn the_load_generator_uses_no_server_internals() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin/rudder-loadgen");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(!files.is_empty());
    let found: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f).is_ok_and(|code| {
                [
                    "rudder::xds::server",
                    "rudder::xds::push",
                    "rudder::xds::context",
                ]
                .iter()
                .any(|internal| code.contains(internal))
            })
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "the load generator reaches into the server: {found:?}"
    );
}

#[test]
fn the_checker_reads_groups_and_relative_paths() {
    let code = "use crate::{config::{Kind, Spec}, store::Store};\nuse super::super::wire::X;\nlet a = crate::model::mesh::f();";
    let got = imports("xds::server::ads", code);
    let want: BTreeSet<String> = [
        "config::Kind",
        "config::Spec",
        "store::Store",
        "xds::wire::X",
        "model::mesh::f",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(got, want);
    assert_eq!(
        rule_for("xds::generate::ztunnel::dump").map(|r| r.0),
        Some("xds::generate")
    );
    assert!(!within("xds::generated", "xds::generate"));
}

/// The modules a file declares inline (`mod pb { … }`): children, like those in files of their own.
fn inline_modules(module: &str, code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let rest = l.trim_start();
            let rest = rest
                .strip_prefix("pub ")
                .or_else(|| rest.strip_prefix("pub(crate) "))
                .or_else(|| rest.strip_prefix("pub(super) "))
                .unwrap_or(rest);
            let name = rest.strip_prefix("mod ")?.strip_suffix(" {")?;
            Some(format!("{module}::{name}"))
        })
        .collect()
}

/// Whether `code` (a parent's) names its child `name`: `name::…` or `self::name::…`, not as the
/// tail of another path.
fn names_child(code: &str, name: &str) -> bool {
    code.match_indices(&format!("{name}::")).any(|(at, _)| {
        let before = &code[..at];
        before.ends_with("self::")
            || !before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// A parent and its child that use each other: the parent names the child (`mod.rs` declares and
/// dispatches), and the child names an item of the parent's own (not one of its other
/// children). Each such pair, with what the child names.
fn parent_child_loops(sources: &[Source]) -> BTreeSet<String> {
    let mut modules: BTreeSet<String> = sources.iter().map(|s| s.module.clone()).collect();
    for s in sources {
        modules.extend(inline_modules(&s.module, &s.code));
    }
    let by_module: BTreeMap<&str, &Source> =
        sources.iter().map(|s| (s.module.as_str(), s)).collect();
    let mut loops = BTreeSet::new();
    for s in sources {
        let from: Vec<&str> = s.module.split("::").collect();
        for target in &s.imports {
            let to: Vec<&str> = target.split("::").collect();
            // `target` is an item of a proper ancestor of `s`, one step below it.
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if shared + 1 != to.len() || shared >= from.len() || modules.contains(target) {
                continue;
            }
            let parent = to[..shared].join("::");
            let Some(p) = by_module.get(parent.as_str()) else {
                continue;
            };
            let child = format!("{parent}::{}", from[shared]);
            if p.imports.iter().any(|i| within(i, &child)) || names_child(&p.code, from[shared]) {
                loops.insert(format!("{parent} <-> {child}: {} names {target}", s.module));
            }
        }
    }
    loops
}

#[test]
fn no_parent_and_child_use_each_other() {
    let loops = parent_child_loops(&sources());
    assert!(
        loops.is_empty(),
        "a child names its parent's own items while the parent names the child; move what \
         children share into a file of its own (mod.rs declares and dispatches):\n{}",
        loops.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_test_module_is_a_files_last_item() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let late: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| code_after_tests(&t)))
        .map(|f| f.display().to_string())
        .collect();
    assert!(late.is_empty(), "code after the test module: {late:?}");
}

#[test]
fn the_checker_sees_loops_and_code_after_tests() {
    let source = |module: &str, code: &str| Source {
        module: module.to_string(),
        imports: imports(module, code),
        code: code.to_string(),
    };
    let parent = source(
        "a",
        "mod b;\nmod c;\npub struct Shared;\npub fn run() { b::go() }",
    );
    let child = source("a::b", "use super::Shared;\npub fn go() {}");
    let sibling = source("a::c", "use super::b::go;");
    let found = parent_child_loops(&[parent, child, sibling]);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["a <-> a::b: a::b names a::Shared"]
    );
    let inline = source("z", "pub mod pb {\n}\nmod y;\nfn f() { y::g() }");
    let uses_inline = source("z::y", "use super::pb::T;\npub fn g() {}");
    assert!(parent_child_loops(&[inline, uses_inline]).is_empty());

    let text = "fn a() {}\n\n#[cfg(test)]\nmod tests;\n\nfn late() {}\n";
    assert!(code_after_tests(text));
    assert!(without_test_items(text).contains("fn late"));
    let last =
        "fn a() {}\n\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n\n#[cfg(test)]\nmod more;\n";
    assert!(!code_after_tests(last));
    assert!(!without_test_items(last).contains("fn t"));
}

/// Long functions are where a reader loses the thread: none in src (tests included) is over this.
const MAX_FUNCTION_LINES: usize = 150;

/// Every function of `text` over `max` lines, as `name: lines`: a `fn` line, to the line that
/// closes it at its indentation (rustfmt's layout).
fn long_functions(text: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let mut rest = trimmed;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(name) = rest.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = name
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            let count = end + 2;
            if count > max {
                long.push(format!("{name}: {count} lines"));
            }
        }
    }
    long
}

#[test]
fn no_function_is_longer_than_a_reader_can_hold() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            long_functions(&text, MAX_FUNCTION_LINES)
                .into_iter()
                .map(move |l| format!("{}: {l}", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them into steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checker_counts_a_functions_lines() {
    let text = "fn short() {\n    a();\n}\n\nimpl X {\n    pub async fn long(&self) {\n        a();\n        b();\n    }\n    fn declared();\n}\n";
    assert_eq!(long_functions(text, 3), ["long: 4 lines"]);
    assert!(long_functions(text, 4).is_empty());
}
