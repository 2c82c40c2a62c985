//! Arbitrary bytes as one Blosc 1.x chunk: `validate`, `decompress` and `getitem` must return
//! an error or agree with each other (and blz's LZ4 decoder with c-blosc's), never crash or
//! read out of bounds.

#![no_main]

use blz_format::blosc;
use libfuzzer_sys::fuzz_target;

/// A chunk may legitimately claim up to 2 GiB; decompressing that much is not what this
/// target looks for, so larger chunks only go through `validate` and small `getitem`s.
const MAX_DECOMPRESS: u32 = 16 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = blosc::validate(data) else {
        return;
    };
    let full = if header.nbytes <= MAX_DECOMPRESS {
        blosc::decompress(data, 1).ok()
    } else {
        None
    };
    if let Some(full) = &full {
        assert_eq!(full.len(), header.nbytes as usize);
    }
    // blz decodes LZ4 chunks itself with one thread; two threads send any chunk to c-blosc.
    // Both must fail, or both return the same bytes.
    if header.nbytes <= MAX_DECOMPRESS {
        assert_eq!(full, blosc::decompress(data, 2).ok());
    }
    // A few item ranges, derived from the chunk's own bytes so the fuzzer can steer them
    // (getitem takes a byte offset: item i starts at byte i * ts).
    let ts = usize::from(header.typesize.max(1));
    let nitems = header.nbytes as usize / ts;
    if header.blocksize > MAX_DECOMPRESS || nitems == 0 {
        return;
    }
    let seed = data.iter().fold(0usize, |a, &b| {
        a.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    for (start, len) in [(0, 1), (nitems - 1, 1), (seed % nitems, 1 + seed % 97)] {
        let len = len.min(nitems - start);
        let mut out = vec![0u8; len * ts];
        if blosc::getitem(data, start * ts, &mut out).is_ok() {
            if let Some(full) = &full {
                assert_eq!(&out[..], &full[start * ts..(start + len) * ts]);
            }
        }
    }
    // Out-of-range requests are refused.
    let mut one = vec![0u8; ts];
    assert!(blosc::getitem(data, nitems * ts, &mut one).is_err());
});
