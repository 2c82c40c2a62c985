//! Staged writes (`blz::array::staged`): superchunk files written by other processes into a
//! session directory and committed once by the dataset's writer. Round trips (1-d, N-d, an
//! append to a partly filled last file, a create), all-or-nothing on every failure, retried
//! writes, cleanup of abandoned sessions, and kills of real processes: a worker killed
//! mid-write, and the committing writer killed between staging and commit and during the
//! commit.

mod common;

use blz::array::staged::{self, StagedWrite};
use blz::{CreateOptions, DType, Dataset, Error};
use common::{tree, Dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn opts(chunks: &[u64], superchunksize: u64) -> CreateOptions {
    CreateOptions {
        chunkshape: Some(chunks.to_vec()),
        superchunksize: Some(superchunksize),
        ..Default::default()
    }
}

/// `n` f64 values `offset..offset + n` as little-endian bytes.
fn values(offset: u64, n: u64) -> Vec<u8> {
    (offset..offset + n)
        .flat_map(|i| ((i as f64) * 0.5 - 3.0).to_le_bytes())
        .collect()
}

fn all_bytes(ds: &Dataset) -> Vec<u8> {
    let sel = ds.resolve(&[]).unwrap();
    ds.read_bytes(&sel).unwrap()
}

/// Writes every worker region of `s` (last first, as a parallel run may finish them) from
/// `data`, the bytes of all the dataset's rows after the write.
fn write_regions(s: &StagedWrite, data: &[u8], row_bytes: usize, units: u64) {
    for (start, rows) in s.regions(units).into_iter().rev() {
        let a = start as usize * row_bytes;
        let b = a + rows as usize * row_bytes;
        staged::write_rows(s.dir(), start, &data[a..b]).unwrap();
    }
}

fn head<'a>(s: &StagedWrite, data: &'a [u8], old: u64, row_bytes: usize) -> &'a [u8] {
    &data[old as usize * row_bytes..(old + s.head_rows()) as usize * row_bytes]
}

fn assert_no_sessions(root: &Path) {
    assert!(
        !root.join("staged").exists(),
        "{} still has sessions",
        root.display()
    );
}

#[test]
fn appends_to_a_partly_filled_file_through_workers() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts(&[100], 4)).unwrap();
    ds.append_bytes(&values(0, 150), 150).unwrap();
    let total = 150 + 2_345;
    let all = values(0, total);
    let s = ds.begin_staged(2_345).unwrap();
    assert_eq!(s.unit_rows(), 400);
    assert_eq!(s.head_rows(), 250);
    assert_eq!(s.worker_rows(), (400, total));
    assert!(s.dir().starts_with(p.join("staged")));
    write_regions(&s, &all, 8, 2);
    // Readers see nothing of the session before the commit.
    assert_eq!(Dataset::open(&p).unwrap().shape(), &[150]);
    let h = head(&s, &all, 150, 8).to_vec();
    ds.commit_staged(s, &h).unwrap();
    assert_eq!(ds.shape(), &[total]);
    assert_eq!(all_bytes(&ds), all);
    assert_no_sessions(&p);
    // The workers' files record their chunks' statistics too (values are i * 0.5 - 3).
    let stats = ds.chunk_stats().unwrap();
    assert_eq!(stats.len(), 25);
    for (k, s) in stats.iter().enumerate() {
        let s = s.unwrap_or_else(|| panic!("chunk {k}: no statistics"));
        let first = (k * 100) as f64 * 0.5 - 3.0;
        assert_eq!(s.min, Some(blz::StatValue::Float(first)), "chunk {k}");
    }
    drop(ds);
    let back = Dataset::open(&p).unwrap();
    assert_eq!(all_bytes(&back), all);
    assert!(back.verify(|_, _| {}).is_empty());
    assert_eq!(back.nfiles(), total.div_ceil(400));
    // cbytes counts the workers' files as the writer's own.
    let on_disk: u64 = (0..back.nfiles())
        .map(|f| std::fs::metadata(back.superchunk_path(f)).unwrap().len())
        .sum();
    assert!(back.sizes().cbytes > 0 && back.sizes().cbytes <= on_disk);
    // The dataset goes on as usual: a plain append fills the partly filled last file.
    let mut ds = Dataset::open_rw(&p).unwrap();
    ds.append_bytes(&values(total, 77), 77).unwrap();
    assert_eq!(all_bytes(&ds), values(0, total + 77));
}

