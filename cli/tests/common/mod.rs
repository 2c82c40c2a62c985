//! The shared test helpers (`tests/common/mod.rs` at the workspace root) and those that run
//! the `blz` binary as a user would, which only this package's tests can build
//! (`CARGO_BIN_EXE_blz` exists for the package that has the binary). Each test binary uses
//! its own subset, hence the `dead_code` allowance.

#![allow(
    dead_code,
    reason = "each test binary uses its own subset of these helpers"
)]

#[path = "../../../tests/common/mod.rs"]
mod shared;

pub use shared::*;

use serde_json::Value;
use std::process::{Command, Output};

/// Runs the `blz` binary with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .output()
        .expect("blz runs")
}

/// Runs blz, expects success, returns stdout (which must be UTF-8).
pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "blz {args:?} failed ({:?}):\n{}{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap_or_else(|e| panic!("blz {args:?}: stdout: {e}"))
}

/// Runs blz, expects exit status `code`, a `blz: ` message and no panic; returns stderr.
pub fn fails_with(code: i32, args: &[&str]) -> String {
    let o = run(args);
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(code),
        "blz {args:?}: stdout {}\nstderr {err}",
        text(&o.stdout)
    );
    assert!(!err.contains("panicked"), "blz {args:?} panicked: {err}");
    assert!(err.starts_with("blz: "), "blz {args:?}: {err}");
    err
}

/// Runs blz, expects exit status 1, a `blz: ` message and no panic; returns stderr.
pub fn fails(args: &[&str]) -> String {
    fails_with(1, args)
}

/// Runs blz, expects success and JSON on stdout.
pub fn json_of(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("blz {args:?}: {e}: {out}"))
}

/// Runs `blz args` with 4 GiB of address space and `secs` seconds; returns (exit code,
/// stdout and stderr). A kill by a signal (an abort on allocation) or the deadline fails the test.
pub fn blz_within(secs: u64, args: &[&str]) -> (i32, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_blz"));
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("blz runs");
    // Read both pipes as the child writes them, so a long output cannot stall it.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let text = out.join().unwrap() + &err.join().unwrap();
            let code = status
                .code()
                .unwrap_or_else(|| panic!("blz {args:?} was killed ({status}): {text}"));
            assert!(!text.contains("panicked"), "blz {args:?} panicked: {text}");
            return (code, text);
        }
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("blz {args:?} still ran after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Sets `shape` in the `meta/sizes` of the dataset at `ds` as a writer would have written
/// it: a table's `nrows` follows `shape[0]`, and the byte counts follow the shape (an
/// array's `nbytes`; a table's per-column `nbytes` in proportion to its rows, and their
/// sum), so that what a test examines is the shape itself, not counts that disagree with
/// it (blz refuses those at open). Counts past `u64` are left as they were.
pub fn set_sizes_shape(ds: &std::path::Path, shape: Value) {
    let p = ds.join("meta/sizes");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let elems = |s: &Value| -> u128 {
        s.as_array()
            .unwrap()
            .iter()
            .map(|n| u128::from(n.as_u64().unwrap()))
            .product()
    };
    let (old, new) = (elems(&v["shape"]), elems(&shape));
    let scale = |n: &Value| -> Option<u64> {
        let n = u128::from(n.as_u64()?);
        if old == 0 {
            return None;
        }
        u64::try_from(n / old * new).ok()
    };
    v["shape"] = shape;
    if v.get("nrows").is_some() {
        v["nrows"] = v["shape"][0].clone();
        let mut total: Option<u64> = Some(0);
        if let Some(cols) = v["columns"].as_object_mut() {
            for c in cols.values_mut() {
                let n = scale(&c["nbytes"]);
                if let Some(n) = n {
                    c["nbytes"] = n.into();
                }
                total = total.zip(n).and_then(|(t, n)| t.checked_add(n));
            }
        }
        if let Some(t) = total {
            v["nbytes"] = t.into();
        }
    } else {
        // An array: its itemsize from the dtype in meta/storage (`int64`, `float32`,
        // `bool`, `complex128`: bits in the name).
        let storage: Value =
            serde_json::from_slice(&std::fs::read(ds.join("meta/storage")).unwrap()).unwrap();
        let dtype = storage["dtype"].as_str().unwrap();
        let bits: u128 = dtype
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(8);
        let itemsize = bits / 8;
        if let Some(n) = new
            .checked_mul(itemsize)
            .and_then(|n| u64::try_from(n).ok())
        {
            v["nbytes"] = n.into();
        }
    }
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}
