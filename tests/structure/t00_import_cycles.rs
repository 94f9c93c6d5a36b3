//! No import cycle between the files of any crate of the workspace, and no layer importing one above it.
//!
//! A cycle hides the layers: with one, no file of it can be read, tested or moved without the
//! others. The checker is `import_cycles.rs` beside this file (pure text analysis); a failure names
//! every cycle and one path around it, so the import to cut is visible.

#[path = "import_cycles.rs"]
mod import_cycles;

use std::path::Path;
use std::path::PathBuf;

/// The source folder of every crate in the workspace, the root package's included.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("raftmq".to_string(), root.join("src"))];
    for name in ["common", "raft", "broker", "namesrv", "client", "console", "grpc", "jepsen", "tests/compat"] {
        out.push((name.to_string(), root.join(name).join("src")));
    }
    out
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let mut report = String::new();
    let mut files = 0;
    let root = format!("{}/", env!("CARGO_MANIFEST_DIR"));
    for (name, src) in crate_sources() {
        assert!(src.is_dir(), "{} is missing", src.display());
        let graph = import_cycles::crate_graph(&src);
        files += graph.modules.len();
        for component in import_cycles::cycles(&graph) {
            let example = import_cycles::example_cycle(&graph, &component);
            let relative = |files: &[String]| -> Vec<String> {
                files.iter().map(|f| f.trim_start_matches(&root).to_string()).collect()
            };
            let (component, example) = (relative(&component), relative(&example));
            report.push_str(&format!(
                "\n{name}: a cycle of {} files: {}\n  for example {}\n",
                component.len(),
                component.join(", "),
                example.join(" -> ")
            ));
        }
    }
    assert!(files > 200, "only {files} source files found: the crate list is stale");
    assert!(report.is_empty(), "import cycles between files:{report}");
}

/// Writes a small crate into a temporary folder and returns its cycles.
fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let graph = import_cycles::crate_graph(dir.path());
    let prefix = format!("{}/", dir.path().display());
    import_cycles::cycles(&graph)
        .into_iter()
        .map(|c| c.into_iter().map(|f| f.trim_start_matches(&prefix).to_string()).collect())
        .collect()
}

#[test]
fn a_deliberate_cycle_is_found() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod state;\nmod service;\n"),
        ("state/mod.rs", "pub mod store;\n"),
        ("state/store.rs", "use crate::service::schedule::level_backlogs;\npub struct Store;\n"),
        ("service/mod.rs", "pub mod schedule;\n"),
        ("service/schedule.rs", "use crate::state::store::Store;\npub fn level_backlogs() {}\n"),
    ]);
    assert_eq!(cycles, vec![vec!["service/schedule.rs".to_string(), "state/store.rs".to_string()]]);
}

#[test]
fn grouped_super_and_inline_paths_count_and_tests_comments_and_strings_do_not() {
    // a -> b through a grouped use, b -> c through super::, c -> a inline in code: one cycle.
    let cycles = cycles_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::{b::{self, B}, c as _};\n"),
        ("b.rs", "pub struct B;\nfn f() { super::c::g() }\n"),
        ("c.rs", "pub fn g() { let _ = crate::a::A; }\n"),
    ]);
    assert_eq!(cycles, vec![vec!["a.rs".to_string(), "b.rs".to_string(), "c.rs".to_string()]]);
    // The reverse edges only in a test module, a comment and a string: no cycle.
    let cycles = cycles_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n// crate::a::A\nconst S: &str = \"crate::a::A\";\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        ),
    ]);
    assert!(cycles.is_empty(), "{cycles:?}");
}

#[test]
fn a_child_importing_through_its_parents_reexport_is_a_cycle() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod acl;\n"),
        ("acl/mod.rs", "mod check;\nmod document;\npub use check::allowed;\npub use document::Document;\n"),
        ("acl/document.rs", "pub struct Document;\n"),
        ("acl/check.rs", "use super::Document;\npub fn allowed() {}\n"),
    ]);
    assert_eq!(cycles, vec![vec!["acl/check.rs".to_string(), "acl/mod.rs".to_string()]]);
}

/// The layer rules of ARCHITECTURE.md that a cycle check alone would not catch: a lower layer may
/// not import a higher one even where nothing imports it back yet.
#[test]
fn no_layer_imports_a_layer_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // (crate source, lower layer, the layers and top-level files it must not import)
    let rules: [(&str, &str, &[&str]); 4] = [
        ("broker/src", "state", &["processors", "services", "http", "observability", "context", "broker"]),
        ("broker/src", "services", &["processors", "http"]),
        ("common/src", "protocol", &["remoting"]),
        ("common/src", "message", &["remoting"]),
    ];
    let mut broken = Vec::new();
    for (src, lower, above) in rules {
        let graph = import_cycles::crate_graph(&root.join(src));
        assert!(graph.modules.keys().any(|m| m.first().is_some_and(|f| f == lower)), "{src}/{lower} is missing");
        for (module, targets) in &graph.edges {
            if module.first().map(String::as_str) != Some(lower) {
                continue;
            }
            for target in targets {
                if target.first().is_some_and(|f| above.contains(&f.as_str())) {
                    broken.push(format!("{src}/{} imports {src}/{}", module.join("/"), target.join("/")));
                }
            }
        }
    }
    assert!(broken.is_empty(), "imports from a lower layer into a higher one:\n{}", broken.join("\n"));
}