#[test]
fn n_dimensional_files_span_whole_chunk_rows() {
    let d = Dir::new();
    let p = d.p("m.blz");
    // 3 chunks per chunk-row, 4 per file: a unit is 12 chunks, 4 chunk-rows, 40 rows.
    let mut ds = Dataset::create_with(&p, DType::F64, &[0, 7], &opts(&[10, 3], 4)).unwrap();
    ds.append_bytes(&values(0, 13 * 7), 13).unwrap();
    let total = 13 + 171;
    let all = values(0, total * 7);
    let s = ds.begin_staged(171).unwrap();
    assert_eq!(s.unit_rows(), 40);
    assert_eq!(s.head_rows(), 27);
    write_regions(&s, &all, 56, 1);
    let h = head(&s, &all, 13, 56).to_vec();
    ds.commit_staged(s, &h).unwrap();
    assert_eq!(ds.shape(), &[total, 7]);
    assert_eq!(all_bytes(&ds), all);
    assert!(ds.verify(|_, _| {}).is_empty());
}

#[test]
fn an_append_shorter_than_the_head_is_all_the_clients() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts(&[10], 4)).unwrap();
    ds.append_bytes(&values(0, 5), 5).unwrap();
    let s = ds.begin_staged(7).unwrap();
    assert_eq!(s.head_rows(), 7);
    assert!(s.regions(1).is_empty());
    ds.commit_staged(s, &values(5, 7)).unwrap();
    assert_eq!(all_bytes(&ds), values(0, 12));
}

#[test]
fn a_staged_create_appears_only_at_its_commit() {
    let d = Dir::new();
    let p = d.p("new.blz");
    let rows = 1_000;
    let all = values(0, rows);
    let c = Dataset::create_staged(
        blz::storage::local(),
        &p,
        DType::F64,
        &[],
        &opts(&[64], 2),
        rows,
    )
    .unwrap();
    let s = c.session().unwrap();
    assert_eq!(s.head_rows(), 0);
    write_regions(s, &all, 8, 3);
    assert!(!p.exists());
    let ds = c.commit().unwrap();
    assert_eq!(all_bytes(&ds), all);
    assert!(!d.p("new.blz.tmp-build").exists());
    assert_no_sessions(&p);

    // Dropped before its commit: nothing at the path, nothing beside it.
    let q = d.p("dropped.blz");
    let c = Dataset::create_staged(
        blz::storage::local(),
        &q,
        DType::F64,
        &[],
        &opts(&[64], 2),
        500,
    )
    .unwrap();
    write_regions(c.session().unwrap(), &values(0, 500), 8, 1);
    drop(c);
    assert!(!q.exists());
    assert!(!d.p("dropped.blz.tmp-build").exists());
}

/// Everything under the dataset but its lock file.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut t = tree(blz::storage::local().as_ref(), root);
    t.remove(Path::new("meta/lock"));
    t
}

