//! The layering rules of `docs/ARCHITECTURE.md`, checked on the source.
//!
//! Every `src/**/*.rs` file is parsed with `syn`; every `use` tree and every
//! `crate::`/`super::`/`self::` path in code (types, expressions, patterns)
//! becomes an edge from the module that names it to the module that defines
//! it (re-exports are followed to where the item lives). Paths inside macro
//! invocations are not seen: a limit, accepted because the crate's macros
//! (`format!`, `matches!`, `json!`) do not name modules.
//!
//! Checked:
//! - top-level modules only import downwards in [`LAYERS`] (and `cli`/`tui`
//!   never each other);
//! - no cycle between top-level modules;
//! - no cycle between the sub-modules of `engine` and of `tui`.
//!
//! The listing of every cross-module edge (with one example site each) is
//! printed by `scripts/imports` (this test run with `WSBENCH_IMPORTS=1`
//! and `--nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Top-level modules and their layer: a module may import only modules of
/// a lower layer. Same-layer modules never import each other.
const LAYERS: &[(&str, u8)] = &[
    ("tui", 6),
    ("cli", 6),
    ("root", 5),
    ("config", 4),
    ("manager", 3),
    ("agent", 3),
    ("engine", 2),
    ("backend", 1),
];

/// Modules whose direct sub-modules must not form an import cycle.
const ACYCLIC_INSIDE: &[&str] = &["engine", "tui"];

type ModPath = Vec<String>;

#[derive(Debug, Clone)]
struct Site {
    file: PathBuf,
    line: usize,
}

#[derive(Default)]
struct Crate {
    /// Every module of the crate (file modules and inline `mod x { … }`).
    modules: BTreeSet<ModPath>,
    /// `pub use` re-exports: (module, name) → the absolute path they name.
    reexports: BTreeMap<(ModPath, String), ModPath>,
    /// Raw references: (from module, absolute path named, site).
    refs: Vec<(ModPath, ModPath, Site)>,
}

fn file_module(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Collects modules, re-exports and references of one file.
struct FileVisitor<'a> {
    krate: &'a mut Crate,
    file: PathBuf,
    /// Current module (file module plus inline modules entered).
    module: ModPath,
    /// Whether the item being visited is a `pub use` (a re-export).
    in_pub_use: bool,
    /// Collect only modules (first pass) or only references (second pass).
    pass_modules: bool,
}

impl FileVisitor<'_> {
    fn site(&self, span: proc_macro2::Span) -> Site {
        Site {
            file: self.file.clone(),
            line: span.start().line,
        }
    }

    /// Resolves a path's leading segments to an absolute path, or `None`
    /// for paths outside the crate (std, dependencies, local names).
    fn absolute(&self, segs: &[String]) -> Option<ModPath> {
        let first = segs.first()?;
        let mut base: ModPath;
        let mut rest = segs;
        match first.as_str() {
            "crate" => {
                base = Vec::new();
                rest = &segs[1..];
            }
            "self" => {
                base = self.module.clone();
                rest = &segs[1..];
            }
            "super" => {
                base = self.module.clone();
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            name => {
                // 2018+ uniform paths: a child module of this one.
                let mut child = self.module.clone();
                child.push(name.to_string());
                if self.krate.modules.contains(&child) {
                    base = self.module.clone();
                } else {
                    return None;
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segs: Vec<String>, span: proc_macro2::Span) {
        if self.pass_modules {
            return;
        }
        if let Some(abs) = self.absolute(&segs) {
            let site = self.site(span);
            self.krate.refs.push((self.module.clone(), abs, site));
        }
    }

    fn walk_use(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.walk_use(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut full = prefix.clone();
                if name != "self" {
                    full.push(name.clone());
                }
                let alias = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.use_leaf(full, alias, n.ident.span());
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.use_leaf(full, r.rename.to_string(), r.ident.span());
            }
            syn::UseTree::Glob(g) => {
                self.record(prefix.clone(), g.star_token.span);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.walk_use(t, prefix);
                }
            }
        }
    }

    fn use_leaf(&mut self, full: Vec<String>, alias: String, span: proc_macro2::Span) {
        if self.pass_modules {
            if self.in_pub_use
                && let Some(abs) = self.absolute(&full)
            {
                self.krate
                    .reexports
                    .insert((self.module.clone(), alias), abs);
            }
            return;
        }
        self.record(full, span);
    }
}

impl<'ast> Visit<'ast> for FileVisitor<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        if self.pass_modules {
            self.krate.modules.insert(self.module.clone());
        }
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.in_pub_use = !matches!(u.vis, syn::Visibility::Inherited);
        let mut prefix = Vec::new();
        if u.leading_colon.is_none() {
            self.walk_use(&u.tree, &mut prefix);
        }
        self.in_pub_use = false;
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
                let span = p.segments[0].ident.span();
                self.record(segs, span);
            }
        }
        syn::visit::visit_path(self, p);
    }
}

