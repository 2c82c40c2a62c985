//! Every chunk is bound to its position in its superchunk file (blz issue 21, item 3): two
//! entries of a file's offsets table swapped, duplicated or overwritten with another chunk's
//! position must never make a read return another chunk's data. The offsets digest in the
//! file's metadata document (`spec/blpk.md`, "Offsets digest") makes every read of the file's
//! chunks a corruption error naming the file and the chunk, and `verify` reports them.

mod common;

use blz::storage::{LocalStorage, OpenMode, Storage};
use common::{fails, ok, run, text, Dir};
use proptest::prelude::*;
use std::path::Path;

/// Digest length of checksum id `id` (`spec/blpk.md`, "Checksums").
fn dlen(id: u8) -> usize {
    [0, 4, 4, 16, 20, 28, 32, 48, 64][usize::from(id)]
}

/// Where the offsets table of a superchunk file starts, and how many chunks it holds, read
/// from the file's bytes as `spec/blpk.md` lays them out.
fn table(b: &[u8]) -> (usize, usize) {
    let nchunks = i64::from_le_bytes(b[16..24].try_into().unwrap()) as usize;
    let mut pos = 32;
    if b[5] & 0x02 != 0 {
        let max_meta = u32::from_le_bytes(b[48..52].try_into().unwrap()) as usize;
        pos += 32 + max_meta + dlen(b[41]);
    }
    (pos, nchunks)
}

fn slot(b: &[u8], k: usize) -> [u8; 8] {
    let (pos, _) = table(b);
    b[pos + 8 * k..pos + 8 * k + 8].try_into().unwrap()
}

fn set_slot(b: &mut [u8], k: usize, v: [u8; 8]) {
    let (pos, _) = table(b);
    b[pos + 8 * k..pos + 8 * k + 8].copy_from_slice(&v);
}

/// Swaps offsets slots `i` and `j` of the file at `path` with plain file I/O.
fn swap_slots(path: &Path, i: usize, j: usize) {
    let mut b = std::fs::read(path).unwrap();
    let (a, c) = (slot(&b, i), slot(&b, j));
    set_slot(&mut b, i, c);
    set_slot(&mut b, j, a);
    std::fs::write(path, b).unwrap();
}

/// Checks that `verify` of `p` exits 1 naming `file` and the offsets table.
fn verify_reports(args: &[&str], file: &str) {
    let out = run(args);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(file) && all.contains("chunk 0") && all.contains("offsets table"),
        "{all}"
    );
}

#[test]
fn swapped_offsets_slots_are_reported_by_verify_and_refused_by_get() {
    let d = Dir::new();
    let p = d.s("d.blz");
    ok(&[
        "create",
        &p,
        "--arange",
        "40000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "4",
    ]);
    ok(&["verify", &p]);
    swap_slots(&d.p("d.blz/data/__1__.bin"), 0, 1);
    verify_reports(&["verify", &p], "__1__.bin");
    let err = fails(&["get", &p, "0:3"]);
    assert!(
        err.contains("__1__.bin") && err.contains("chunk 0") && err.contains("offsets table"),
        "{err}"
    );
    let err = fails(&["get", &p, "1000:1003"]);
    assert!(
        err.contains("__1__.bin") && err.contains("chunk 1"),
        "{err}"
    );
    // Other files are untouched and still read.
    assert!(ok(&["get", &p, "4000:4003"]).contains("4002"));
    // Nothing is written into a file whose table does not check (a digest of the damaged
    // table would hide the damage).
    let before = std::fs::read(d.p("d.blz/data/__1__.bin")).unwrap();
    let mut ds = blz::Dataset::open_rw(&p).unwrap();
    let sel = ds.resolve(&[(5..6usize).into()]).unwrap();
    let err = ds.write_bytes(&sel, &(-1i64).to_le_bytes()).unwrap_err();
    assert!(err.is_corruption(), "{err:?}");
    assert!(err.to_string().contains("__1__.bin"), "{err}");
    drop(ds);
    assert_eq!(std::fs::read(d.p("d.blz/data/__1__.bin")).unwrap(), before);
    // Swapped back, the file reads again.
    swap_slots(&d.p("d.blz/data/__1__.bin"), 0, 1);
    ok(&["verify", &p]);
    assert!(ok(&["get", &p, "0:3"]).contains('2'));
}

