//! Arbitrary bytes as the decompressed payload of a variable-length column's chunk
//! (`u32 n | u32 len[n] | bytes`): `decode_items` must return items or an error, never crash
//! or allocate more than the payload holds; a payload that decodes is exactly what
//! `encode_items` makes of its items.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::fuzzing::{decode_items, encode_items};
use libfuzzer_sys::fuzz_target;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let sets: [Vec<&[u8]>; 4] = [
        vec![],
        vec![b"a", b"bb", b""],
        vec![
            b"name-1-x",
            b"name-2-xx",
            "\u{e9}t\u{e9}".as_bytes(),
            &[0, 255, 7],
        ],
        vec![&[9; 300], b"", b"", b"z"],
    ];
    sets.iter()
        .enumerate()
        .map(|(i, s)| (format!("varlen-{i}"), encode_items(s).unwrap()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    match decode_items(data) {
        Ok(items) => {
            assert!(4 * items.len() + 4 <= data.len());
            assert_eq!(encode_items(&items).unwrap(), data);
        }
        Err(msg) => assert!(!msg.is_empty()),
    }
});
