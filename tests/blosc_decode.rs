//! blz decodes LZ4 chunks with shuffle or no filter itself (scratch kept per thread, the
//! same loop as c-blosc's); everything else, and any chunk decoded with more than one
//! thread, goes to c-blosc. These tests hold the two paths to the same answer: on every
//! kind of chunk c-blosc writes, and on damaged chunks, where both must fail or both return
//! the same bytes (a damaged chunk can still decode: checksums are the superchunk's job).
//! Item reads (`getitem`) decode only their blocks and must equal that part of the whole.

mod common;

use blz_format::blosc::{
    compress, decompress, decompress_into, decompress_to_vec, getitem, validate,
};
use blz_format::blosc::{Codec, CompressParams, Filter};
use proptest::prelude::*;

/// Data that compresses unevenly: runs, a slow ramp and noise, by `kind`.
fn data(len: usize, kind: u8, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match kind % 3 {
                0 => (i / 37) as u8,
                1 => ((i as f64 * 0.01).sin() * 100.0) as i8 as u8 ^ (x as u8 & 1),
                _ => x as u8,
            }
        })
        .collect()
}

/// c-blosc's answer: two threads send the chunk to c-blosc.
fn by_c_blosc(chunk: &[u8]) -> Result<Vec<u8>, String> {
    decompress(chunk, 2).map_err(|e| e.0)
}

fn by_blz(chunk: &[u8]) -> Result<Vec<u8>, String> {
    decompress(chunk, 1).map_err(|e| e.0)
}

/// Items `start .. start + count` of the chunk through `getitem`, in bytes.
fn items(chunk: &[u8], start: usize, count: usize) -> Result<Vec<u8>, String> {
    let ts = usize::from(validate(chunk).map_err(|e| e.0)?.typesize);
    let mut out = vec![0u8; count * ts];
    getitem(chunk, start * ts, &mut out).map_err(|e| e.0)?;
    Ok(out)
}

/// LZ4 at blz's default level with this typesize and filter.
fn lz4(typesize: usize, filter: Filter) -> CompressParams {
    CompressParams {
        codec: Codec::Lz4,
        typesize,
        filter,
        ..Default::default()
    }
}

fn params() -> impl Strategy<Value = CompressParams> {
    (
        prop::sample::select(vec![Codec::Lz4, Codec::Lz4hc, Codec::Blosclz]),
        0u8..=9,
        prop::sample::select(Filter::ALL.to_vec()),
        prop::sample::select(vec![1usize, 2, 3, 4, 8, 12, 16, 17, 32]),
        prop::sample::select(vec![0usize, 0, 128, 1000, 4096, 65536]),
    )
        .prop_map(
            |(codec, clevel, filter, typesize, blocksize)| CompressParams {
                codec,
                clevel,
                filter,
                typesize,
                blocksize,
                ..Default::default()
            },
        )
}

#[test]
fn every_lz4_layout_decodes_as_c_blosc_does() {
    // Chunks of whole and partial last blocks, split and unsplit blocks, every filter.
    for len in [0, 1, 7, 127, 128, 1023, 4096, 100_003, 1_048_576, 3_000_017] {
        for typesize in [1, 2, 4, 8, 16, 17] {
            for filter in Filter::ALL {
                let src = data(len, (len % 3) as u8, len as u64);
                let p = lz4(typesize, filter);
                let c = compress(&p, &src).unwrap();
                assert_eq!(by_blz(&c).unwrap(), src, "{p:?}, {len} bytes");
                assert_eq!(by_c_blosc(&c).unwrap(), src, "{p:?}, {len} bytes");
            }
        }
    }
}

