//! One object of a small dataset on an object store edited by arbitrary bytes: the state
//! (`meta/state`), a manifest, a block-index object or a superchunk object
//! (`spec/object-store.md`). Opening, reading whole and in a few places, verifying and
//! appending must each return a value or an error: never crash, never allocate what a
//! field claims, never run long, and never read values other than the dataset's without
//! an error.
//!
//! The first byte picks the object (its number, modulo their count, in key order); the
//! rest are edits, each replacing a run of its bytes ([`edit`]). The dataset and what is
//! done with it are `tests/hostile_store`'s; `tests/object_hostile_meta.rs` runs an
//! enumerated cousin of this target in `cargo test`.

#![no_main]

#[path = "../common/mod.rs"]
mod common;
#[path = "../../tests/hostile_store/mod.rs"]
mod hostile_store;

use hostile_store::{exercise, pristine};
use libfuzzer_sys::fuzz_target;

/// Each object unedited, and with its first byte, a middle byte and its last byte cut:
/// the starting inputs.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, (_, v)) in pristine().iter().enumerate() {
        out.push((format!("{i}"), vec![i as u8]));
        for (name, at) in [("first", 0), ("middle", v.len() / 2), ("last", v.len() - 1)] {
            let at = at as u16;
            out.push((format!("{i}-{name}"), vec![i as u8, (at >> 8) as u8, at as u8, 1, 0]));
        }
    }
    out
}

/// Applies the edits `[at: u16 big-endian][cut: u8][n: u8][n bytes]...` to `bytes` in
/// turn: each replaces the `cut` bytes from `at` (modulo the length plus one) with its
/// `n` bytes. Edits, not whole objects, so that an input means the same in every run
/// (the dataset's objects carry random ids and tags, drawn anew by each process).
fn edit(bytes: &mut Vec<u8>, mut edits: &[u8]) {
    while let [a, b, cut, n, rest @ ..] = edits {
        let at = usize::from(u16::from_be_bytes([*a, *b])) % (bytes.len() + 1);
        let end = (at + usize::from(*cut)).min(bytes.len());
        let n = usize::from(*n).min(rest.len());
        bytes.splice(at..end, rest[..n].iter().copied());
        edits = &rest[n..];
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    let Some((&which, edits)) = data.split_first() else {
        return;
    };
    let mut objects = pristine().clone();
    let n = objects.len();
    if let Some(bytes) = objects.values_mut().nth(usize::from(which) % n) {
        edit(bytes, edits);
    }
    exercise(&objects, false);
});
