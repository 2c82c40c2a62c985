//! The floors of every crate of the workspace, checked against the table in ARCHITECTURE.md.
//!
//! ARCHITECTURE.md holds, in a fenced block with the info string `floors`, each crate's floors
//! bottom up and the modules on each. This test reads that block, then the `use` lines and the
//! `crate::`/`super::`/`self::` paths (and paths through names those `use` lines bring in) of
//! every source file of every crate, and fails on:
//!
//! - an import that goes up a floor (a module may import modules of lower floors and of its
//!   own floor), and
//! - an import between two files that closes a cycle (every import between the files of a
//!   cycle is printed).
//!
//! A path is followed through re-exports (`pub use`, `pub(crate) use`, globs) to the file that
//! defines the item, so that importing `crate::engine::ChunkStore` is an arrow to
//! `engine/chunks.rs`, not to `engine/mod.rs`. A module's own submodules are its to use (it
//! declares them): an arrow from a module to a module inside it is not an import. Test code
//! (`#[cfg(test)]` items and files compiled only under `cfg(test)`) and comments are not read.
//! Each violation is printed with its file and line.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arrows known to break the rules, each tolerated until the work that removes it lands: the
/// test fails when an entry no longer matches any violation, so that it is deleted then.
/// (crate, importing module, imported module, why): a module stands for itself and everything
/// inside it.
const ALLOWED: &[(&str, &str, &str, &str)] = &[];

type ModPath = Vec<String>;

