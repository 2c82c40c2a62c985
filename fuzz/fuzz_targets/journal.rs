//! Arbitrary bytes as a redo journal (`meta/journal`): `txn::decode` must return entries or
//! an error, never crash or allocate more than the input holds; whatever decodes encodes
//! back to a journal that decodes to the same entries.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::fuzzing::{decode, encode, Entry};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};

fn seeds() -> Vec<(String, Vec<u8>)> {
    let p = |s: &str| PathBuf::from(s);
    let journals = [
        vec![],
        vec![Entry::SetLen {
            path: p("data/__1__.bin"),
            len: 4096,
        }],
        vec![
            Entry::Patch {
                path: p("data/__1__.bin"),
                offset: 32,
                data: vec![7; 40],
            },
            Entry::Remove {
                path: p("data/__2__.bin"),
            },
            Entry::RemoveDir {
                path: p("data/old"),
            },
            Entry::Rename {
                from: p("data/a.tmp"),
                to: p("data/a"),
            },
            Entry::Meta {
                path: p("meta/sizes"),
                data: br#"{"shape":[10],"nbytes":80,"cbytes":60}"#.to_vec(),
            },
        ],
    ];
    let mut out = Vec::new();
    for (i, j) in journals.iter().enumerate() {
        let bytes = encode(j);
        // Knob 0: the bytes as they are; knob 1: the target appends the checksum.
        out.push((format!("journal-{i}"), [&[0u8][..], &bytes].concat()));
        out.push((
            format!("journal-{i}-crc"),
            [&[1u8][..], &bytes[..bytes.len() - 4]].concat(),
        ));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    // The first byte's low bit asks for the checksum to be appended, so that mutations reach
    // the entries rather than stopping at the checksum check.
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if knob & 1 == 1 {
        buf.extend_from_slice(&crc32fast::hash(rest).to_le_bytes());
    }
    let path = Path::new("meta/journal");
    let Ok(entries) = decode(&buf, path) else {
        return;
    };
    // Every byte of an entry comes from the input: nothing is invented.
    let payload: usize = entries
        .iter()
        .map(|e| match e {
            Entry::Patch { data, .. } | Entry::Meta { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    assert!(payload <= buf.len());
    for e in &entries {
        let paths: Vec<&PathBuf> = match e {
            Entry::Patch { path, .. }
            | Entry::SetLen { path, .. }
            | Entry::Remove { path }
            | Entry::RemoveDir { path }
            | Entry::Meta { path, .. } => vec![path],
            Entry::Rename { from, to } => vec![from, to],
        };
        for p in paths {
            assert!(p.is_relative() && !p.as_os_str().is_empty(), "{p:?}");
            assert!(
                p.components()
                    .all(|c| matches!(c, std::path::Component::Normal(_))),
                "{p:?}"
            );
        }
    }
    let again = encode(&entries);
    assert_eq!(decode(&again, path).unwrap(), entries);
});
