//! Quick end-to-end checks of N-d datasets: create, append, slice, modify, reopen.

use blz::{CreateOptions, DType, Dataset};
use ndarray::{s, Array1, Array2, ArrayD};

#[test]
fn one_d_append_read_modify_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
    let a = Array1::linspace(0.0, 1.0, 12_345);
    ds.append(&a.view().into_dyn()).unwrap();
    ds.append(&a.view().into_dyn()).unwrap();
    assert_eq!(ds.shape(), &[24_690]);
    let all: ArrayD<f64> = ds.read().unwrap();
    assert_eq!(all.slice(s![..12_345]), a.view());
    assert_eq!(all.slice(s![12_345..]), a.view());
    let part = ds.slice::<f64, _>(s![100..200;7]).unwrap();
    assert_eq!(part, a.slice(s![100..200;7]).into_dyn());
    let rev = ds.slice::<f64, _>(s![0..50;-3]).unwrap();
    assert_eq!(rev, a.slice(s![0..50;-3]).into_dyn());
    assert_eq!(ds.get::<f64>(&[12_346]).unwrap(), a[1]);
    ds.write_slice(s![5..15], &Array1::from_elem(10, -1.0).into_dyn().view())
        .unwrap();
    assert_eq!(ds.get::<f64>(&[7]).unwrap(), -1.0);
    ds.resize(5_000).unwrap();
    assert_eq!(ds.nfiles(), 2);
    ds.resize(6_000).unwrap();
    assert_eq!(ds.get::<f64>(&[5_500]).unwrap(), 0.0);
    drop(ds);
    let ds = Dataset::open(&p).unwrap();
    assert_eq!(ds.shape(), &[6_000]);
    assert_eq!(ds.get::<f64>(&[4_999]).unwrap(), a[4_999]);
    assert_eq!(ds.get::<f64>(&[5_000]).unwrap(), 0.0);
    assert!(ds.verify(|_, _| {}).is_empty());
    assert_eq!(ds.sizes().nbytes, 6_000 * 8);
}

#[test]
fn two_d() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![7, 4]),
        superchunksize: Some(5),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I32, &[0, 10], &opts).unwrap();
    let a = Array2::from_shape_fn((23, 10), |(i, j)| (i * 100 + j) as i32);
    ds.append(&a.view().into_dyn()).unwrap();
    ds.append(&a.view().into_dyn()).unwrap();
    let all = ds.read::<i32>().unwrap();
    assert_eq!(all.slice(s![23.., ..]), a.view());
    let sub = ds.slice::<i32, _>(s![3..40;5, 2..9;3]).unwrap();
    let mut model = ndarray::concatenate(ndarray::Axis(0), &[a.view(), a.view()]).unwrap();
    assert_eq!(sub, model.slice(s![3..40;5, 2..9;3]).into_dyn());
    let patch = Array2::from_elem((3, 4), -5);
    ds.write_slice(s![10..16;2, 1..5], &patch.view().into_dyn())
        .unwrap();
    model.slice_mut(s![10..16;2, 1..5]).assign(&patch);
    assert_eq!(ds.read::<i32>().unwrap(), model.into_dyn());
}

