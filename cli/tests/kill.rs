//! Kills of real `blz` processes: every command that changes a dataset is started as a user
//! would start it and killed (SIGKILL or SIGTERM, alternately) after a random delay within
//! the time a clean run takes. Afterwards the dataset must hold exactly the state before the
//! command or the state after it, read through the library as the next user would read it;
//! a killed `create` must leave nothing that opens, and the same command run again must work.
//!
//! The delays come from a fixed seed, so CI is repeatable in what it tries (timing still
//! varies; the assertion holds for any timing). `BLZ_KILL_TRIALS=200 cargo test --release
//! --test kill -- --nocapture` runs a long soak and prints the states seen per command.

mod common;

use blz::layer::Layer;
use blz::table::Table;
use blz::Dataset;
use common::{copy_dir, raw_npy, walk};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a dataset holds, as the next reader sees it.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Nothing at the path opens as a dataset.
    Absent,
    /// An array: shape, its elements' bytes, attributes.
    Array(
        Vec<u64>,
        Vec<u8>,
        serde_json::Map<String, serde_json::Value>,
    ),
    /// A table: rows, every column's values, attributes.
    Table(
        u64,
        Vec<(String, blz::table::Values)>,
        serde_json::Map<String, serde_json::Value>,
    ),
    /// A layer dataset that verifies: its description.
    Layer(serde_json::Value),
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Array,
    Table,
    Layer,
}

fn state(path: &Path, kind: Kind) -> State {
    match kind {
        Kind::Array => match Dataset::open(path) {
            Err(_) => State::Absent,
            Ok(ds) => {
                let errors = ds.verify(|_, _| {});
                assert!(errors.is_empty(), "{}: {errors:?}", path.display());
                let sel = ds.resolve(&[]).unwrap();
                State::Array(
                    ds.shape().to_vec(),
                    ds.read_bytes(&sel).unwrap(),
                    ds.attrs().unwrap(),
                )
            }
        },
        Kind::Table => match Table::open(path) {
            Err(_) => State::Absent,
            Ok(t) => {
                let errors = t.verify(|_, _| {});
                assert!(errors.is_empty(), "{}: {errors:?}", path.display());
                let cols = t
                    .column_names()
                    .into_iter()
                    .map(|n| (n.to_string(), t.column(n).unwrap()))
                    .collect();
                State::Table(t.nrows(), cols, t.attrs().unwrap())
            }
        },
        Kind::Layer => match Layer::open(path) {
            Err(_) => State::Absent,
            Ok(l) => {
                let errors = l.verify();
                assert!(errors.is_empty(), "{}: {errors:?}", path.display());
                let mut info = l.info();
                if let Some(o) = info.as_object_mut() {
                    o.remove("path");
                }
                State::Layer(info)
            }
        },
    }
}

/// A small deterministic generator for the kill delays.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn trials() -> u32 {
    std::env::var("BLZ_KILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

fn blz(work: &Path, args: &[String]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_blz"));
    c.args(args)
        .current_dir(work)
        // Small batches, so that a kill lands between them as it would in a large input.
        .env("BLZ_BATCH_BYTES", "262144")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// One command under test: `prepare` makes the starting directory (inputs and, except for
/// creates, the dataset `ds` inside it); `args` is the command line run in that directory.
struct Scenario {
    name: &'static str,
    kind: Kind,
    prepare: fn(&Path),
    args: &'static [&'static str],
}

/// Runs the scenario's command to completion in a copy of `base`; returns the state after
/// and how long it took.
fn clean_run(s: &Scenario, base: &Path, scratch: &Path) -> (State, Duration) {
    let dir = scratch.join("clean");
    copy_dir(base, &dir);
    let args: Vec<String> = s.args.iter().map(|a| a.to_string()).collect();
    let t = Instant::now();
    let status = blz(&dir, &args).status().unwrap();
    let took = t.elapsed();
    assert!(status.success(), "{}: the clean run failed", s.name);
    (state(&dir.join("ds"), s.kind), took)
}

fn kill_scenario(s: &Scenario) {
    let scratch = tempfile::tempdir().unwrap();
    let base = scratch.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    (s.prepare)(&base);
    let old = state(&base.join("ds"), s.kind);
    let (new, took) = clean_run(s, &base, scratch.path());
    // (A compaction changes the files, not what they hold.)
    assert!(
        old != new || s.name == "compact",
        "{}: the command changed nothing",
        s.name
    );
    let args: Vec<String> = s.args.iter().map(|a| a.to_string()).collect();
    let mut rng = SplitMix(common::SEED ^ s.name.len() as u64);
    let (mut saw_old, mut saw_new) = (0, 0);
    let window = took.as_micros() as u64 + 1;
    for i in 0..trials() {
        let dir = scratch.path().join(format!("t{i}"));
        copy_dir(&base, &dir);
        let mut child = blz(&dir, &args).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % window));
        let signal = if i % 2 == 0 {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        // SAFETY: `child` has not been waited for, so its pid still names it.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        child.wait().unwrap();
        let got = state(&dir.join("ds"), s.kind);
        if got == old {
            saw_old += 1;
            // What was interrupted can be done again.
            let status = blz(&dir, &args).status().unwrap();
            assert!(status.success(), "{} trial {i}: the re-run failed", s.name);
            assert_eq!(
                state(&dir.join("ds"), s.kind),
                new,
                "{} trial {i}: the re-run gave another state",
                s.name
            );
            // Nothing of the killed run is left: its staging directory (and a sorting
            // build's runs in it) went with the re-run.
            let left: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp-build"))
                .collect();
            assert!(left.is_empty(), "{} trial {i}: left {left:?}", s.name);
        } else if got == new {
            saw_new += 1;
        } else {
            panic!(
                "{} trial {i} (signal {signal}): the dataset holds neither the old nor the new state",
                s.name
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "{}: {} kills, old state {saw_old}, new state {saw_new} (clean run {took:?})",
        s.name,
        saw_old + saw_new
    );
}

// ---------------------------------------------------------------------------------------------
// Inputs

const ROWS: usize = 2_000_000;

fn write_npy(dir: &Path, name: &str, n: usize) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, raw_npy("<f8", &format!("({n},)"), &walk(n))).unwrap();
    p
}

