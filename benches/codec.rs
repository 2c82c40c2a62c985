//! Throughput of blz's chunk codec and superchunk files, against c-blosc called directly.
//!
//! Run with `cargo bench --bench codec`; see `benches/README.md` for the figures.
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented function"
)]

use blz::storage::{LocalStorage, OpenMode, Storage};
use blz_format::blosc::{self, Codec, CompressParams, Filter};
use blz_format::blpk::{self, PackOptions, SuperchunkReader, WriterOptions};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::ffi::c_void;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

const N: usize = 1 << 20; // float64 values: 8 MiB

fn smooth() -> Vec<u8> {
    (0..N)
        .flat_map(|i| (i as f64 / (N - 1) as f64 * 1000.0).to_le_bytes())
        .collect()
}

fn random_walk() -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut x = 0.0f64;
    (0..N)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            x += (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            x.to_le_bytes()
        })
        .collect()
}

fn datasets() -> [(&'static str, Vec<u8>); 2] {
    [("smooth", smooth()), ("walk", random_walk())]
}

fn params(codec: Codec) -> CompressParams {
    CompressParams {
        codec,
        clevel: 5,
        filter: Filter::Shuffle,
        typesize: 8,
        blocksize: 0,
        nthreads: 1,
    }
}

fn raw_compress(p: &CompressParams, src: &[u8], dst: &mut [u8]) -> usize {
    let name: &[u8] = match p.codec {
        Codec::Lz4 => b"lz4\0",
        Codec::Zstd => b"zstd\0",
        _ => unreachable!(),
    };
    // SAFETY: `dst` has room for `src.len() + 16` bytes, so c-blosc never writes past it.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            5,
            blosc_src::BLOSC_SHUFFLE as i32,
            8,
            src.len(),
            src.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            dst.len(),
            name.as_ptr().cast(),
            0,
            1,
        )
    };
    assert!(n > 0);
    n as usize
}

fn raw_decompress(chunk: &[u8], dst: &mut [u8]) {
    // SAFETY: `chunk` is a chunk c-blosc wrote and `dst` is exactly its uncompressed size.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(
            chunk.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            dst.len(),
            1,
        )
    };
    assert_eq!(n as usize, dst.len());
}

/// (a) One 8 MiB chunk: blz_format::blosc against the raw c-blosc calls, same parameters, 1 thread.
fn chunk_codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("chunk");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (name, data) in datasets() {
        g.throughput(Throughput::Bytes(data.len() as u64));
        for codec in [Codec::Lz4, Codec::Zstd] {
            let p = params(codec);
            let id = |what: &str| BenchmarkId::new(what, format!("{name}/{codec}"));
            let mut out = Vec::new();
            g.bench_function(id("compress/blz"), |b| {
                b.iter(|| blosc::compress_into(&p, black_box(&data), &mut out).unwrap())
            });
            let mut raw = vec![0u8; data.len() + 16];
            g.bench_function(id("compress/c-blosc"), |b| {
                b.iter(|| raw_compress(&p, black_box(&data), &mut raw))
            });
            let chunk = blosc::compress(&p, &data).unwrap();
            let mut dst = vec![0u8; data.len()];
            g.bench_function(id("decompress/blz"), |b| {
                b.iter(|| blosc::decompress_into(black_box(&chunk), &mut dst, 1).unwrap())
            });
            g.bench_function(id("decompress/c-blosc"), |b| {
                b.iter(|| raw_decompress(black_box(&chunk), &mut dst))
            });
            if codec == Codec::Lz4 {
                g.bench_function(id("decompress/blz-new-vec"), |b| {
                    b.iter(|| blosc::decompress(black_box(&chunk), 1).unwrap())
                });
            }
        }
    }
    g.finish();
}

fn pack_opts(chunk_size: usize) -> PackOptions {
    PackOptions {
        chunk_size,
        blosc: params(Codec::Lz4),
        writer: WriterOptions::default(),
        app_chunks_factor: 10,
    }
}

fn pack_file(path: &Path, data: &[u8], chunk_size: usize) {
    let out = LocalStorage.open(path, OpenMode::Create).unwrap();
    blpk::pack(
        &mut &data[..],
        data.len() as u64,
        out,
        &pack_opts(chunk_size),
        |_| {},
    )
    .unwrap();
}