#[test]
fn default_chunks_are_sized_for_growth() {
    let dir = tempfile::tempdir().unwrap();
    // Empty at creation, no expected length: chunks take the full default budget.
    let ds = Dataset::create(dir.path().join("e"), DType::F64, &[0]).unwrap();
    assert_eq!(ds.chunkshape()[0] * 8, blz::array::DEFAULT_CHUNK_BYTES);
    let ds = Dataset::create(dir.path().join("m"), DType::U8, &[0, 1000, 1000]).unwrap();
    let bytes: u64 = ds.chunkshape().iter().product();
    assert!(
        (blz::array::DEFAULT_CHUNK_BYTES / 2..=blz::array::DEFAULT_CHUNK_BYTES).contains(&bytes)
    );
    // A small expected length gives small chunks, but not tiny ones: the dataset may still
    // grow, and chunks of a few bytes would each cost a header, a digest and an offset.
    let opts = CreateOptions {
        expectedlen: Some(100),
        ..Default::default()
    };
    let ds = Dataset::create_with(dir.path().join("s"), DType::I32, &[0], &opts).unwrap();
    assert_eq!(ds.chunkshape(), &[16_384]);
    assert_eq!(ds.chunkshape()[0] * 4, blz::array::MIN_DEFAULT_CHUNK_BYTES);
    // Created from one value, then appended to: a handful of chunks, not one per value.
    let mut ds = Dataset::create(dir.path().join("one"), DType::F64, &[1]).unwrap();
    let more = ndarray::Array1::from_iter((0..100_000).map(f64::from)).into_dyn();
    ds.append(&more.view()).unwrap();
    assert!(ds.nchunks() <= 13, "{} chunks", ds.nchunks());
    let t = blz::table::Table::create(
        dir.path().join("t"),
        vec![blz::table::Field::new("a", DType::U32)],
        &Default::default(),
    )
    .unwrap();
    assert!(t.leaves()[0].storage.chunklen >= 65_536);
}

/// A write whose chunks are all decoded and re-encoded in parallel stops at a corrupt
/// chunk in its middle with an error naming the file and the chunk, and leaves the dataset
/// exactly as it was committed.
#[test]
fn write_stops_at_a_corrupt_chunk_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I64, &[0], &opts).unwrap();
    let a = Array1::from_shape_fn(20_000, |i| i as i64 * 3);
    ds.append(&a.view().into_dyn()).unwrap();
    drop(ds);
    // Chunk 13 is chunk 1 of the fourth file.
    let file = p.join("data").join("__4__.bin");
    let r = blz_format::blpk::SuperchunkReader::open(
        blz::storage::local()
            .open(&file, blz::storage::OpenMode::Read)
            .unwrap(),
    )
    .unwrap();
    let info = r.chunk_info(1).unwrap();
    drop(r);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[(info.offset + 16 + u64::from(info.header.cbytes - 16) / 2) as usize] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();

    let mut ds = Dataset::open_rw(&p).unwrap();
    // Every second element of every chunk: each chunk is read back before it is re-encoded.
    let patch = Array1::from_elem(10_000, -1i64);
    let err = ds
        .write_slice(s![0..20_000;2], &patch.view().into_dyn())
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("__4__.bin"), "{msg}");
    assert!(msg.contains("chunk 1"), "{msg}");
    drop(ds);
    // Chunks re-encoded before the error may have gone to free space past the committed
    // bytes; the committed bytes themselves are untouched.
    let after = std::fs::read(&file).unwrap();
    assert!(
        after.len() >= bytes.len() && after[..bytes.len()] == bytes[..],
        "committed bytes of the corrupt file changed"
    );
    let ds = Dataset::open(&p).unwrap();
    assert_eq!(ds.shape(), &[20_000]);
    let bad = ds.verify(|_, _| {});
    assert_eq!(bad.len(), 1, "{bad:?}");
    for k in (0..20).filter(|&k| k != 13) {
        let r = k * 1000..(k + 1) * 1000;
        let got = ds.slice::<i64, _>(s![r.clone()]).unwrap();
        assert_eq!(got, a.slice(s![r]).into_dyn(), "chunk {k} changed");
    }
}

#[test]
fn read_into_a_callers_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("into.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![7, 3]),
        endianness: blz::Endianness::Big,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I32, &[0, 5], &opts).unwrap();
    let a = Array2::from_shape_fn((40, 5), |(i, j)| (i * 5 + j) as i32);
    ds.append(&a.view().into_dyn()).unwrap();
    let sel = ds
        .resolve(&[
            ndarray::SliceInfoElem::Slice {
                start: 3,
                end: Some(30),
                step: -4,
            },
            ndarray::SliceInfoElem::Index(2),
        ])
        .unwrap();
    let mut out = vec![0u8; 7 * 4];
    ds.read_into(&sel, &mut out).unwrap();
    let got: Vec<i32> = out
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    // Positions come in ascending order: the reversed axis is delivered un-reversed.
    let mut want: Vec<i32> = a.slice(s![3..30;-4, 2]).iter().copied().collect();
    want.reverse();
    assert_eq!(got, want);
    // A buffer of the wrong size is refused, not overrun.
    assert!(ds.read_into(&sel, &mut [0u8; 27]).is_err());
}