fn show(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

fn is_within(m: &[String], prefix: &[String]) -> bool {
    m.len() >= prefix.len() && m[..prefix.len()] == *prefix
}

fn split_path(s: &str) -> ModPath {
    if s == "crate" {
        return Vec::new();
    }
    s.split("::").map(str::to_string).collect()
}

// ---------------------------------------------------------------------------------------------
// The floor table

struct CrateFloors {
    name: String,
    dir: String,
    /// Floors bottom up: (name, modules).
    floors: Vec<(String, Vec<ModPath>)>,
}

/// The `floors` block of ARCHITECTURE.md:
///
/// ```text
/// crate NAME DIR
///   FLOOR: module module::sub ...
/// ```
fn read_table(doc: &str) -> Vec<CrateFloors> {
    let mut lines = doc.lines();
    let mut found = false;
    for line in lines.by_ref() {
        if line.trim() == "```floors" {
            found = true;
            break;
        }
    }
    assert!(found, "ARCHITECTURE.md has no ```floors block");
    let mut crates: Vec<CrateFloors> = Vec::new();
    for line in lines {
        let line = line.trim();
        if line == "```" {
            return crates;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("crate ") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(dir), None) = (words.next(), words.next(), words.next()) else {
                panic!("floors block: `crate NAME DIR` expected, got {line:?}");
            };
            crates.push(CrateFloors {
                name: name.to_string(),
                dir: dir.to_string(),
                floors: Vec::new(),
            });
            continue;
        }
        let (floor, modules) = line
            .split_once(':')
            .filter(|(f, _)| !f.contains("::"))
            .unwrap_or_else(|| panic!("floors block: `FLOOR: modules` expected, got {line:?}"));
        let krate = crates
            .last_mut()
            .unwrap_or_else(|| panic!("floors block: a floor before any `crate` line: {line:?}"));
        krate.floors.push((
            floor.trim().to_string(),
            modules.split_whitespace().map(split_path).collect(),
        ));
    }
    panic!("ARCHITECTURE.md: the ```floors block is not closed");
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The tokens of a Rust source, with their lines; comments, strings and character literals
/// are dropped (a string becomes `Punct('"')`), lifetimes become `Punct('\'')`.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let n = b.len();
    // Skips a string body from just after its opening quote; `hashes` closing `#`s for raw.
    let skip_str = |i: &mut usize, line: &mut usize, raw: bool, hashes: usize| {
        while *i < n {
            let c = b[*i];
            if c == '\n' {
                *line += 1;
            }
            if !raw && c == '\\' {
                if *i + 1 < n && b[*i + 1] == '\n' {
                    *line += 1;
                }
                *i += 2;
                continue;
            }
            if c == '"' && (0..hashes).all(|h| *i + 1 + h < n && b[*i + 1 + h] == '#') {
                *i += 1 + hashes;
                return;
            }
            *i += 1;
        }
    };
    while i < n {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && i + 1 < n && b[i + 1] == '/' {
            while i < n && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && i + 1 < n && b[i + 1] == '*' {
            let mut depth = 0;
            while i < n {
                if b[i] == '/' && i + 1 < n && b[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && i + 1 < n && b[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            let l = line;
            i += 1;
            skip_str(&mut i, &mut line, false, 0);
            out.push((Tok::Punct('"'), l));
        } else if c == '\'' {
            // A character literal ('a', '\n', '\'', '\u{..}') or a lifetime ('a).
            if i + 1 < n && b[i + 1] == '\\' {
                i += 3;
                while i < n && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if i + 2 < n && b[i + 2] == '\'' {
                i += 3;
            } else {
                i += 1;
            }
            out.push((Tok::Punct('\''), line));
        } else if c.is_alphanumeric() || c == '_' {
            let s = i;
            while i < n && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let word: String = b[s..i].iter().collect();
            let next = b.get(i).copied();
            if (word == "r" || word == "br") && matches!(next, Some('"') | Some('#')) {
                let mut hashes = 0;
                while b.get(i + hashes) == Some(&'#') {
                    hashes += 1;
                }
                if b.get(i + hashes) == Some(&'"') {
                    // A raw string.
                    let l = line;
                    i += hashes + 1;
                    skip_str(&mut i, &mut line, true, hashes);
                    out.push((Tok::Punct('"'), l));
                    continue;
                }
                if word == "r" && hashes == 1 {
                    // A raw identifier.
                    let s = i + 1;
                    i = s;
                    while i < n && (b[i].is_alphanumeric() || b[i] == '_') {
                        i += 1;
                    }
                    out.push((Tok::Ident(b[s..i].iter().collect()), line));
                    continue;
                }
            }
            if word == "b" && next == Some('"') {
                let l = line;
                i += 1;
                skip_str(&mut i, &mut line, false, 0);
                out.push((Tok::Punct('"'), l));
                continue;
            }
            if word == "b" && next == Some('\'') {
                // A byte character literal.
                if b.get(i + 1) == Some(&'\\') {
                    i += 3;
                } else {
                    i += 2;
                }
                while i < n && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push((Tok::Punct('\''), line));
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else if c == ':' && i + 1 < n && b[i + 1] == ':' {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// One file: its uses, its items, its paths

/// A path as written: its first segment (`crate`, `super`, `self` or a name) and the rest.
#[derive(Clone, Debug)]
struct UsePath {
    segs: Vec<String>,
    /// `use a::b::*`
    glob: bool,
}

#[derive(Default, Debug)]
struct Scope {
    /// Name brought in by a `use` -> the path it names.
    uses: HashMap<String, UsePath>,
    globs: Vec<UsePath>,
    /// Items defined here (functions, types, traits, constants, statics, macros, inline modules).
    items: BTreeSet<String>,
}

#[derive(Debug)]
struct Reference {
    /// The inline module of the file the path is written in (empty: the file's own scope).
    scope: Vec<String>,
    path: Vec<String>,
    line: usize,
}

#[derive(Default, Debug)]
struct FileInfo {
    /// Inline module path inside the file -> its scope.
    scopes: HashMap<Vec<String>, Scope>,
    refs: Vec<Reference>,
    /// Submodules declared `#[cfg(test)] mod name;`.
    test_only: BTreeSet<String>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    }
}

/// The end (exclusive) of the item starting at `i`: after its `;` or its closing `}` at
/// depth 0.
fn item_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 && toks[i].0 == Tok::Punct('}') {
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The end (exclusive) of the bracketed group opening at `i`.
fn brackets_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct('[') | Tok::Punct('(') | Tok::Punct('{') => depth += 1,
            Tok::Punct(']') | Tok::Punct(')') | Tok::Punct('}') => {
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

/// After `#[cfg(test)]` at `i`, the index past it.
fn is_cfg_test(toks: &[(Tok, usize)], i: usize) -> Option<usize> {
    // # [ cfg ( test ) ]
    let want = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    if toks.len() >= i + want.len() && toks[i..i + want.len()].iter().map(|t| &t.0).eq(&want) {
        return Some(i + want.len());
    }
    None
}

/// Parses a use tree starting at `i` (after `use`), pushing `(path, rename)` pairs.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(UsePath, String)>,
) -> usize {
    let mut segs = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Sep) => i += 1,
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                i += 1;
                if ident(toks.get(i)) == Some("as") {
                    let alias = ident(toks.get(i + 1)).unwrap_or("_").to_string();
                    i += 2;
                    let mut path = segs.clone();
                    if path.last().map(String::as_str) == Some("self") {
                        path.pop();
                    }
                    out.push((
                        UsePath {
                            segs: path,
                            glob: false,
                        },
                        alias,
                    ));
                    return i;
                }
                if !matches!(toks.get(i).map(|t| &t.0), Some(Tok::Sep)) {
                    let mut path = segs.clone();
                    if path.last().map(String::as_str) == Some("self") {
                        path.pop();
                    }
                    let name = path.last().cloned().unwrap_or_default();
                    out.push((
                        UsePath {
                            segs: path,
                            glob: false,
                        },
                        name,
                    ));
                    return i;
                }
            }
            Some(Tok::Punct('*')) => {
                out.push((UsePath { segs, glob: true }, String::new()));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &segs, out),
                    }
                }
            }
            _ => return i,
        }
    }
}

fn read_file(src: &str) -> FileInfo {
    let toks = tokens(src);
    let mut info = FileInfo::default();
    info.scopes.insert(Vec::new(), Scope::default());
    // The inline modules open at this point, with the brace depth each closes at.
    let mut stack: Vec<(String, i32)> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    let scope_of = |stack: &[(String, i32)]| -> Vec<String> {
        stack.iter().map(|(name, _)| name.clone()).collect()
    };
    while i < toks.len() {
        if let Some(after) = is_cfg_test(&toks, i) {
            // Skip further attributes, then the item.
            let mut j = after;
            while toks.get(j).map(|t| &t.0) == Some(&Tok::Punct('#')) {
                j = brackets_end(&toks, j + 1);
            }
            let mut k = j;
            if ident(toks.get(k)) == Some("pub") {
                k += 1;
                if toks.get(k).map(|t| &t.0) == Some(&Tok::Punct('(')) {
                    k = brackets_end(&toks, k);
                }
            }
            if ident(toks.get(k)) == Some("mod")
                && toks.get(k + 2).map(|t| &t.0) == Some(&Tok::Punct(';'))
            {
                if let Some(name) = ident(toks.get(k + 1)) {
                    info.test_only.insert(name.to_string());
                }
            }
            i = item_end(&toks, j);
            continue;
        }
        let scope = scope_of(&stack);
        match &toks[i].0 {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if stack.last().map(|s| s.1) == Some(depth) {
                    stack.pop();
                }
                depth -= 1;
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" => {
                let mut pairs = Vec::new();
                let line = toks[i].1;
                let end = use_tree(&toks, i + 1, &[], &mut pairs);
                let sc = info.scopes.entry(scope.clone()).or_default();
                for (path, name) in pairs {
                    info.refs.push(Reference {
                        scope: scope.clone(),
                        path: path.segs.clone(),
                        line,
                    });
                    if path.glob {
                        sc.globs.push(path);
                    } else if name != "_" {
                        sc.uses.insert(name, path);
                    }
                }
                i = end;
            }
            Tok::Ident(kw) if ITEM_KEYWORDS.contains(&kw.as_str()) => {
                // `const fn`, `unsafe fn`...: the name follows the last keyword.
                if let Some(name) = ident(toks.get(i + 1)) {
                    if !ITEM_KEYWORDS.contains(&name) && name != "unsafe" && name != "async" {
                        let name = name.to_string();
                        info.scopes
                            .entry(scope.clone())
                            .or_default()
                            .items
                            .insert(name.clone());
                        if kw == "mod" && toks.get(i + 2).map(|t| &t.0) == Some(&Tok::Punct('{')) {
                            stack.push((name.clone(), depth + 1));
                            let mut inner = scope.clone();
                            inner.push(name);
                            info.scopes.entry(inner).or_default();
                        }
                    }
                }
                i += 1;
            }
            Tok::Ident(kw) if kw == "macro_rules" => {
                if let Some(name) = ident(toks.get(i + 2)) {
                    info.scopes
                        .entry(scope.clone())
                        .or_default()
                        .items
                        .insert(name.to_string());
                }
                i += 1;
            }
            Tok::Ident(first) => {
                // A path in code: `a::b::c` not preceded by `::` (the start of a path).
                let starts = !matches!(i.checked_sub(1).map(|p| &toks[p].0), Some(Tok::Sep))
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Sep);
                if starts {
                    let line = toks[i].1;
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j).map(|t| &t.0) == Some(&Tok::Sep) {
                        match ident(toks.get(j + 1)) {
                            Some(s) => {
                                path.push(s.to_string());
                                j += 2;
                            }
                            None => break,
                        }
                    }
                    info.refs.push(Reference {
                        scope: scope.clone(),
                        path,
                        line,
                    });
                    i = j;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    info
}

// ---------------------------------------------------------------------------------------------
// One crate

struct CrateSource {
    /// File module path -> (file, what it holds).
    files: BTreeMap<ModPath, (PathBuf, FileInfo)>,
}

fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs").to_string();
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem);
    }
    parts
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn read_crate(dir: &Path) -> CrateSource {
    let mut paths = Vec::new();
    walk(dir, &mut paths);
    let mut files = BTreeMap::new();
    for p in paths {
        let rel = p.strip_prefix(dir).expect("walked under dir").to_path_buf();
        // src/bin/*.rs are crates of their own.
        if rel.starts_with("bin") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        files.insert(module_of(&rel), (p, read_file(&src)));
    }
    // Files compiled only under cfg(test), and what is inside them.
    let mut test_only: Vec<ModPath> = Vec::new();
    for (m, (_, info)) in &files {
        for name in &info.test_only {
            let mut t = m.clone();
            t.push(name.clone());
            test_only.push(t);
        }
    }
    files.retain(|m, _| !test_only.iter().any(|t| is_within(m, t)));
    CrateSource { files }
}

impl CrateSource {
    /// The file that defines what `path` names, written in `file` inside its inline module
    /// `scope`; None for a path outside the crate (another crate, a local name).
    fn resolve(&self, file: &ModPath, scope: &[String], path: &[String]) -> Option<ModPath> {
        self.resolve_in(file, scope, path, 0)
    }

    fn resolve_in(
        &self,
        file: &ModPath,
        scope: &[String],
        path: &[String],
        hops: usize,
    ) -> Option<ModPath> {
        if hops > 16 || path.is_empty() {
            return None;
        }
        // The module the path starts from: (file, inline scope), and the segments left.
        let (mut f, mut sc, rest): (ModPath, Vec<String>, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), Vec::new(), &path[1..]),
            "self" => (file.clone(), scope.to_vec(), &path[1..]),
            "super" => {
                let (mut f, mut sc) = (file.clone(), scope.to_vec());
                let mut k = 0;
                while path.get(k).map(String::as_str) == Some("super") {
                    if sc.pop().is_none() {
                        f.pop()?;
                    }
                    k += 1;
                }
                (f, sc, &path[k..])
            }
            first => {
                // A name in scope: a `use` of this scope, a child module, an inline module.
                let info = &self.files.get(file)?.1;
                let here = info.scopes.get(scope)?;
                if let Some(u) = here.uses.get(first) {
                    let mut p = u.segs.clone();
                    p.extend_from_slice(&path[1..]);
                    return self.resolve_in(file, scope, &p, hops + 1);
                }
                if scope.is_empty() {
                    let mut child = file.clone();
                    child.push(first.to_string());
                    if self.files.contains_key(&child) {
                        (child, Vec::new(), &path[1..])
                    } else if here.items.contains(first) && path.len() > 1 {
                        let mut inner = scope.to_vec();
                        inner.push(first.to_string());
                        if info.scopes.contains_key(&inner) {
                            (file.clone(), inner, &path[1..])
                        } else {
                            return None;
                        }
                    } else {
                        return None;
                    }
                } else {
                    let mut inner = scope.to_vec();
                    inner.push(first.to_string());
                    if info.scopes.contains_key(&inner) && path.len() > 1 {
                        (file.clone(), inner, &path[1..])
                    } else {
                        return None;
                    }
                }
            }
        };
        let mut rest = rest;
        while let Some(seg) = rest.first() {
            // A file module inside this one.
            if sc.is_empty() {
                let mut child = f.clone();
                child.push(seg.clone());
                if self.files.contains_key(&child) {
                    f = child;
                    rest = &rest[1..];
                    continue;
                }
            }
            let info = &self.files.get(&f)?.1;
            let here = info.scopes.get(&sc)?;
            // An inline module.
            let mut inner = sc.clone();
            inner.push(seg.clone());
            if info.scopes.contains_key(&inner) {
                sc = inner;
                rest = &rest[1..];
                continue;
            }
            if here.items.contains(seg) {
                return Some(f);
            }
            if let Some(u) = here.uses.get(seg) {
                let mut p = u.segs.clone();
                p.extend_from_slice(&rest[1..]);
                return self.resolve_in(&f, &sc, &p, hops + 1);
            }
            let mut from_outside = false;
            for g in &here.globs {
                let mut p = g.segs.clone();
                p.push(seg.clone());
                match self.resolve_in(&f, &sc, &p, hops + 1) {
                    Some(t) if self.defines(&t, seg) => return Some(t),
                    Some(_) => {}
                    None => from_outside = true,
                }
            }
            // A name a glob from another crate brings in.
            if from_outside {
                return None;
            }
            // A name we cannot see (a variant, an associated item): this module.
            return Some(f);
        }
        // An inline module that only passes on another crate's items is that crate.
        if !sc.is_empty() && self.only_outside(&f, &sc, hops) {
            return None;
        }
        Some(f)
    }

    fn only_outside(&self, file: &ModPath, scope: &[String], hops: usize) -> bool {
        let Some(here) = self.files.get(file).and_then(|(_, i)| i.scopes.get(scope)) else {
            return false;
        };
        here.items.is_empty()
            && here
                .uses
                .values()
                .chain(&here.globs)
                .all(|u| self.resolve_in(file, scope, &u.segs, hops + 1).is_none())
    }

    fn defines(&self, file: &ModPath, name: &str) -> bool {
        self.files.get(file).is_some_and(|(_, info)| {
            info.scopes
                .values()
                .any(|s| s.items.contains(name) || s.uses.contains_key(name))
        })
    }

    /// Every import from one file to another: (from, to, line), a module's own submodules
    /// left out.
    fn arrows(&self) -> Vec<(ModPath, ModPath, usize)> {
        let mut out = BTreeSet::new();
        for (m, (_, info)) in &self.files {
            for r in &info.refs {
                let Some(t) = self.resolve(m, &r.scope, &r.path) else {
                    continue;
                };
                if is_within(&t, m) {
                    continue;
                }
                out.insert((m.clone(), t, r.line));
            }
        }
        out.into_iter().collect()
    }
}