/// (b) Packing 8 MiB into a file and unpacking it again (lz4, adler32), with c-blosc's own
/// decompression of the same chunks from memory as the floor.
fn superchunk_files(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("superchunk");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (name, data) in datasets() {
        g.throughput(Throughput::Bytes(data.len() as u64));
        for chunk_size in [1 << 20, 256 << 10] {
            let tag = format!("{name}/{}KiB", chunk_size >> 10);
            let path = dir.path().join(format!("{name}-{chunk_size}.blp"));
            g.bench_function(BenchmarkId::new("pack", &tag), |b| {
                b.iter(|| pack_file(&path, &data, chunk_size))
            });
            pack_file(&path, &data, chunk_size);
            let reader =
                SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read).unwrap()).unwrap();
            g.bench_function(BenchmarkId::new("unpack", &tag), |b| {
                b.iter(|| blpk::unpack(&reader, &mut std::io::sink(), |_| {}).unwrap())
            });
            g.bench_function(BenchmarkId::new("unpack-1-thread", &tag), |b| {
                b.iter(|| {
                    one_thread
                        .install(|| blpk::unpack(&reader, &mut std::io::sink(), |_| {}).unwrap())
                })
            });
            let chunks: Vec<Vec<u8>> = (0..reader.nchunks())
                .map(|k| reader.read_chunk(k).unwrap())
                .collect();
            let mut dst = vec![0u8; chunk_size];
            g.bench_function(BenchmarkId::new("c-blosc-decompress-1-thread", &tag), |b| {
                b.iter(|| {
                    for ch in &chunks {
                        let n = blosc::validate(ch).unwrap().nbytes as usize;
                        raw_decompress(ch, &mut dst[..n]);
                    }
                })
            });
        }
    }
    g.finish();
}

/// (c) Reading one random 64 KiB chunk from a 1-chunk file and from a 1000-chunk file.
fn random_chunk(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let data = random_walk();
    let chunk_size = 64 << 10;
    let mut g = c.benchmark_group("random-chunk");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Bytes(chunk_size as u64));
    for nchunks in [1usize, 1000] {
        let path = dir.path().join(format!("{nchunks}.blp"));
        let src: Vec<u8> = data
            .iter()
            .copied()
            .cycle()
            .take(nchunks * chunk_size)
            .collect();
        pack_file(&path, &src, chunk_size);
        let reader =
            SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read).unwrap()).unwrap();
        assert_eq!(reader.nchunks(), nchunks as u64);
        let mut dst = vec![0u8; chunk_size];
        let mut scratch = Vec::new();
        let mut state = 88172645463325252u64;
        g.bench_function(BenchmarkId::new("decompress_chunk_into", nchunks), |b| {
            b.iter(|| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let k = state % nchunks as u64;
                reader
                    .decompress_chunk_into(k, &mut dst, &mut scratch, 1)
                    .unwrap()
            })
        });
        if nchunks > 1 {
            // The same chunk every time: what the format costs, with the chunk's bytes hot
            // in the CPU caches as they are for a 1-chunk file.
            g.bench_function(BenchmarkId::new("same-chunk", nchunks), |b| {
                b.iter(|| {
                    reader
                        .decompress_chunk_into(nchunks as u64 / 2, &mut dst, &mut scratch, 1)
                        .unwrap()
                })
            });
        }
    }
    g.finish();
}

/// Fastest of `rounds` runs of `a` and of `b`, run alternately: on a shared, noisy machine
/// interference only ever adds time, so the minimum of interleaved runs gives a ratio that
/// criterion's medians (taken minutes apart) cannot.
fn min_pair(rounds: usize, a: &mut dyn FnMut(), b: &mut dyn FnMut()) -> (f64, f64) {
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    let (mut ta, mut tb) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        ta = ta.min(time(a));
        tb = tb.min(time(b));
    }
    (ta, tb)
}

