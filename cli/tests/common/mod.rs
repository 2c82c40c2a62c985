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