/// The strongly connected components of more than one file (Tarjan).
fn cycles(nodes: &[ModPath], arrows: &[(ModPath, ModPath, usize)]) -> Vec<BTreeSet<ModPath>> {
    let index: HashMap<&ModPath, usize> = nodes.iter().enumerate().map(|(i, m)| (m, i)).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (a, b, _) in arrows {
        if let (Some(&i), Some(&j)) = (index.get(a), index.get(b)) {
            next[i].push(j);
        }
    }
    struct St {
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], st: &mut St) {
        st.idx[v] = Some(st.count);
        st.low[v] = st.count;
        st.count += 1;
        st.stack.push(v);
        st.on[v] = true;
        for &w in &next[v] {
            match st.idx[w] {
                None => {
                    visit(w, next, st);
                    st.low[v] = st.low[v].min(st.low[w]);
                }
                Some(iw) if st.on[w] => st.low[v] = st.low[v].min(iw),
                _ => {}
            }
        }
        if Some(st.low[v]) == st.idx[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            st.out.push(comp);
        }
    }
    let mut st = St {
        idx: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on: vec![false; nodes.len()],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..nodes.len() {
        if st.idx[v].is_none() {
            visit(v, &next, &mut st);
        }
    }
    st.out
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
        .collect()
}

fn allowed(krate: &str, from: &[String], to: &[String]) -> Option<usize> {
    ALLOWED.iter().position(|(c, a, b, _)| {
        *c == krate && is_within(from, &split_path(a)) && is_within(to, &split_path(b))
    })
}