/// Short reads of chunks a handle has already verified read only the Blosc blocks they need:
/// many random runs, each read twice through one handle (the first reads and verifies the
/// whole chunk, the second only its blocks), across block boundaries, for compressed chunks,
/// chunks stored as is (clevel 0) and chunks without digests; and a chunk rewritten by
/// another handle is read anew, not from what the first handle verified before.
#[test]
fn short_reads_of_verified_chunks_match_the_data() {
    use blz::blosc::Codec;
    use blz::blpk::Checksum;
    let dir = tempfile::tempdir().unwrap();
    let n = 400_000usize;
    let data: Vec<f64> = (0..n)
        .map(|i| ((i as f64) * 0.37).sin() * 1000.0 + (i % 97) as f64)
        .collect();
    for (name, clevel, checksum) in [
        ("lz4", 5, Checksum::Crc32),
        ("stored", 0, Checksum::Sha256),
        ("nodigest", 5, Checksum::None),
    ] {
        let p = dir.path().join(name);
        let mut opts = CreateOptions {
            chunkshape: Some(vec![100_000]),
            checksum,
            slack: 4096,
            ..Default::default()
        };
        opts.compression.codec = Codec::Lz4;
        opts.compression.clevel = clevel;
        opts.compression.blocksize = 8192;
        let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
        ds.append(&Array1::from(data.clone()).into_dyn().view())
            .unwrap();
        let mut reader = Dataset::open(&p).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let start = (x % n as u64) as usize;
            let len = 1 + ((x >> 32) % 3000) as usize;
            let end = (start + len).min(n);
            for _ in 0..2 {
                let got: ArrayD<f64> = reader.slice(s![start..end]).unwrap();
                assert_eq!(
                    got.as_slice().unwrap(),
                    &data[start..end],
                    "{name}: {start}..{end}"
                );
            }
        }
        if checksum != Checksum::None {
            // Damage in a block a short read does not need is still found: the first read of
            // a chunk through a handle checks the whole chunk's digest.
            let copy = dir.path().join(format!("{name}-damaged"));
            std::fs::create_dir_all(copy.join("data")).unwrap();
            std::fs::create_dir_all(copy.join("meta")).unwrap();
            for sub in ["data", "meta"] {
                for e in std::fs::read_dir(p.join(sub)).unwrap() {
                    let e = e.unwrap();
                    std::fs::copy(e.path(), copy.join(sub).join(e.file_name())).unwrap();
                }
            }
            let file = copy.join("data").join("__1__.bin");
            let r = blz_format::blpk::SuperchunkReader::open(
                blz::storage::local()
                    .open(&file, blz::storage::OpenMode::Read)
                    .unwrap(),
            )
            .unwrap();
            let info = r.chunk_info(0).unwrap();
            drop(r);
            let mut bytes = std::fs::read(&file).unwrap();
            bytes[(info.offset + u64::from(info.header.cbytes) - 3) as usize] ^= 0x55;
            std::fs::write(&file, bytes).unwrap();
            let err = Dataset::open(&copy)
                .unwrap()
                .slice::<f64, _>(s![0..10])
                .unwrap_err();
            assert!(
                matches!(err, blz::Error::ChecksumMismatch { .. }),
                "{name}: {err}"
            );
        }
        // Another handle rewrites part of chunk 1 in place (slack); the first handle's
        // reads say the dataset changed (they would show a commit it has not opened), and
        // once refreshed see the new values.
        ds.write_slice(
            s![150_000..150_010],
            &Array1::from_elem(10, -1.0f64).into_dyn().view(),
        )
        .unwrap();
        drop(ds);
        let stale = reader.slice::<f64, _>(s![149_995..150_015]).unwrap_err();
        assert!(
            matches!(stale, blz::Error::Changed { .. }),
            "{name}: {stale}"
        );
        assert!(reader.refresh().unwrap());
        let reader2 = Dataset::open(&p).unwrap();
        for r in [&reader, &reader2] {
            let got: ArrayD<f64> = r.slice(s![149_995..150_015]).unwrap();
            let mut want = data[149_995..150_015].to_vec();
            want[5..15].fill(-1.0);
            assert_eq!(
                got.as_slice().unwrap(),
                &want[..],
                "{name}: after a rewrite"
            );
        }
    }
}

