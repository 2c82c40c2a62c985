//! Readers beside a writer, all real `blz` processes: a writer shrinks, appends, compacts and
//! sets attributes in a loop while readers scan, verify and read. Every answer a reader gives
//! is one committed state (element `i` is `i` in every state the writer makes, so a sum must
//! be `n(n-1)/2` for the count it reports); `verify` never calls the dataset corrupt; a read
//! that meets a commit either retries (scan, verify) or says the dataset changed (get, exit
//! 75), never reports a missing file or corruption that is not there.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn blz(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .output()
        .unwrap()
}

/// `i..j` as a .npy of int64.
fn npy(dir: &Path, i: i64, j: i64) -> String {
    let p = dir.join(format!("r{i}.npy"));
    let data: Vec<u8> = (i..j).flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&p, common::raw_npy("<i8", &format!("({},)", j - i), &data)).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn readers_see_committed_states_while_a_writer_shrinks_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds.blz");
    let p = ds.to_str().unwrap().to_string();
    let out = blz(&[
        "create",
        &p,
        "--arange",
        "60000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "3",
        "--slack",
        "0",
    ]);
    assert!(out.status.success());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (p, stop, dir) = (p.clone(), stop.clone(), dir.path().to_path_buf());
        std::thread::spawn(move || {
            // Fixed sizes: shrink to a cut inside a file, append back past it, compact.
            let cuts = [17_500i64, 4_321, 29_999, 1_000, 45_678];
            let mut n = 60_000i64;
            let mut commits = 0;
            for round in 0.. {
                if stop.load(Ordering::SeqCst) && round >= cuts.len() {
                    break;
                }
                let cut = cuts[round % cuts.len()];
                let ok = |o: std::process::Output| {
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                };
                ok(blz(&["resize", &p, &cut.to_string()]));
                let more = npy(&dir, cut, n.max(cut + 10_000));
                ok(blz(&["append", &p, "--npy", &more]));
                n = n.max(cut + 10_000);
                ok(blz(&["compact", &p]));
                ok(blz(&["attrs", &p, "--set", &format!("round={round}")]));
                commits += 3;
            }
            commits
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                let mut changed = 0;
                while !stop.load(Ordering::SeqCst) {
                    let out = blz(&["scan", &p, "--op", "sum", "--json"]);
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    let err = String::from_utf8_lossy(&out.stderr).into_owned();
                    assert!(out.status.success(), "reader {r}: scan: {err}");
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let (sum, n) = (
                        v["value"].as_i64().unwrap(),
                        v["elements"].as_i64().unwrap(),
                    );
                    assert_eq!(
                        sum,
                        n * (n - 1) / 2,
                        "reader {r}: a torn state of {n} elements"
                    );
                    let out = blz(&["verify", &p]);
                    assert!(
                        out.status.success(),
                        "reader {r}: verify: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                    let out = blz(&["get", &p, "900:1100:50"]);
                    match out.status.code() {
                        Some(0) => {
                            let got = String::from_utf8_lossy(&out.stdout);
                            let want: Vec<String> = (900..1100)
                                .step_by(50)
                                .map(|i: i64| i.to_string())
                                .collect();
                            // (The shortest state holds 1000 elements: 900 and 950.)
                            let vals: Vec<&str> = got.split_whitespace().collect();
                            assert!(
                                vals.len() >= 2 && vals.iter().zip(&want).all(|(v, w)| v == w),
                                "reader {r}: get printed {got}"
                            );
                        }
                        Some(75) => changed += 1,
                        _ => panic!("reader {r}: get: {}", String::from_utf8_lossy(&out.stderr)),
                    }
                    reads += 3;
                }
                (reads, changed)
            })
        })
        .collect();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::SeqCst);
    let commits = writer.join().unwrap();
    let mut total = 0;
    for r in readers {
        let (reads, changed) = r.join().unwrap();
        total += reads;
        eprintln!("{reads} reads, {changed} told the dataset changed");
    }
    eprintln!("{commits} commits, {total} reads in {:?}", t.elapsed());
    assert!(
        commits >= 3 && total >= 6,
        "too little ran to tell anything"
    );
}