#[test]
fn floors() {
    // Another checkout's floors, for a drawing of it (FLOORS_ROOT=DIR).
    let here = std::env::var_os("FLOORS_ROOT").map(PathBuf::from);
    let root = here
        .as_deref()
        .unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR")));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = read_table(&doc);
    assert!(!table.is_empty(), "the floors block names no crate");
    let mut report = String::new();
    let mut failures = 0;
    let mut used = vec![false; ALLOWED.len()];
    for krate in &table {
        let dir = root.join(&krate.dir);
        if !dir.is_dir() {
            println!("{}: {} does not exist here, skipped", krate.name, krate.dir);
            continue;
        }
        let src = read_crate(&dir);
        let rel = |m: &ModPath| -> String {
            let p = &src.files[m].0;
            p.strip_prefix(root).unwrap_or(p).display().to_string()
        };
        // Each module's floor: the floor of the longest listed prefix.
        let mut listed: BTreeMap<ModPath, usize> = BTreeMap::new();
        for (f, (floor, modules)) in krate.floors.iter().enumerate() {
            for m in modules {
                if let Some(prev) = listed.insert(m.clone(), f) {
                    let _ = writeln!(
                        report,
                        "{}: `{}` is listed on two floors ({} and {})",
                        krate.name,
                        show(m),
                        krate.floors[prev].0,
                        floor
                    );
                    failures += 1;
                }
                if !src.files.contains_key(m) {
                    let _ = writeln!(
                        report,
                        "{}: floor {floor} lists `{}`, which is no module of {}",
                        krate.name,
                        show(m),
                        krate.dir
                    );
                    failures += 1;
                }
            }
        }
        // The crate root is `crate` in the table; a module not listed is on its parent's floor.
        let floor_of = |m: &ModPath| -> Option<usize> {
            if m.is_empty() {
                return listed.get(m).copied();
            }
            (1..=m.len())
                .rev()
                .find_map(|k| listed.get(&m[..k]).copied())
        };
        for m in src.files.keys() {
            if !m.is_empty() && floor_of(m).is_none() {
                let _ = writeln!(
                    report,
                    "{}: {} (`{}`) is on no floor of ARCHITECTURE.md's table",
                    krate.name,
                    rel(m),
                    show(m)
                );
                failures += 1;
            }
        }
        // Every import from one file to another, with the lines it is written on.
        let mut arrows: BTreeMap<(ModPath, ModPath), Vec<usize>> = BTreeMap::new();
        for (from, to, line) in src.arrows() {
            arrows.entry((from, to)).or_default().push(line);
        }
        if std::env::var_os("FLOORS_ARROWS").is_some() {
            // A drawing of the crate: every arrow between top-level modules.
            let mut top: BTreeMap<(String, String), usize> = BTreeMap::new();
            for (from, to) in arrows.keys() {
                let head = |m: &ModPath| m.first().cloned().unwrap_or_else(|| "crate".into());
                if head(from) != head(to) {
                    *top.entry((head(from), head(to))).or_default() += 1;
                }
            }
            println!("{}:", krate.name);
            for ((a, b), n) in top {
                println!("  {a} -> {b} ({n} file arrows)");
            }
        }
        let mut flag = |from: &ModPath, to: &ModPath, lines: &[usize], what: String| {
            let at = match lines {
                [first, rest @ ..] if !rest.is_empty() => {
                    let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
                    format!("{}:{first} (and lines {})", rel(from), rest.join(", "))
                }
                _ => format!("{}:{}", rel(from), lines.first().copied().unwrap_or(0)),
            };
            if let Some(k) = allowed(&krate.name, from, to) {
                used[k] = true;
                println!("allowed ({}): {at}: {what}", ALLOWED[k].3);
            } else {
                let _ = writeln!(report, "{at}: {what}");
                failures += 1;
            }
        };
        let floor_name = |f: usize| {
            krate
                .floors
                .get(f)
                .map_or("above every floor", |(n, _)| n.as_str())
                .to_string()
        };
        // Up a floor. The crate root (lib.rs, main.rs) is above every floor unless the table
        // puts it on one (as `crate`): it declares them.
        let top = krate.floors.len();
        for ((from, to), lines) in &arrows {
            let ff = floor_of(from).unwrap_or(top);
            let ft = floor_of(to).unwrap_or(top);
            if ft > ff {
                flag(
                    from,
                    to,
                    lines,
                    format!(
                        "`{}` (floor {}) imports `{}` (floor {}): up a floor",
                        show(from),
                        floor_name(ff),
                        show(to),
                        floor_name(ft)
                    ),
                );
            }
        }
        // Cycles between files.
        let nodes: Vec<ModPath> = src.files.keys().cloned().collect();
        let pairs: Vec<(ModPath, ModPath, usize)> = arrows
            .keys()
            .map(|(a, b)| (a.clone(), b.clone(), 0))
            .collect();
        let mut in_file_cycle = BTreeSet::new();
        for comp in cycles(&nodes, &pairs) {
            let names: Vec<String> = comp.iter().map(&rel).collect();
            for ((from, to), lines) in &arrows {
                if comp.contains(from) && comp.contains(to) {
                    in_file_cycle.insert((from.clone(), to.clone()));
                    flag(
                        from,
                        to,
                        lines,
                        format!(
                            "`{}` imports `{}`, closing a cycle through {}",
                            show(from),
                            show(to),
                            names.join(", ")
                        ),
                    );
                }
            }
        }
        // Cycles between the modules of the block (files of one module may import each other
        // as long as the files make no cycle).
        let unit = |m: &ModPath| -> Option<ModPath> {
            (0..=m.len())
                .rev()
                .map(|k| m[..k].to_vec())
                .find(|p| listed.contains_key(p) && (!p.is_empty() || m.is_empty()))
        };
        let units: Vec<ModPath> = listed.keys().cloned().collect();
        let mut unit_arrows: Vec<(ModPath, ModPath, usize)> = Vec::new();
        for (from, to) in arrows.keys() {
            if let (Some(a), Some(b)) = (unit(from), unit(to)) {
                if a != b && !is_within(&b, &a) {
                    unit_arrows.push((a, b, 0));
                }
            }
        }
        for comp in cycles(&units, &unit_arrows) {
            let names: Vec<String> = comp.iter().map(|m| format!("`{}`", show(m))).collect();
            for ((from, to), lines) in &arrows {
                let (Some(a), Some(b)) = (unit(from), unit(to)) else {
                    continue;
                };
                if a != b
                    && !is_within(&b, &a)
                    && comp.contains(&a)
                    && comp.contains(&b)
                    && !in_file_cycle.contains(&(from.clone(), to.clone()))
                {
                    flag(
                        from,
                        to,
                        lines,
                        format!(
                            "`{}` imports `{}`, closing a cycle between the modules {}",
                            show(from),
                            show(to),
                            names.join(", ")
                        ),
                    );
                }
            }
        }
    }
    for (k, u) in used.iter().enumerate() {
        if !u {
            let (c, a, b, why) = ALLOWED[k];
            let _ = writeln!(
                report,
                "allow-list entry ({c}: {a} -> {b}, {why}) matches nothing: delete it"
            );
            failures += 1;
        }
    }
    assert!(
        failures == 0,
        "{failures} violation(s) of the floors in ARCHITECTURE.md:\n{report}"
    );
}