#[test]
fn a_read_handle_refreshes_to_the_latest_commit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.blz");
    let mut w = Dataset::create_with(&p, DType::F64, &[0], &CreateOptions::default()).unwrap();
    w.append(&ndarray::arr1(&[1.0, 2.0]).into_dyn().view())
        .unwrap();
    let mut r = Dataset::open(&p).unwrap();
    assert!(!r.refresh().unwrap());
    w.append(&ndarray::arr1(&[3.0]).into_dyn().view()).unwrap();
    assert_eq!(r.shape(), &[2], "a handle shows one commit until refreshed");
    assert!(r.refresh().unwrap());
    assert_eq!(r.shape(), &[3]);
    assert_eq!(r.get::<f64>(&[2]).unwrap(), 3.0);
    assert!(!r.refresh().unwrap());
    w.resize(1).unwrap();
    assert!(r.refresh().unwrap());
    assert_eq!(r.shape(), &[1]);
    assert!(
        !w.refresh().unwrap(),
        "the writer has nothing to catch up with"
    );
    drop(w);
    // A new create of the path (same generation, another identity) is followed too.
    let opts = CreateOptions {
        overwrite: true,
        ..Default::default()
    };
    let mut w2 = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
    w2.append(&ndarray::arr1(&[9.0, 9.0, 9.0, 9.0]).into_dyn().view())
        .unwrap();
    assert!(r.refresh().unwrap());
    assert_eq!(r.shape(), &[4]);
    assert_eq!(r.get::<f64>(&[0]).unwrap(), 9.0);
    // Tables too.
    let tp = dir.path().join("t.blz");
    let mut tw = blz::Table::create(
        &tp,
        vec![blz::table::Field::new("a", DType::I32)],
        &Default::default(),
    )
    .unwrap();
    let mut tr = blz::Table::open(&tp).unwrap();
    tw.append(&[("a", blz::table::Values::from_slice(&[7i32, 8]))])
        .unwrap();
    assert_eq!(tr.nrows(), 0);
    assert!(tr.refresh().unwrap());
    assert_eq!(tr.nrows(), 2);
    assert!(!tr.refresh().unwrap());
}

/// With the block size left automatic, chunks of poorly compressible data get 128 KiB Blosc
/// blocks (a short read decodes one of them) and compressible chunks keep c-blosc's 1 MiB.
#[test]
fn automatic_block_sizes_follow_the_data() {
    use blz::storage::OpenMode;
    use blz_format::blosc::ChunkHeader;
    use blz_format::blpk::SuperchunkReader;
    let dir = tempfile::tempdir().unwrap();
    let n = 2_000_000usize;
    let mut acc = 0.0f64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let walk: Vec<f64> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            acc += (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            acc
        })
        .collect();
    let line: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 1e-7).collect();
    for (name, data, want) in [("walk", &walk, 131_072), ("line", &line, 1 << 20)] {
        let p = dir.path().join(name);
        let opts = CreateOptions {
            chunkshape: Some(vec![1_000_000]),
            ..Default::default()
        };
        let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
        ds.append(&Array1::from(data.clone()).into_dyn().view())
            .unwrap();
        let ds = Dataset::open(&p).unwrap();
        let file = blz::storage::local()
            .open(&ds.superchunk_path(0), OpenMode::Read)
            .unwrap();
        let r = SuperchunkReader::open(file).unwrap();
        for k in 0..2 {
            let h = ChunkHeader::parse(&r.read_chunk(k).unwrap()).unwrap();
            assert_eq!(h.blocksize, want, "{name} chunk {k}");
        }
        let got: ArrayD<f64> = ds.slice(s![1_234_567..1_234_667]).unwrap();
        assert_eq!(
            got.as_slice().unwrap(),
            &data[1_234_567..1_234_667],
            "{name}"
        );
    }
}