fn write_csv(dir: &Path, name: &str, n: usize, from: usize) {
    use std::fmt::Write;
    let mut s = String::from("id,price,sym\n");
    for i in from..from + n {
        writeln!(s, "{i},{}.25,s{}", i % 977, i % 13).unwrap();
    }
    std::fs::write(dir.join(name), s).unwrap();
}

fn run_ok(dir: &Path, args: &[&str]) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = blz(dir, &args).stderr(Stdio::piped()).output().unwrap();
    assert!(
        out.status.success(),
        "blz {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn npy_input(dir: &Path) {
    write_npy(dir, "big.npy", ROWS);
}

fn array(dir: &Path) {
    write_npy(dir, "start.npy", 100_003);
    write_npy(dir, "big.npy", ROWS);
    run_ok(
        dir,
        &["create", "ds", "--npy", "start.npy", "--chunkshape", "8192"],
    );
}

fn csv_input(dir: &Path) {
    write_csv(dir, "rows.csv", ROWS / 4, 0);
}

fn table(dir: &Path) {
    write_csv(dir, "start.csv", 10_001, 0);
    write_csv(dir, "rows.csv", ROWS / 4, 10_001);
    run_ok(dir, &["create", "ds", "--csv", "start.csv"]);
}

fn layer_input(dir: &Path) {
    use std::fmt::Write;
    let mut s = String::new();
    for a in 0..300 {
        for b in 0..400 {
            writeln!(s, "{a},{}", b * 3).unwrap();
        }
    }
    std::fs::write(dir.join("sorted.csv"), s).unwrap();
}

fn bcolz_input(dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bcolz");
    copy_dir(&fixtures.join("appended_trimmed"), &dir.join("in.bcolz"));
}

// ---------------------------------------------------------------------------------------------
// The commands

#[test]
fn killed_create_from_npy() {
    kill_scenario(&Scenario {
        name: "create --npy",
        kind: Kind::Array,
        prepare: npy_input,
        args: &["create", "ds", "--npy", "big.npy", "--chunkshape", "8192"],
    });
}

#[test]
fn killed_create_from_csv_column() {
    kill_scenario(&Scenario {
        name: "create --csv --column",
        kind: Kind::Array,
        prepare: csv_input,
        args: &["create", "ds", "--csv", "rows.csv", "--column", "price"],
    });
}

#[test]
fn killed_create_of_a_table() {
    kill_scenario(&Scenario {
        name: "create table --csv",
        kind: Kind::Table,
        prepare: csv_input,
        args: &["create", "ds", "--csv", "rows.csv"],
    });
}

#[test]
fn killed_create_with_overwrite() {
    kill_scenario(&Scenario {
        name: "create --overwrite",
        kind: Kind::Array,
        prepare: array,
        args: &[
            "create",
            "ds",
            "--npy",
            "big.npy",
            "--chunkshape",
            "4096",
            "--overwrite",
        ],
    });
}

#[test]
fn killed_append_from_npy() {
    kill_scenario(&Scenario {
        name: "append --npy",
        kind: Kind::Array,
        prepare: array,
        args: &["append", "ds", "--npy", "big.npy"],
    });
}

