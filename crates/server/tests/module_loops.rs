//! Inside each crate, no import loop spans two top-level modules.
//!
//! The crate table (see `crate_directions.rs`) keeps the directions
//! between crates; this keeps them inside one. Every non-test source file
//! of every workspace crate is read, its imports (`use` trees and
//! `crate::`/`super::`/`self::` paths, with re-exports followed to the
//! module that defines the name) become file-to-file edges, and every
//! strongly connected set of files must stay within one top-level module
//! (a `mod.rs` and its children may import each other; `a.rs` and `b.rs`
//! may not, in both directions, however indirectly). Code under
//! `#[cfg(test)]` is not part of the structure and is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A token of Rust source with comments and literals removed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

fn tokenize(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if (c == b'r' || c == b'b')
            && raw_string_start(&b[i..]).is_some()
            && (i == 0 || !is_ident_byte(b[i - 1]))
        {
            let (skip, hashes) = raw_string_start(&b[i..]).expect("checked");
            i += skip;
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == b'"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else if let Some(len) = std::str::from_utf8(&b[i + 1..])
                .ok()
                .and_then(|s| s.chars().next())
                .map(|ch| ch.len_utf8())
                .filter(|&len| b.get(i + 1 + len) == Some(&b'\''))
            {
                i += 2 + len;
            } else {
                i += 1;
                while i < b.len() && is_ident_byte(b[i]) {
                    i += 1;
                }
            }
        } else if is_ident_byte(c) && !c.is_ascii_digit() {
            let start = i;
            while i < b.len() && is_ident_byte(b[i]) {
                i += 1;
            }
            out.push(Tok::Ident(src[start..i].to_string()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (is_ident_byte(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Tok::PathSep);
            i += 2;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push(Tok::Punct(c as char));
            i += 1;
        }
    }
    out
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// `r"`, `r#"`, `br"`, `b"`: bytes to skip to the content, and the hashes.
fn raw_string_start(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    if b.first() == Some(&b'b') {
        i += 1;
        if b.get(i) == Some(&b'"') {
            return Some((i + 1, 0));
        }
    }
    if b.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while b.get(i) == Some(&b'#') {
        hashes += 1;
        i += 1;
    }
    (b.get(i) == Some(&b'"')).then_some((i + 1, hashes))
}

fn ident(t: Option<&Tok>, s: &str) -> bool {
    matches!(t, Some(Tok::Ident(x)) if x == s)
}

fn punct(t: Option<&Tok>, c: char) -> bool {
    t == Some(&Tok::Punct(c))
}

/// Index just past the bracketed group opening at `i`.
fn skip_group(toks: &[Tok], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Removes every item carrying `#[cfg(test)]`.
fn strip_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let test_attr = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if toks[i..].starts_with(&test_attr) {
            i += test_attr.len();
            // Further attributes, then the item up to its `;` or its body.
            while punct(toks.get(i), '#') && punct(toks.get(i + 1), '[') {
                i = skip_group(&toks, i + 1);
            }
            let mut depth = 0i32;
            while i < toks.len() {
                match &toks[i] {
                    Tok::Punct('(' | '[') => depth += 1,
                    Tok::Punct(')' | ']') => depth -= 1,
                    Tok::Punct(';') if depth == 0 => {
                        i += 1;
                        break;
                    }
                    Tok::Punct('{') if depth == 0 => {
                        i = skip_group(&toks, i);
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            out.push(toks[i].clone());
            i += 1;
        }
    }
    out
}

/// One `use` tree expanded: each leaf path, the name it binds (`None` for
/// a glob).
fn parse_use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix.to_vec();
    if toks.get(i) == Some(&Tok::PathSep) {
        i += 1;
    }
    loop {
        match toks.get(i) {
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let mut bound = name.clone();
                if ident(toks.get(i), "as") {
                    if let Some(Tok::Ident(alias)) = toks.get(i + 1) {
                        bound = alias.clone();
                    }
                    i += 2;
                }
                if bound == "self" {
                    path.pop();
                    bound = path.last().cloned().unwrap_or_default();
                }
                out.push((path, Some(bound)));
                return i;
            }
            Some(Tok::Punct('*')) => {
                out.push((path, None));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while !punct(toks.get(i), '}') && i < toks.len() {
                    i = parse_use_tree(toks, i, &path, out);
                    if punct(toks.get(i), ',') {
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => return i + 1,
        }
    }
}

/// A module file and what it says about its imports.
#[derive(Default)]
struct ModFile {
    children: BTreeSet<String>,
    /// Paths (as written) this file refers to.
    refs: Vec<Vec<String>>,
    /// Name -> path (as written) of `pub use` re-exports.
    reexports: BTreeMap<String, Vec<String>>,
    /// Paths (as written) of `pub use …::*`.
    globs: Vec<Vec<String>>,
    /// Names this file defines as items.
    defines: BTreeSet<String>,
}

fn read_module(file: &Path) -> ModFile {
    let src = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let toks = strip_test_items(tokenize(&src));
    let mut m = ModFile::default();
    // Child modules declared by `mod name;`.
    for w in toks.windows(3) {
        if let [Tok::Ident(kw), Tok::Ident(name), Tok::Punct(';')] = w {
            if kw == "mod" {
                m.children.insert(name.clone());
            }
        }
    }
    // Inline modules (`mod name { … }`) open around the current token, each
    // with the brace depth inside it: `self`/`super` there are relative to
    // them, not to the file.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" => {
                let public = ident(i.checked_sub(1).and_then(|j| toks.get(j)), "pub")
                    || (punct(i.checked_sub(1).and_then(|j| toks.get(j)), ')') && {
                        // pub(crate) / pub(super) / pub(in path)
                        let mut j = i - 1;
                        while j > 0 && !punct(toks.get(j), '(') {
                            j -= 1;
                        }
                        j > 0 && ident(toks.get(j - 1), "pub")
                    });
                let mut leaves = Vec::new();
                i = parse_use_tree(&toks, i + 1, &[], &mut leaves);
                for (path, bound) in leaves {
                    let path = file_relative(path, &inline);
                    if public {
                        match &bound {
                            Some(name) => {
                                m.reexports.insert(name.clone(), path.clone());
                            }
                            None => m.globs.push(path.clone()),
                        }
                    }
                    m.refs.push(path);
                }
            }
            Tok::Ident(kw)
                if matches!(
                    kw.as_str(),
                    "struct"
                        | "enum"
                        | "fn"
                        | "trait"
                        | "type"
                        | "const"
                        | "static"
                        | "union"
                        | "mod"
                ) =>
            {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    m.defines.insert(name.clone());
                    if kw == "mod" && punct(toks.get(i + 2), '{') {
                        inline.push((name.clone(), depth + 1));
                    }
                }
                i += 1;
            }
            Tok::Ident(first)
                if toks.get(i + 1) == Some(&Tok::PathSep)
                    && i.checked_sub(1).and_then(|j| toks.get(j)) != Some(&Tok::PathSep) =>
            {
                if matches!(first.as_str(), "crate" | "super" | "self")
                    || m.children.contains(first)
                {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j) == Some(&Tok::PathSep) {
                        match toks.get(j + 1) {
                            Some(Tok::Ident(s)) => {
                                path.push(s.clone());
                                j += 2;
                            }
                            _ => break,
                        }
                    }
                    m.refs.push(file_relative(path, &inline));
                    i = j;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    m
}

/// `path` as written inside the inline modules `inline` (outermost first),
/// made relative to the file's own module.
fn file_relative(path: Vec<String>, inline: &[(String, usize)]) -> Vec<String> {
    let names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
    let supers = path.iter().take_while(|s| *s == "super").count();
    if path.first().map(String::as_str) == Some("self") {
        let mut out = vec!["self".to_string()];
        out.extend(names);
        out.extend(path[1..].iter().cloned());
        out
    } else if supers == 0 || names.is_empty() {
        path
    } else if supers <= names.len() {
        let mut out = vec!["self".to_string()];
        out.extend(names[..names.len() - supers].iter().cloned());
        out.extend(path[supers..].iter().cloned());
        out
    } else {
        let mut out = vec!["super".to_string(); supers - names.len()];
        out.extend(path[supers..].iter().cloned());
        out
    }
}

/// A crate's modules by absolute path (`[]` is the root).
struct CrateMods {
    mods: BTreeMap<Vec<String>, ModFile>,
}

impl CrateMods {
    fn load(root: &Path) -> Self {
        let mut mods = BTreeMap::new();
        let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
        while let Some((path, file)) = todo.pop() {
            let m = read_module(&file);
            let dir = match file.file_name().and_then(|n| n.to_str()) {
                Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().expect("dir").to_path_buf(),
                _ => file.with_extension(""),
            };
            for child in &m.children {
                let flat = dir.join(format!("{child}.rs"));
                let nested = dir.join(child).join("mod.rs");
                let f = if flat.exists() { flat } else { nested };
                let mut p = path.clone();
                p.push(child.clone());
                todo.push((p, f));
            }
            mods.insert(path, m);
        }
        CrateMods { mods }
    }

    /// The absolute form of `rel` as written in module `at`, if it names
    /// something in this crate.
    fn absolute(&self, at: &[String], rel: &[String]) -> Option<Vec<String>> {
        let first = rel.first()?;
        let mut base: Vec<String> = at.to_vec();
        let mut rest = rel;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &rel[1..];
            }
            "self" => rest = &rel[1..],
            "super" => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            name if self.mods[at].children.contains(name) => {}
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that defines what `abs` names, following re-exports;
    /// `None` when it is another crate's (re-exported here).
    fn resolve(&self, abs: &[String], depth: usize) -> Option<Vec<String>> {
        let mut n = abs.len();
        while !self.mods.contains_key(&abs[..n]) {
            n -= 1;
        }
        let module = abs[..n].to_vec();
        if depth > 16 || n == abs.len() {
            return Some(module);
        }
        let m = &self.mods[&module];
        let name = &abs[n];
        if let Some(target) = m.reexports.get(name) {
            let mut next = self.absolute(&module, target)?;
            next.extend(abs[n + 1..].iter().cloned());
            return self.resolve(&next, depth + 1);
        }
        if !m.defines.contains(name) {
            for g in &m.globs {
                let Some(t) = self.absolute(&module, g) else {
                    continue;
                };
                let Some(target) = self.resolve(&t, depth + 1) else {
                    continue;
                };
                if self
                    .mods
                    .get(&target)
                    .is_some_and(|tm| tm.defines.contains(name) || tm.reexports.contains_key(name))
                {
                    let mut next = target;
                    next.extend(abs[n..].iter().cloned());
                    return self.resolve(&next, depth + 1);
                }
            }
        }
        Some(module)
    }

    /// File-to-file edges, each with one path that makes it.
    fn edges(&self) -> BTreeMap<(Vec<String>, Vec<String>), Vec<String>> {
        let mut edges = BTreeMap::new();
        for (at, m) in &self.mods {
            for r in &m.refs {
                let Some(abs) = self.absolute(at, r) else {
                    continue;
                };
                if abs.is_empty() {
                    continue;
                }
                let Some(to) = self.resolve(&abs, 0) else {
                    continue;
                };
                if &to != at {
                    edges.entry((at.clone(), to)).or_insert_with(|| r.clone());
                }
            }
        }
        edges
    }
}

/// Strongly connected components (Tarjan), each as its members.
fn components(
    nodes: &[Vec<String>],
    edges: &BTreeMap<(Vec<String>, Vec<String>), Vec<String>>,
) -> Vec<Vec<Vec<String>>> {
    let index_of: BTreeMap<&Vec<String>, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let mut adj = vec![Vec::new(); nodes.len()];
    for (a, b) in edges.keys() {
        adj[index_of[a]].push(index_of[b]);
    }
    struct St {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn go(v: usize, adj: &[Vec<usize>], s: &mut St) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &adj[v] {
            match s.index[w] {
                None => {
                    go(w, adj, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().expect("on stack");
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = St {
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..nodes.len() {
        if s.index[v].is_none() {
            go(v, &adj, &mut s);
        }
    }
    s.out
        .into_iter()
        .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
        .collect()
}

/// Every crate root in the workspace (a library and a binary are two).
fn crate_roots() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut roots = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/") {
        let src = entry.expect("entry").path().join("src");
        for root in ["lib.rs", "main.rs"] {
            if src.join(root).exists() {
                roots.push(src.join(root));
            }
        }
    }
    roots.sort();
    roots
}

fn loops_in(root: &Path) -> Vec<String> {
    let c = CrateMods::load(root);
    let nodes: Vec<Vec<String>> = c.mods.keys().cloned().collect();
    let edges = c.edges();
    let mut found = Vec::new();
    for comp in components(&nodes, &edges) {
        let tops: BTreeSet<&String> = comp.iter().filter_map(|p| p.first()).collect();
        if tops.len() < 2 {
            continue;
        }
        let members: BTreeSet<&Vec<String>> = comp.iter().collect();
        let name = |p: &Vec<String>| {
            if p.is_empty() {
                "crate".to_string()
            } else {
                p.join("::")
            }
        };
        let mut lines = vec![format!(
            "{}: a loop through {}",
            root.display(),
            comp.iter().map(name).collect::<Vec<_>>().join(", ")
        )];
        for ((a, b), via) in &edges {
            if members.contains(a) && members.contains(b) && a.first() != b.first() {
                lines.push(format!(
                    "    {} -> {} (by {})",
                    name(a),
                    name(b),
                    via.join("::")
                ));
            }
        }
        found.push(lines.join("\n"));
    }
    found
}

#[test]
fn no_import_loop_spans_two_top_level_modules() {
    let mut found = Vec::new();
    for root in crate_roots() {
        found.extend(loops_in(&root));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_scanner_sees_a_loop_and_skips_test_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = |name: &str, body: &str| std::fs::write(dir.path().join(name), body).expect("write");
    w(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\npub use e::E;\n#[cfg(test)]\nmod tests;\n",
    );
    w(
        "a.rs",
        "use crate::b::Thing; // crate::c::Nope\npub struct A;\n",
    );
    w(
        "b.rs",
        "pub struct Thing;\nfn f() -> super::a::A { let _s = \"crate::c\"; super::a::A }\n",
    );
    w(
        "c.rs",
        "pub use crate::a::A as Alias;\n#[cfg(test)]\nmod tests { use crate::b::Thing; }\n",
    );
    // `super::` in an inline module is the file's module, not its parent.
    w(
        "d.rs",
        "pub struct D;\npub mod inner {\n    use super::D;\n    pub fn f(_: D) {}\n}\n",
    );
    w("e.rs", "pub struct E(pub crate::d::D);\n");
    let found = loops_in(&dir.path().join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a -> b") && found[0].contains("b -> a"),
        "{}",
        found[0]
    );
    assert!(
        !found[0].contains("-> c") && !found[0].contains(", c") && !found[0].contains(", d"),
        "{}",
        found[0]
    );
}