fn report(what: &str, bytes: usize, (ta, tb): (f64, f64)) {
    let gib = |t: f64| bytes as f64 / t / (1u64 << 30) as f64;
    eprintln!(
        "ratio {what:<48} blz {:>7.3} ms ({:>6.2} GiB/s)  baseline {:>7.3} ms ({:>6.2} GiB/s)  blz/baseline {:.3}",
        ta * 1e3,
        gib(ta),
        tb * 1e3,
        gib(tb),
        ta / tb
    );
}

/// Interleaved min-of-N ratios of blz against its baselines, printed to stderr.
fn ratios(_c: &mut Criterion) {
    for (name, data) in datasets() {
        for codec in [Codec::Lz4, Codec::Zstd] {
            let p = params(codec);
            let rounds = if codec == Codec::Zstd { 7 } else { 25 };
            let mut out = Vec::new();
            let mut raw = vec![0u8; data.len() + 16];
            report(
                &format!("chunk compress {name}/{codec} vs c-blosc"),
                data.len(),
                min_pair(
                    rounds,
                    &mut || {
                        blosc::compress_into(&p, &data, &mut out).unwrap();
                    },
                    &mut || {
                        raw_compress(&p, &data, &mut raw);
                    },
                ),
            );
            let chunk = blosc::compress(&p, &data).unwrap();
            let mut dst = vec![0u8; data.len()];
            let mut dst2 = vec![0u8; data.len()];
            report(
                &format!("chunk decompress {name}/{codec} vs c-blosc"),
                data.len(),
                min_pair(
                    25,
                    &mut || blosc::decompress_into(&chunk, &mut dst, 1).unwrap(),
                    &mut || raw_decompress(&chunk, &mut dst2),
                ),
            );
        }
    }
    // Whole files, one thread: unpack (read, digest, validate, decompress, write to a sink)
    // against the least any reader of the format does: read each chunk's bytes and
    // decompress them with c-blosc, into reused buffers, no digest.
    let dir = tempfile::tempdir().unwrap();
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let walk64: Vec<u8> = random_walk().repeat(8);
    let cases = datasets()
        .into_iter()
        .chain([("walk-64MiB", walk64)])
        .flat_map(|(name, data)| {
            let sizes: &[usize] = if data.len() > N * 8 {
                &[1 << 20]
            } else {
                &[1 << 20, 256 << 10]
            };
            sizes
                .iter()
                .map(|&cs| (name, data.clone(), cs))
                .collect::<Vec<_>>()
        });
    for (name, data, chunk_size) in cases {
        {
            let path = dir.path().join("r.blp");
            pack_file(&path, &data, chunk_size);
            let file = LocalStorage.open(&path, OpenMode::Read).unwrap();
            let reader =
                SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read).unwrap()).unwrap();
            let infos: Vec<_> = (0..reader.nchunks())
                .map(|k| reader.chunk_info(k).unwrap())
                .collect();
            let mut cbuf = vec![0u8; chunk_size + 16 + 4];
            let mut dst = vec![0u8; chunk_size];
            for verify in [false, true] {
                report(
                    &format!(
                        "unpack {name}/{}KiB vs pread+{}c-blosc",
                        chunk_size >> 10,
                        if verify { "adler32+" } else { "" }
                    ),
                    data.len(),
                    // Both sides run on the pool's one thread, so that unpack's rayon calls run
                    // inline and neither side pays for waking another thread.
                    one_thread.install(|| {
                        min_pair(
                            25,
                            &mut || {
                                blpk::unpack(&reader, &mut std::io::sink(), |_| {}).unwrap();
                            },
                            &mut || {
                                for info in &infos {
                                    let n = info.header.cbytes as usize;
                                    let c = &mut cbuf[..n + 4];
                                    file.read_at(info.offset, c).unwrap();
                                    if verify {
                                        let d = blpk::Checksum::Adler32.digest(&c[..n]);
                                        assert_eq!(d.as_slice(), &c[n..]);
                                    }
                                    raw_decompress(
                                        &c[..n],
                                        &mut dst[..info.header.nbytes as usize],
                                    );
                                }
                            },
                        )
                    }),
                );
            }
        }
    }
}

criterion_group!(benches, ratios, chunk_codec, superchunk_files, random_chunk);
criterion_main!(benches);