#[test]
fn every_writer_keeps_the_digest_current() {
    let d = Dir::new();
    let p = d.s("d.blz");
    ok(&[
        "create",
        &p,
        "--arange",
        "3500",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "8",
    ]);
    // Append into the partial file, relocate chunks with a modification, shrink, compact:
    // the file stays readable, and a swap is still caught after each.
    let mut ds = blz::Dataset::open_rw(&p).unwrap();
    ds.append_bytes(
        &(3500..6200i64)
            .flat_map(i64::to_le_bytes)
            .collect::<Vec<_>>(),
        2700,
    )
    .unwrap();
    let noise: Vec<u8> = (0..1000u64)
        .flat_map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as i64).to_le_bytes())
        .collect();
    let sel = ds.resolve(&[(1000..2000usize).into()]).unwrap();
    ds.write_bytes(&sel, &noise).unwrap();
    drop(ds);
    let f = d.p("d.blz/data/__1__.bin");
    let b = std::fs::read(&f).unwrap();
    assert_ne!(b[5] & 0x08, 0, "the modification relocated a chunk");
    ok(&["verify", &p]);
    for step in [
        vec!["resize", p.as_str(), "5500"],
        vec!["compact", p.as_str()],
    ] {
        ok(&step);
        ok(&["verify", &p]);
        let saved = std::fs::read(&f).unwrap();
        swap_slots(&f, 0, 2);
        verify_reports(&["verify", &p], "__1__.bin");
        std::fs::write(&f, saved).unwrap();
    }
    assert!(ok(&["get", &p, "-1"]).contains("5499"));
}

#[test]
fn table_columns_are_bound_too() {
    let d = Dir::new();
    let mut csv = String::from("a,b\n");
    for i in 0..400 {
        csv.push_str(&format!("{i},{}\n", i * 3));
    }
    let input = d.write("t.csv", &csv);
    let t = d.s("t.blz");
    ok(&[
        "create",
        &t,
        "--csv",
        &input,
        "--chunkshape",
        "100",
        "--superchunk-size",
        "4",
    ]);
    ok(&["verify", &t]);
    swap_slots(&d.p("t.blz/data/b/__1__.bin"), 1, 2);
    verify_reports(&["verify", &t], "__1__.bin");
    let err = fails(&["get", &t, "150:160"]);
    assert!(
        err.contains("__1__.bin") && err.contains("chunk 1"),
        "{err}"
    );
}

#[test]
fn layer_columns_are_bound_too() {
    let d = Dir::new();
    let mut csv = String::new();
    for a in 0..50 {
        for b in 0..40 {
            csv.push_str(&format!("{a},{}\n", b * 3));
        }
    }
    let input = d.write("sorted.csv", &csv);
    let l = d.s("l.blz");
    ok(&[
        "layer",
        "build",
        &input,
        &l,
        "--columns",
        "a:int64,b:int64",
        "--chunklen",
        "64",
    ]);
    ok(&["layer", "verify", &l]);
    let f = d.p("l.blz/data/b/__1__.bin");
    let (_, n) = table(&std::fs::read(&f).unwrap());
    assert!(n >= 3, "{n} chunks");
    swap_slots(&f, 0, 2);
    let err = fails(&["layer", "verify", &l]);
    assert!(
        err.contains("__1__.bin") || err.contains("offsets table"),
        "{err}"
    );
}

/// A dataset whose first file holds `N` chunks, each of distinct values, and the bytes of
/// each chunk's rows.
const N: usize = 6;
const ROWS: u64 = 500;

fn dataset(d: &Dir) -> (String, Vec<Vec<u8>>) {
    let p = d.s("p.blz");
    ok(&[
        "create",
        &p,
        "--arange",
        &(ROWS * N as u64).to_string(),
        "--chunkshape",
        &ROWS.to_string(),
        "--superchunk-size",
        &N.to_string(),
    ]);
    let chunks = (0..N as u64)
        .map(|k| {
            (k * ROWS..(k + 1) * ROWS)
                .flat_map(|v| (v as i64).to_le_bytes())
                .collect()
        })
        .collect();
    (p, chunks)
}