impl Crate {
    fn load(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut krate = Crate::default();
        let parsed: Vec<(PathBuf, ModPath, syn::File)> = files
            .into_iter()
            .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
            .map(|f| {
                let text = std::fs::read_to_string(&f).unwrap();
                let ast = syn::parse_file(&text)
                    .unwrap_or_else(|e| panic!("{} does not parse: {e}", f.display()));
                let m = file_module(src, &f);
                (f, m, ast)
            })
            .collect();
        for (_, m, _) in &parsed {
            krate.modules.insert(m.clone());
        }
        for pass_modules in [true, false] {
            for (f, m, ast) in &parsed {
                let mut v = FileVisitor {
                    krate: &mut krate,
                    file: f.clone(),
                    module: m.clone(),
                    in_pub_use: false,
                    pass_modules,
                };
                v.visit_file(ast);
            }
        }
        krate
    }

    /// The module that defines what `abs` names: re-exports followed, then
    /// the longest prefix that is a module.
    fn defining_module(&self, abs: &ModPath) -> ModPath {
        let mut path = abs.clone();
        for _ in 0..8 {
            let module = self.longest_module_prefix(&path);
            let Some(name) = path.get(module.len()) else {
                return module;
            };
            match self.reexports.get(&(module.clone(), name.clone())) {
                Some(target) if target != &path[..module.len() + 1] => {
                    let mut next = target.clone();
                    next.extend(path[module.len() + 1..].iter().cloned());
                    path = next;
                }
                _ => return module,
            }
        }
        self.longest_module_prefix(&path)
    }

    fn longest_module_prefix(&self, path: &ModPath) -> ModPath {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| p.is_empty() || self.modules.contains(p))
            .unwrap_or_default()
    }

    /// Edges between nodes: a node is a module path cut to `depth`
    /// segments below `within` (the crate root when `within` is empty).
    /// Edges from a module to its own ancestors or descendants (declaring
    /// children, re-exporting them, `use super::*` in tests) are not edges
    /// between nodes and are left out.
    fn edges(&self, within: &[String]) -> BTreeMap<(String, String), Vec<Site>> {
        let depth = within.len() + 1;
        let mut out: BTreeMap<(String, String), Vec<Site>> = BTreeMap::new();
        for (from, abs, site) in &self.refs {
            let to = self.defining_module(abs);
            if !from.starts_with(within) || !to.starts_with(within) {
                continue;
            }
            if from.len() < depth || to.len() < depth {
                continue;
            }
            let (a, b) = (&from[..depth], &to[..depth]);
            if a == b {
                continue;
            }
            out.entry((a.join("::"), b.join("::")))
                .or_default()
                .push(site.clone());
        }
        out
    }
}