/// The reader of the floors: paths through re-exports, globs, inline modules and `super`,
/// test code left out.
#[test]
fn reads_paths_through_reexports() {
    let files = [
        (
            vec![],
            "mod a; mod b; pub mod facade { pub use crate::a::Thing; }\n\
             pub use b::Other;",
        ),
        (
            vec!["a".to_string()],
            "pub struct Thing; use crate::Other; // crate::b::Nope\n\
             fn f() { let s = \"crate::b::InString\"; let c = 'x'; }\n\
             #[cfg(test)] mod tests { use crate::b::Test; }",
        ),
        (
            vec!["b".to_string()],
            "pub struct Other; use super::facade::Thing; fn g<'a>(x: &'a str) {}\n\
             pub(crate) use crate::c::*; fn h() { helper(); }",
        ),
        (vec!["c".to_string()], "pub fn helper() {} use std::fmt;"),
    ];
    let src = CrateSource {
        files: files
            .into_iter()
            .map(|(m, s)| (m, (PathBuf::from("x.rs"), read_file(s))))
            .collect(),
    };
    let arrows: Vec<(String, String, usize)> = src
        .arrows()
        .into_iter()
        .map(|(a, b, l)| (show(&a), show(&b), l))
        .collect();
    let want = vec![
        ("a".to_string(), "b".to_string(), 1),
        ("b".to_string(), "a".to_string(), 1),
        ("b".to_string(), "c".to_string(), 2),
    ];
    assert_eq!(arrows, want);
    let nodes: Vec<ModPath> = src.files.keys().cloned().collect();
    let raw: Vec<_> = src.arrows();
    let comps = cycles(&nodes, &raw);
    assert_eq!(comps.len(), 1);
    assert_eq!(comps[0].len(), 2);
}