#[test]
fn every_failure_leaves_the_dataset_as_it_was() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts(&[50], 2)).unwrap();
    ds.append_bytes(&values(0, 130), 130).unwrap();
    let before = files(&p);
    let all = values(0, 1_130);

    // A worker's region missing.
    let s = ds.begin_staged(1_000).unwrap();
    let regions = s.regions(1);
    for &(start, rows) in &regions[1..] {
        staged::write_rows(
            s.dir(),
            start,
            &all[start as usize * 8..(start + rows) as usize * 8],
        )
        .unwrap();
    }
    let dir = s.dir().to_path_buf();
    let h = head(&s, &all, 130, 8).to_vec();
    let e = ds.commit_staged(s, &h).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    assert!(!dir.exists());
    assert_eq!(files(&p), before);

    // A file that is not what its name says (another position's file).
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    let (a, b) = (s.dir().join("__3__.bin"), s.dir().join("__4__.bin"));
    std::fs::copy(&a, &b).unwrap();
    let h = head(&s, &all, 130, 8).to_vec();
    let e = ds.commit_staged(s, &h).unwrap_err();
    assert!(matches!(e, Error::InvalidHeader { .. }), "{e}");
    assert_eq!(files(&p), before);

    // A file of no position of the session.
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    std::fs::write(s.dir().join("__99__.bin"), b"x").unwrap();
    let h = head(&s, &all, 130, 8).to_vec();
    assert!(ds.commit_staged(s, &h).is_err());
    assert_eq!(files(&p), before);

    // A head of the wrong size.
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    assert!(matches!(
        ds.commit_staged(s, &[0u8; 8]),
        Err(Error::Mismatch { .. })
    ));
    assert_eq!(files(&p), before);

    // Aborted, and dropped.
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    ds.abort_staged(s).unwrap();
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    drop(s);
    assert_eq!(files(&p), before);

    // A session opened before another commit is refused.
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &all, 8, 1);
    ds.append_bytes(&values(130, 1), 1).unwrap();
    let h = head(&s, &all, 130, 8).to_vec();
    assert!(matches!(
        ds.commit_staged(s, &h),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(ds.shape(), &[131]);
}

#[test]
fn retried_writes_are_idempotent_and_late_ones_are_refused() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts(&[100], 3)).unwrap();
    let all = values(0, 1_000);
    let s = ds.begin_staged(1_000).unwrap();
    let (start, rows) = s.regions(1)[1];
    let region = &all[start as usize * 8..(start + rows) as usize * 8];
    let written = staged::write_rows(s.dir(), start, region).unwrap();
    assert_eq!(written, vec![1]);
    let first = std::fs::read(s.dir().join("__2__.bin")).unwrap();
    staged::write_rows(s.dir(), start, region).unwrap();
    assert_eq!(std::fs::read(s.dir().join("__2__.bin")).unwrap(), first);
    // Not a region: unaligned, or past the end.
    assert!(staged::write_rows(s.dir(), start + 100, region).is_err());
    assert!(staged::write_rows(s.dir(), 900, &all[..800 * 8]).is_err());
    write_regions(&s, &all, 8, 1);
    let dir = s.dir().to_path_buf();
    ds.commit_staged(s, &[]).unwrap();
    assert_eq!(all_bytes(&ds), all);
    let e = staged::write_rows(&dir, start, region).unwrap_err();
    assert!(e.to_string().contains("committed or abandoned"), "{e}");
    assert!(!dir.exists());
}

#[test]
fn the_next_writer_removes_abandoned_sessions_and_readers_ignore_them() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts(&[100], 2)).unwrap();
    ds.append_bytes(&values(0, 250), 250).unwrap();
    let before = files(&p);
    let s = ds.begin_staged(1_000).unwrap();
    write_regions(&s, &values(0, 1_250), 8, 1);
    // The writer goes away without dropping the session (as a killed process would).
    std::mem::forget(s);
    drop(ds);
    let r = Dataset::open(&p).unwrap();
    assert_eq!(all_bytes(&r), values(0, 250));
    assert!(p.join("staged").exists());
    drop(r);
    let ds = Dataset::open_rw(&p).unwrap();
    assert_no_sessions(&p);
    drop(ds);
    assert_eq!(files(&p), before);
}

// ---------------------------------------------------------------------------------------
// Kills of real processes. The test binary runs itself as the child (an ignored test that
// does nothing unless the parent set `BLZ_STAGED_CHILD`).