#[test]
fn killed_append_to_a_table() {
    kill_scenario(&Scenario {
        name: "append table --csv",
        kind: Kind::Table,
        prepare: table,
        args: &["append", "ds", "--csv", "rows.csv"],
    });
}

#[test]
fn killed_resize() {
    kill_scenario(&Scenario {
        name: "resize (grow)",
        kind: Kind::Array,
        prepare: array,
        args: &["resize", "ds", "900000"],
    });
    kill_scenario(&Scenario {
        name: "resize (shrink)",
        kind: Kind::Array,
        prepare: array,
        args: &["resize", "ds", "12345"],
    });
}

#[test]
fn killed_attrs() {
    kill_scenario(&Scenario {
        name: "attrs --set",
        kind: Kind::Array,
        prepare: array,
        args: &["attrs", "ds", "--set", "units=\"m\"", "--set", "n=3"],
    });
}

#[test]
fn killed_compact() {
    fn modified(dir: &Path) {
        array(dir);
        // Rewrite every tenth chunk with other values so the files hold dead space.
        let mut ds = Dataset::open_rw(dir.join("ds")).unwrap();
        for k in (0..12u64).map(|k| k * 8192) {
            let v = ndarray::Array1::<f64>::from_elem(5000, k as f64);
            ds.write_slice(
                ndarray::s![k as isize..k as isize + 5000],
                &v.into_dyn().view(),
            )
            .unwrap();
        }
    }
    kill_scenario(&Scenario {
        name: "compact",
        kind: Kind::Array,
        prepare: modified,
        args: &["compact", "ds"],
    });
}

#[test]
fn killed_import() {
    kill_scenario(&Scenario {
        name: "import",
        kind: Kind::Array,
        prepare: bcolz_input,
        args: &["import", "in.bcolz", "ds"],
    });
}

#[test]
fn killed_layer_build() {
    kill_scenario(&Scenario {
        name: "layer build",
        kind: Kind::Layer,
        prepare: layer_input,
        args: &[
            "layer",
            "build",
            "sorted.csv",
            "ds",
            "--columns",
            "a:int64,b:int64",
            "--chunklen",
            "1024",
        ],
    });
}

/// Weighted key paths in no order, with repeats and weights that cancel: input for
/// `blz layer build --sort`.
fn unsorted_layer_input(dir: &Path) {
    use std::fmt::Write;
    let mut s = String::new();
    let mut x = 1u64;
    for i in 0..300_000u64 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let a = (x >> 33) % 2000;
        let b = (x >> 13) % 50;
        let w = if i % 4 == 0 { -1 } else { 1 };
        writeln!(s, "{a},{b},{w}").unwrap();
    }
    std::fs::write(dir.join("unsorted.csv"), s).unwrap();
}

#[test]
fn killed_layer_build_sort() {
    kill_scenario(&Scenario {
        name: "layer build --sort",
        kind: Kind::Layer,
        prepare: unsorted_layer_input,
        args: &[
            "layer",
            "build",
            "unsorted.csv",
            "ds",
            "--columns",
            "a:int64,b:int64",
            "--weight",
            "w:int64",
            "--sort",
            "--sort-memory",
            "1M",
        ],
    });
}

/// Two weighted layer datasets to merge, and an existing one at `ds` that the merge
/// replaces (`--overwrite`): a killed merge leaves the old `ds` or the merged one.
fn layers_to_merge(dir: &Path) {
    use std::fmt::Write;
    for (name, from, sign) in [("a", 0, 1i64), ("b", 150, -1)] {
        let mut s = String::new();
        for a in from..from + 300 {
            for b in 0..200 {
                writeln!(s, "{a},{},{}", b * 3, sign * (1 + (a + b) as i64 % 3)).unwrap();
            }
        }
        std::fs::write(dir.join(format!("{name}.csv")), s).unwrap();
        run_ok(
            dir,
            &[
                "layer",
                "build",
                &format!("{name}.csv"),
                name,
                "--columns",
                "a:int64,b:int64",
                "--weight",
                "w:int64",
                "--chunklen",
                "1024",
            ],
        );
    }
    std::fs::write(dir.join("old.csv"), "1,1,1\n2,2,2\n").unwrap();
    run_ok(
        dir,
        &[
            "layer",
            "build",
            "old.csv",
            "ds",
            "--columns",
            "a:int64,b:int64",
            "--weight",
            "w:int64",
        ],
    );
}

#[test]
fn killed_layer_merge() {
    kill_scenario(&Scenario {
        name: "layer merge",
        kind: Kind::Layer,
        prepare: layers_to_merge,
        args: &["layer", "merge", "a", "b", "-o", "ds", "--overwrite"],
    });
}