#[test]
fn short_item_reads_of_every_layout_are_that_part_of_the_whole() {
    // Short reads of split, shuffled blocks gather their bytes from the decoded streams;
    // other layouts, and reads of more than 16 KiB of a block, unshuffle whole blocks. Reads
    // start at block edges, inside blocks and across them, in compressible data (1 MiB
    // blocks) and noise (128 KiB blocks), and in a leftover last block.
    for kind in [0u8, 1, 2] {
        for typesize in [1usize, 2, 3, 4, 8, 16, 17] {
            for filter in Filter::ALL {
                let len = 3_000_017 / typesize * typesize;
                let src = data(len, kind, typesize as u64);
                let p = lz4(typesize, filter);
                let c = compress(&p, &src).unwrap();
                let bs = validate(&c).unwrap().blocksize as usize / typesize;
                let nitems = len / typesize;
                let starts = [0, 1, bs - 1, bs, 2 * bs - 3, 5 * bs + 77, nitems - 40];
                for start in starts.into_iter().filter(|&s| s < nitems) {
                    for count in [1, 7, 40, 2100, 16 * 1024 / typesize + 1] {
                        let count = count.min(nitems - start);
                        let ts = typesize;
                        assert_eq!(
                            items(&c, start, count).unwrap(),
                            &src[start * ts..(start + count) * ts],
                            "{p:?} kind {kind}: items {start}+{count}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn into_a_slice_and_into_a_reused_vec() {
    let src = data(2_000_000, 1, 5);
    let c = compress(&CompressParams::default(), &src).unwrap();
    let mut out = vec![0xAA; src.len()];
    decompress_into(&c, &mut out, 1).unwrap();
    assert_eq!(out, src);
    let mut v = vec![1, 2, 3];
    decompress_to_vec(&c, &mut v, 1).unwrap();
    assert_eq!(v, src);
    // The wrong destination size is refused before anything is decoded.
    let mut short = vec![0u8; src.len() - 8];
    assert!(decompress_into(&c, &mut short, 1).is_err());
}

#[test]
fn a_broken_stream_is_an_error_naming_the_block() {
    let src = data(1_000_000, 1, 9);
    let mut c = compress(&CompressParams::default(), &src).unwrap();
    assert_eq!(validate(&c).unwrap().flags >> 5, 1, "an LZ4 chunk");
    // Zero the second half of the streams: the header and block table stay valid.
    let half = c.len() / 2;
    c[half..].fill(0);
    let e = by_blz(&c).unwrap_err();
    assert!(
        e.contains("corrupt LZ4 chunk") && e.contains("block"),
        "{e}"
    );
    assert!(by_c_blosc(&c).is_err());
}

#[test]
fn a_block_size_of_partial_items_goes_to_c_blosc() {
    // A header whose block size is not a whole number of items (c-blosc never writes one):
    // a split block would leave bytes unwritten, so blz hands it to c-blosc, which decides.
    let src = data(1_000_000, 0, 3);
    let c = compress(&CompressParams::default(), &src).unwrap();
    let blocksize = validate(&c).unwrap().blocksize;
    for delta in [1u32, 3, 7] {
        let mut odd = c.clone();
        odd[8..12].copy_from_slice(&(blocksize - delta).to_le_bytes());
        assert_eq!(
            by_blz(&odd),
            by_c_blosc(&odd),
            "block size {}",
            blocksize - delta
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..common::config(300)
    })]

    #[test]
    fn both_decoders_agree_on_any_chunk(
        p in params(),
        len in 0usize..300_000,
        kind in 0u8..3,
        seed in any::<u64>(),
    ) {
        let src = data(len, kind, seed);
        let c = compress(&p, &src).unwrap();
        prop_assert_eq!(by_blz(&c).unwrap(), src.clone());
        prop_assert_eq!(by_c_blosc(&c).unwrap(), src);
    }

    #[test]
    fn item_reads_are_that_part_of_the_whole(
        p in params(),
        len in 1usize..300_000,
        kind in 0u8..3,
        seed in any::<u64>(),
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
    ) {
        let src = data(len, kind, seed);
        let c = compress(&p, &src).unwrap();
        let nitems = len / p.typesize;
        prop_assume!(nitems > 0);
        let (i, j) = (a.index(nitems), b.index(nitems));
        let (start, end) = (i.min(j), i.max(j) + 1);
        let ts = p.typesize;
        prop_assert_eq!(items(&c, start, end - start).unwrap(), &src[start * ts..end * ts]);
    }

    #[test]
    fn item_reads_of_damaged_chunks_agree_with_c_blosc(
        p in params(),
        len in 1usize..200_000,
        seed in any::<u64>(),
        hits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        at in any::<prop::sample::Index>(),
    ) {
        let src = data(len, 1, seed);
        let mut c = compress(&p, &src).unwrap();
        for (i, byte) in hits {
            let i = i.index(c.len());
            c[i] = byte;
        }
        // Where c-blosc decodes the whole chunk, every block decodes: an item read must
        // succeed and give the same bytes. (Where it fails, a read of sound blocks may not.)
        if let Ok(whole) = by_c_blosc(&c) {
            let ts = usize::from(validate(&c).unwrap().typesize.max(1));
            let nitems = whole.len() / ts;
            if nitems > 0 {
                let start = at.index(nitems);
                let count = (nitems - start).min(100);
                prop_assert_eq!(
                    items(&c, start, count).unwrap(),
                    &whole[start * ts..(start + count) * ts]
                );
            }
        }
    }

    #[test]
    fn both_decoders_agree_on_damaged_chunks(
        p in params(),
        len in 1usize..200_000,
        kind in 0u8..3,
        seed in any::<u64>(),
        hits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let src = data(len, kind, seed);
        let mut c = compress(&p, &src).unwrap();
        for (at, byte) in hits {
            let i = at.index(c.len());
            c[i] = byte;
        }
        let (ours, theirs) = (by_blz(&c), by_c_blosc(&c));
        prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "blz {:?}, c-blosc {:?}", ours.as_ref().err(), theirs.as_ref().err());
        if let (Ok(a), Ok(b)) = (ours, theirs) {
            prop_assert_eq!(a, b);
        }
    }
}

/// Float64 data of the two kinds the small-read benchmark uses: a linspace (1 MiB blocks
/// of streams that compress ~20:1, which short reads walk back through their matches
/// instead of decoding) and a random walk (128 KiB blocks, raw and barely compressed
/// streams, decoded).
fn floats(kind: u8, n: usize) -> Vec<u8> {
    let mut z = 0x1234_5678u64;
    let mut acc = 0.0f64;
    (0..n)
        .flat_map(|i| {
            let v = if kind == 0 {
                (3_000_000 + i) as f64 * (1.0 / 19_999_999.0)
            } else {
                z = z
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                acc += (z >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                acc
            };
            v.to_le_bytes()
        })
        .collect()
}

#[test]
fn short_reads_of_float_data_are_that_part_of_the_whole() {
    for (kind, blocksize) in [(0u8, 1 << 20), (1, 128 << 10)] {
        let src = floats(kind, 1_000_000);
        let c = compress(&lz4(8, Filter::Shuffle), &src).unwrap();
        assert_eq!(validate(&c).unwrap().blocksize, blocksize, "kind {kind}");
        let mut x = 7u64 + u64::from(kind);
        let mut starts: Vec<usize> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 33) as usize % 1_000_000
            })
            .collect();
        // The edges of blocks, where a read spans two of them, and the chunk's ends.
        let per = blocksize as usize / 8;
        starts.extend([0, per - 50, per - 1, per, 3 * per - 99, 999_900, 999_999]);
        for start in starts {
            for count in [1usize, 3, 100, 1000] {
                let count = count.min(1_000_000 - start);
                assert_eq!(
                    items(&c, start, count).unwrap(),
                    &src[start * 8..(start + count) * 8],
                    "kind {kind}: items {start}+{count}"
                );
            }
        }
    }
}