/// A dataset directory removed under an open handle: the handle's next read of a file it
/// had not opened is `NotFound` naming the dataset (nothing to reopen), not `Changed` nor
/// corruption.
#[test]
fn a_removed_dataset_reads_as_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("gone.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![100]),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I64, &[0], &opts).unwrap();
    ds.append(
        &Array1::from((0..1000i64).collect::<Vec<_>>())
            .into_dyn()
            .view(),
    )
    .unwrap();
    drop(ds);
    let reader = Dataset::open(&p).unwrap();
    std::fs::remove_dir_all(&p).unwrap();
    let e = reader.read::<i64>().unwrap_err();
    assert!(
        matches!(&e, blz::Error::Io { path, source, .. }
            if source.kind() == std::io::ErrorKind::NotFound && path == &p),
        "{e:?}"
    );
    assert!(e.to_string().contains("removed"), "{e}");
    // A refresh (what the Python package does before every read) finds nothing to reopen:
    // not found as well, not a "corrupt" dataset; and so does opening the path again.
    let mut reader = reader;
    for e in [
        reader.refresh().unwrap_err(),
        Dataset::open(&p).map(drop).unwrap_err(),
    ] {
        assert!(
            matches!(&e, blz::Error::Io { path, source, .. }
                if source.kind() == std::io::ErrorKind::NotFound && path == &p),
            "{e:?}"
        );
    }
}

#[test]
fn numpy_selections_and_new_axes() {
    use blz::selection::{Item, Selection};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("n.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![4, 3]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I32, &[0, 5], &opts).unwrap();
    let a = Array2::from_shape_fn((11, 5), |(i, j)| (i * 5 + j) as i32);
    ds.append(&a.view().into_dyn()).unwrap();
    // numpy: a[None, 9:-100:-4, ..., -2] == [[48, 28, 8]] (rows 9, 5, 1 of column 3)
    let sel = Selection::new(vec![
        Item::NewAxis,
        Item::Slice {
            start: Some(9),
            stop: Some(-100),
            step: Some(-4),
        },
        Item::Ellipsis,
        Item::Index(-2),
    ]);
    let got = ds.read_selection::<i32>(&sel).unwrap();
    assert_eq!(got.shape(), &[1, 3]);
    assert_eq!(got.iter().copied().collect::<Vec<_>>(), [48, 28, 8]);
    // The same through ndarray's s![] (ndarray's meaning: 1..10;-4 is 9, 5, 1).
    let nd = ds
        .slice::<i32, _>(s![ndarray::NewAxis, 1..10;-4, 3])
        .unwrap();
    assert_eq!(nd, got);
    // Checked in one place: an index outside its axis, too many indices.
    let oob = |sel: Selection| {
        matches!(
            ds.read_selection::<i32>(&sel),
            Err(blz::Error::OutOfBounds { .. })
        )
    };
    assert!(oob(Selection::new(vec![Item::Index(11)])));
    assert!(oob(Selection::parse("0,0,0").unwrap()));
    assert!(oob(Selection::parse("...,-6").unwrap()));
    // Slices clamp, as in numpy.
    let all = ds
        .read_selection::<i32>(&Selection::parse("-100:100").unwrap())
        .unwrap();
    assert_eq!(all, a.into_dyn());
}