/// Every cycle's strongly connected component with more than one node.
fn cycles(edges: &BTreeMap<(String, String), Vec<Site>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for (a, b) in edges.keys() {
                if *a == n && seen.insert(b.clone()) {
                    stack.push(b.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut comps: BTreeSet<Vec<String>> = BTreeSet::new();
    for n in &nodes {
        let comp: Vec<String> = nodes
            .iter()
            .filter(|m| reach[*n].contains(**m) && reach[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        if comp.len() > 1 {
            comps.insert(comp);
        }
    }
    comps.into_iter().collect()
}

fn describe(edges: &BTreeMap<(String, String), Vec<Site>>, src: &Path) -> String {
    let mut out = String::new();
    for ((a, b), sites) in edges {
        let s = &sites[0];
        out.push_str(&format!(
            "{a} -> {b}  ({} refs, e.g. {}:{})\n",
            sites.len(),
            s.file
                .strip_prefix(src.parent().unwrap())
                .unwrap_or(&s.file)
                .display(),
            s.line
        ));
    }
    out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Checks the rules on the crate below `src`: the problems found, and the
/// listing of every cross-module edge.
fn check(src: &Path) -> (Vec<String>, String) {
    let krate = Crate::load(src);
    let top = krate.edges(&[]);
    let mut problems = Vec::new();
    let rank = |m: &str| LAYERS.iter().find(|(n, _)| *n == m).map(|(_, r)| *r);
    for ((a, b), sites) in &top {
        let s = &sites[0];
        let at = format!("{}:{}", s.file.display(), s.line);
        match (rank(a), rank(b)) {
            (Some(ra), Some(rb)) if ra > rb => {}
            (Some(_), Some(_)) => {
                problems.push(format!("{a} imports {b}, a layer not below it ({at})"))
            }
            _ => problems.push(format!(
                "{a} -> {b}: a top-level module missing from LAYERS in this test ({at})"
            )),
        }
    }
    for c in cycles(&top) {
        problems.push(format!(
            "import cycle between top-level modules: {}",
            c.join(", ")
        ));
    }
    let mut listing = format!("== top level\n{}", describe(&top, src));
    for within in ACYCLIC_INSIDE {
        let inner = krate.edges(&[within.to_string()]);
        listing.push_str(&format!("== inside {within}\n{}", describe(&inner, src)));
        for c in cycles(&inner) {
            problems.push(format!("import cycle inside {within}: {}", c.join(", ")));
        }
    }
    (problems, listing)
}

#[test]
fn layers_only_import_downwards_and_have_no_cycles() {
    let (problems, listing) = check(&src_dir());
    if std::env::var_os("WSBENCH_IMPORTS").is_some() {
        println!("{listing}");
    }
    assert!(
        problems.is_empty(),
        "layering problems:\n{}\n\nedges:\n{listing}",
        problems.join("\n")
    );
}

/// The checker itself: an upward import, a cycle through `super::`, a
/// re-export followed to its module, and a test module's `use super::*`
/// that is not an edge.
#[test]
fn the_checker_sees_upward_imports_and_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let files = [
        ("lib.rs", "pub mod backend; pub mod engine; pub mod tui;"),
        ("backend/mod.rs", "use crate::engine::Workspace;"),
        (
            "engine/mod.rs",
            "pub mod a; pub mod b; pub use a::Workspace;\n#[cfg(test)] mod tests { use super::*; }",
        ),
        (
            "engine/a.rs",
            "pub struct Workspace; fn f(_: super::b::B) {}",
        ),
        (
            "engine/b.rs",
            "pub struct B; use crate::engine::Workspace as W;",
        ),
        ("tui/mod.rs", "fn g() { let _ = crate::backend::x(); }"),
    ];
    for (path, text) in files {
        let p = src.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let (problems, listing) = check(&src);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("backend imports engine")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p == "import cycle inside engine: engine::a, engine::b"),
        "{problems:?}"
    );
    assert!(listing.contains("engine::b -> engine::a"), "{listing}");
    assert!(listing.contains("tui -> backend"), "{listing}");
    assert_eq!(problems.len(), 2, "{problems:?}");
}