/// What the property test does to the offsets table.
#[derive(Debug, Clone)]
enum Damage {
    /// Slot `k` takes the value of slot `perm[k]`.
    Permute(Vec<usize>),
    /// Slot `to` takes the value of slot `from`.
    Duplicate { from: usize, to: usize },
    /// Slot `k` moves by `delta` bytes.
    Shift { k: usize, delta: i64 },
    /// Byte `byte` of slot `k` is xored with `mask`.
    Flip { k: usize, byte: usize, mask: u8 },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just((0..N).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_map(Damage::Permute),
        (0..N, 0..N).prop_map(|(from, to)| Damage::Duplicate { from, to }),
        (0..N, -200i64..200).prop_map(|(k, delta)| Damage::Shift { k, delta }),
        (0..N, 0..8usize, 1..=255u8).prop_map(|(k, byte, mask)| Damage::Flip { k, byte, mask }),
    ]
}

fn apply(b: &mut [u8], d: &Damage) {
    let old: Vec<[u8; 8]> = (0..N).map(|k| slot(b, k)).collect();
    match d {
        Damage::Permute(perm) => {
            for (k, &from) in perm.iter().enumerate() {
                set_slot(b, k, old[from]);
            }
        }
        Damage::Duplicate { from, to } => set_slot(b, *to, old[*from]),
        Damage::Shift { k, delta } => {
            let v = i64::from_le_bytes(old[*k]).wrapping_add(*delta);
            set_slot(b, *k, v.to_le_bytes());
        }
        Damage::Flip { k, byte, mask } => {
            let mut v = old[*k];
            v[*byte] ^= mask;
            set_slot(b, *k, v);
        }
    }
}

/// A read of chunk `k` that failed: it must be a corruption error naming the file and a
/// chunk.
fn check_error(e: &blz::Error, file: &Path, k: usize) {
    assert!(
        e.is_corruption(),
        "chunk {k}: not a corruption error: {e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&file.display().to_string()) && msg.contains("chunk"),
        "chunk {k}: {msg}"
    );
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn a_damaged_offsets_table_never_reads_another_chunk(d in damage()) {
        let dir = Dir::new();
        let (p, chunks) = dataset(&dir);
        let file = dir.p("p.blz/data/__1__.bin");
        let pristine = std::fs::read(&file).unwrap();
        let mut b = pristine.clone();
        apply(&mut b, &d);
        std::fs::write(&file, &b).unwrap();
        let changed = b != pristine;

        let ds = blz::Dataset::open(&p).unwrap();
        let row_bytes = ROWS as usize * 8;
        for (k, want) in chunks.iter().enumerate() {
            let rows = ROWS as usize;
            let sel = ds.resolve(&[(k * rows..(k + 1) * rows).into()]).unwrap();
            // The whole chunk, and a few rows of it (the short read of verified chunks).
            match ds.read_bytes(&sel) {
                Ok(got) => prop_assert_eq!(&got, want, "chunk {} returned other data", k),
                Err(e) => check_error(&e, &file, k),
            }
            let row = k * ROWS as usize + 7;
            let few = ds.resolve(&[(row..row + 3).into()]).unwrap();
            match ds.read_bytes(&few) {
                Ok(got) => prop_assert_eq!(&got[..], &want[7 * 8..10 * 8]),
                Err(e) => check_error(&e, &file, k),
            }
            prop_assert_eq!(want.len(), row_bytes);
        }
        // Through the raw superchunk reader too (what `blz file unpack` uses).
        let f = LocalStorage.open(&file, OpenMode::Read).unwrap();
        if let Ok(r) = blz_format::blpk::SuperchunkReader::open(f) {
            for (k, want) in chunks.iter().enumerate() {
                match r.decompress_chunk(k as u64) {
                    Ok(got) => prop_assert_eq!(&got, want),
                    Err(e) => check_error(&e, &file, k),
                }
            }
        }
        let errors = ds.verify(|_, _| {});
        if changed {
            prop_assert!(!errors.is_empty(), "verify found nothing wrong after {:?}", d);
            for e in &errors {
                prop_assert!(e.is_corruption(), "{:?}", e);
                prop_assert!(e.to_string().contains("__1__.bin"), "{}", e);
            }
        } else {
            prop_assert!(errors.is_empty(), "{:?}", errors);
        }
        // The CLI agrees.
        let out = run(&["verify", &p]);
        prop_assert_eq!(out.status.code(), Some(if changed { 1 } else { 0 }));
    }
}