const CHILD_ENV: &str = "BLZ_STAGED_CHILD";
const ROWS: u64 = 400_000;
const OLD: u64 = 1_234;

fn child(test: &str, args: &[&str]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, args.join("\u{1f}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn child_args() -> Option<Vec<String>> {
    std::env::var(CHILD_ENV)
        .ok()
        .map(|v| v.split('\u{1f}').map(str::to_string).collect())
}

/// Waits until the child printed `line` on stdout.
fn wait_for(c: &mut std::process::Child, line: &str) {
    use std::io::BufRead;
    let out = c.stdout.as_mut().unwrap();
    let mut r = std::io::BufReader::new(out);
    let mut s = String::new();
    loop {
        s.clear();
        assert!(
            r.read_line(&mut s).unwrap() > 0,
            "child ended before {line:?}"
        );
        if s.trim().ends_with(line) {
            return;
        }
    }
}

fn make_old(p: &Path) {
    let mut ds = Dataset::create_with(p, DType::F64, &[0], &opts(&[1_000], 8)).unwrap();
    ds.append_bytes(&values(0, OLD), OLD).unwrap();
}

/// The committing writer: stages `ROWS` rows (worker regions written by this process),
/// prints `staged`, waits for `pause_ms`, commits, prints `committed`.
#[test]
#[ignore = "run by the kill tests as a child process"]
fn child_writer() {
    let Some(args) = child_args() else { return };
    let p = PathBuf::from(&args[0]);
    let pause: u64 = args[1].parse().unwrap();
    let all = values(0, OLD + ROWS);
    let mut ds = Dataset::open_rw(&p).unwrap();
    let s = ds.begin_staged(ROWS).unwrap();
    write_regions(&s, &all, 8, 1);
    println!("staged");
    std::thread::sleep(Duration::from_millis(pause));
    let h = head(&s, &all, OLD, 8).to_vec();
    ds.commit_staged(s, &h).unwrap();
    println!("committed");
}

/// A worker: writes the region `args[2]` of the session directory `args[1]`, forever, so
/// the parent kills it mid-write.
#[test]
#[ignore = "run by the kill tests as a child process"]
fn child_worker() {
    let Some(args) = child_args() else { return };
    let dir = PathBuf::from(&args[0]);
    let start: u64 = args[1].parse().unwrap();
    let rows: u64 = args[2].parse().unwrap();
    let all = values(0, OLD + ROWS);
    let region = &all[start as usize * 8..(start + rows) as usize * 8];
    println!("writing");
    loop {
        staged::write_rows(&dir, start, region).unwrap();
    }
}

fn state(p: &Path) -> (Vec<u64>, Vec<u8>) {
    let ds = Dataset::open(p).unwrap();
    assert!(ds.verify(|_, _| {}).is_empty());
    (ds.shape().to_vec(), all_bytes(&ds))
}

/// After a kill: the dataset holds the old or the new rows, and once a writer opened it,
/// no session and no stray file is left.
fn check_after_kill(p: &Path) -> bool {
    let got = state(p);
    let old = (vec![OLD], values(0, OLD));
    let new = (vec![OLD + ROWS], values(0, OLD + ROWS));
    assert!(
        got == old || got == new,
        "neither old nor new: shape {:?}",
        got.0
    );
    let ds = Dataset::open_rw(p).unwrap();
    assert_no_sessions(p);
    let nfiles = ds.nfiles();
    let names: Vec<String> = std::fs::read_dir(p.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len() as u64, nfiles, "stray files: {names:?}");
    got == new
}

#[test]
fn a_writer_killed_between_staging_and_commit_leaves_the_old_dataset() {
    let d = Dir::new();
    let p = d.p("a.blz");
    make_old(&p);
    let mut c = child("child_writer", &[p.to_str().unwrap(), "60000"]);
    wait_for(&mut c, "staged");
    // The session is there, full, and readers see the old dataset.
    let sessions: Vec<_> = std::fs::read_dir(p.join("staged")).unwrap().collect();
    assert_eq!(sessions.len(), 1);
    assert_eq!(state(&p).0, vec![OLD]);
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(p.join("staged").exists());
    assert!(!check_after_kill(&p));
}

#[test]
fn a_writer_killed_at_any_moment_leaves_old_or_new() {
    let d = Dir::new();
    // A clean run's length, then kills spread over it (delays from a fixed seed).
    let p = d.p("clean.blz");
    make_old(&p);
    let t = Instant::now();
    let mut c = child("child_writer", &[p.to_str().unwrap(), "0"]);
    wait_for(&mut c, "committed");
    c.wait().unwrap();
    let clean = t.elapsed();
    assert!(check_after_kill(&p));
    let trials = common::cases(8);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut seen = [0, 0];
    for i in 0..trials {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let p = d.p(&format!("k{i}.blz"));
        make_old(&p);
        let mut c = child("child_writer", &[p.to_str().unwrap(), "0"]);
        let delay = clean.mul_f64((seed % 1000) as f64 / 1000.0);
        std::thread::sleep(delay);
        let _ = c.kill();
        c.wait().unwrap();
        seen[usize::from(check_after_kill(&p))] += 1;
    }
    eprintln!("{trials} kills: {} old, {} new", seen[0], seen[1]);
}

#[test]
fn a_worker_killed_mid_write_is_retried_or_the_write_abandoned() {
    let d = Dir::new();
    let p = d.p("a.blz");
    make_old(&p);
    let all = values(0, OLD + ROWS);
    let mut ds = Dataset::open_rw(&p).unwrap();
    let s = ds.begin_staged(ROWS).unwrap();
    let regions = s.regions(4);
    let (start, rows) = regions[0];
    let mut c = child(
        "child_worker",
        &[
            s.dir().to_str().unwrap(),
            &start.to_string(),
            &rows.to_string(),
        ],
    );
    wait_for(&mut c, "writing");
    std::thread::sleep(Duration::from_millis(150));
    c.kill().unwrap();
    c.wait().unwrap();
    // What the killed worker left (a private directory, perhaps some files) is no part of
    // the dataset; the task retried elsewhere writes the region again and the commit takes
    // the whole.
    write_regions(&s, &all, 8, 4);
    let h = head(&s, &all, OLD, 8).to_vec();
    ds.commit_staged(s, &h).unwrap();
    drop(ds);
    assert!(check_after_kill(&p));

    // Killed, and never retried: the commit is refused or the session abandoned; either
    // way the dataset stays as it was.
    let q = d.p("b.blz");
    make_old(&q);
    let mut ds = Dataset::open_rw(&q).unwrap();
    let s = ds.begin_staged(ROWS).unwrap();
    let (start, rows) = s.regions(4)[0];
    let dir = s.dir().to_path_buf();
    let mut c = child(
        "child_worker",
        &[dir.to_str().unwrap(), &start.to_string(), &rows.to_string()],
    );
    wait_for(&mut c, "writing");
    std::thread::sleep(Duration::from_millis(100));
    c.kill().unwrap();
    c.wait().unwrap();
    for &(start, rows) in &s.regions(4)[1..] {
        staged::write_rows(
            &dir,
            start,
            &all[start as usize * 8..(start + rows) as usize * 8],
        )
        .unwrap();
    }
    let h = head(&s, &all, OLD, 8).to_vec();
    if std::fs::read_dir(&dir)
        .unwrap()
        .any(|e| e.unwrap().file_name() == "__5__.bin")
    {
        // The worker finished its region at least once before the kill: the write is whole.
        ds.commit_staged(s, &h).unwrap();
    } else {
        assert!(ds.commit_staged(s, &h).is_err());
    }
    drop(ds);
    check_after_kill(&q);
}
