//! Links planted inside a dataset never make blz write outside it: temporary files are
//! created anew (a link at their name is removed, not followed), files are never opened for
//! writing through a link, and a linked `meta/` or `data/` directory is refused.

mod common;

use common::{fails, ok};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const VICTIM: &[u8] = b"precious, outside the dataset\n";

/// A dataset of 25,000 int64 (chunks of 1000, 4 per file: 7 files) and a victim file
/// outside it.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds.blz");
    ok(&[
        "create",
        ds.to_str().unwrap(),
        "--arange",
        "25000",
        "--chunkshape",
        "1000",
        "--superchunk-size",
        "4",
    ]);
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, VICTIM).unwrap();
    (dir, ds, victim)
}

fn untouched(victim: &Path) {
    assert_eq!(
        std::fs::read(victim).unwrap(),
        VICTIM,
        "the victim was written"
    );
}

fn is_plain_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

#[test]
fn attrs_through_a_planted_temporary_file() {
    let (_d, ds, victim) = setup();
    symlink(&victim, ds.join("meta/attributes.tmp")).unwrap();
    ok(&["attrs", ds.to_str().unwrap(), "--set", "x=1"]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("meta/attributes")));
    assert!(ok(&["attrs", ds.to_str().unwrap()]).contains("\"x\": 1"));
}

#[test]
fn resize_through_planted_sizes_and_journal_temporaries() {
    let (_d, ds, victim) = setup();
    symlink(&victim, ds.join("meta/sizes.tmp")).unwrap();
    symlink(&victim, ds.join("meta/journal.tmp")).unwrap();
    let p = ds.to_str().unwrap();
    // A grow commits by replacing meta/sizes; a shrink that cuts a file goes through the
    // journal.
    ok(&["resize", p, "26000"]);
    ok(&["resize", p, "2500"]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("meta/sizes")));
    assert!(ok(&["get", p, "-1:"]).contains("2499"));
    ok(&["verify", p]);
}

#[test]
fn a_superchunk_file_planted_as_a_link() {
    let (_d, ds, victim) = setup();
    let p = ds.to_str().unwrap();
    // Where an append will create the next file.
    symlink(&victim, ds.join("data/__8__.bin")).unwrap();
    ok(&["append", p, "--npy", &npy(&ds)]);
    untouched(&victim);
    assert!(is_plain_file(&ds.join("data/__8__.bin")));
    ok(&["verify", p]);
    // A committed file replaced by a link to a copy elsewhere: no write goes through it.
    let last = ds.join("data/__8__.bin");
    let copy = ds.parent().unwrap().join("copy.bin");
    std::fs::copy(&last, &copy).unwrap();
    std::fs::remove_file(&last).unwrap();
    symlink(&copy, &last).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let out = fails(&["append", p, "--npy", &npy(&ds)]);
    assert!(out.contains("link"), "{out}");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "written through the link"
    );
}

#[test]
fn linked_meta_or_data_directories_are_refused() {
    for dir in ["meta", "data"] {
        let (d, ds, _victim) = setup();
        let outside = d.path().join("outside");
        std::fs::rename(ds.join(dir), &outside).unwrap();
        symlink(&outside, ds.join(dir)).unwrap();
        let before = common::tree(&blz::storage::LocalStorage, &outside);
        let p = ds.to_str().unwrap();
        let out = fails(&["resize", p, "30000"]);
        assert!(out.contains("symbolic link"), "{dir}: {out}");
        assert_eq!(common::tree(&blz::storage::LocalStorage, &outside), before);
    }
}

/// A .npy of 6000 int64 beside the dataset.
fn npy(ds: &Path) -> String {
    let p = ds.parent().unwrap().join("more.npy");
    let data: Vec<u8> = (0..6000i64).flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&p, common::raw_npy("<i8", "(6000,)", &data)).unwrap();
    p.to_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------
// Non-regular files, links and the staging names, driven as real processes with a time
// limit: a command that would block on a FIFO fails the test instead of hanging it.

/// How long one `blz` run may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `blz args` as a child (output to files, so no pipe can fill), killing it and
/// failing the test when it outlives [`LIMIT`].
fn run_limited(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("blz {args:?} still running after {LIMIT:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo {p:?}");
}

/// Every file below `dir` with its bytes, and every directory, links not followed (what
/// must not change outside the datasets).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_dir() {
                todo.push(p.clone());
                out.insert(p, None);
            } else {
                out.insert(p.clone(), Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// What is planted at a position.
#[derive(Debug, Clone, Copy)]
enum Plant {
    /// A link to what was there, moved outside (or to an outside file where nothing was).
    LinkToOriginal,
    /// A link to a directory outside holding a precious file.
    LinkToDir,
    /// A link to /dev/null (a character device).
    LinkToDevice,
    /// A FIFO.
    Fifo,
    /// A Unix socket.
    Socket,
}

/// A scratch directory with an array dataset `ds.blz` (25,000 int64, 7 superchunk files),
/// a table `t.blz` (columns `id` and `name`), inputs to append, and `outside/`, which
/// nothing may change.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let s = Scene { dir };
        ok(&[
            "create",
            &s.s("ds.blz"),
            "--arange",
            "25000",
            "--chunkshape",
            "1000",
            "--superchunk-size",
            "4",
        ]);
        std::fs::write(s.p("t.csv"), "id,name\n1,a\n2,bb\n3,ccc\n").unwrap();
        ok(&["create", &s.s("t.blz"), "--csv", &s.s("t.csv")]);
        let data: Vec<u8> = (0..3000i64).flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(s.p("more.npy"), common::raw_npy("<i8", "(3000,)", &data)).unwrap();
        std::fs::create_dir_all(s.p("outside/dir")).unwrap();
        std::fs::write(s.p("outside/dir/precious"), VICTIM).unwrap();
        std::fs::write(s.p("outside/victim.txt"), VICTIM).unwrap();
        s
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn s(&self, rel: &str) -> String {
        self.p(rel).to_str().unwrap().to_string()
    }
    /// Puts `plant` at `rel` (what was there moved to `outside/original`).
    fn plant(&self, rel: &str, plant: Plant) {
        let at = self.p(rel);
        let original = self.p("outside/original");
        let had = std::fs::symlink_metadata(&at).is_ok();
        if had {
            std::fs::rename(&at, &original).unwrap();
        }
        match plant {
            Plant::LinkToOriginal if had => symlink(&original, &at).unwrap(),
            Plant::LinkToOriginal => symlink(self.p("outside/victim.txt"), &at).unwrap(),
            Plant::LinkToDir => symlink(self.p("outside/dir"), &at).unwrap(),
            Plant::LinkToDevice => symlink("/dev/null", &at).unwrap(),
            Plant::Fifo => mkfifo(&at),
            Plant::Socket => drop(std::os::unix::net::UnixListener::bind(&at).unwrap()),
        }
    }
}

/// Whether `rel` names one of blz's bookkeeping files, which a copy leaves out.
fn bookkeeping(rel: &str) -> bool {
    rel.ends_with("meta/lock")
}

/// Plants each kind of non-regular file and link at each position of a dataset and beside
/// it, and runs every command that reaches that position. Each must end within [`LIMIT`],
/// without a panic; change nothing outside the datasets; and when it fails, name the
/// position. A copy refuses whatever it would have to follow or read as a stream.
#[test]
fn non_regular_files_and_links_in_every_position() {
    let positions = [
        "ds.blz/meta/storage",
        "ds.blz/meta/sizes",
        "ds.blz/meta/attributes",
        "ds.blz/meta/lock",
        "ds.blz/data",
        "ds.blz/data/__1__.bin",
        "ds.blz/data/__7__.bin",
        "t.blz/data/name",
        "t.blz/data/id/__1__.bin",
        "t.blz/meta/storage",
        "ds.blz.tmp-build",
        "ds.blz.tmp-old",
        "new.blz.tmp-build",
        "copy.blz.tmp-build",
    ];
    let plants = [
        Plant::LinkToOriginal,
        Plant::LinkToDir,
        Plant::LinkToDevice,
        Plant::Fifo,
        Plant::Socket,
    ];
    let mut failures = Vec::new();
    for rel in positions {
        for plant in plants {
            let scene = Scene::new();
            scene.plant(rel, plant);
            let outside = snapshot(&scene.p("outside"));
            let (ds, t) = (scene.s("ds.blz"), scene.s("t.blz"));
            let (copy, new) = (scene.s("copy.blz"), scene.s("new.blz"));
            let (npy, csv) = (scene.s("more.npy"), scene.s("t.csv"));
            let commands: Vec<Vec<&str>> = vec![
                vec!["info", &ds],
                vec!["get", &ds, "0:5"],
                vec!["get", &ds, "24990:"],
                vec!["verify", &ds],
                vec!["info", &t],
                vec!["verify", &t],
                vec!["copy", &ds, &copy],
                vec!["copy", &t, &copy],
                vec!["append", &ds, "--npy", &npy],
                vec!["append", &t, "--csv", &csv],
                vec!["create", &new, "--arange", "10"],
                vec!["create", &ds, "--arange", "100", "--overwrite"],
                vec!["copy", &t, &copy, "--overwrite"],
            ];
            for args in commands {
                let target_copy = args[0] == "copy";
                if target_copy {
                    // Each copy starts afresh (apart from a plant at its staging name).
                    let _ = std::fs::remove_dir_all(scene.p("copy.blz"));
                }
                let o = run_limited(&args);
                let err = common::text(&o.stderr);
                let case = format!("{rel} as {plant:?}: blz {:?}", &args);
                if err.contains("panicked") || !matches!(o.status.code(), Some(0 | 1)) {
                    failures.push(format!("{case}: status {:?}: {err}", o.status.code()));
                }
                if snapshot(&scene.p("outside")) != outside {
                    failures.push(format!("{case}: changed something outside the datasets"));
                }
                let failed = !o.status.success();
                // (`verify` lists what it found on standard output.)
                let out = common::text(&o.stdout);
                if failed && !err.contains(rel) && !out.contains(rel) {
                    failures.push(format!("{case}: the error does not name {rel}: {err}"));
                }
                // A copy whose source holds the plant never succeeds, and leaves nothing.
                let src = args.get(1).copied().unwrap_or("");
                let planted_in_src = target_copy
                    && scene.p(rel).starts_with(src)
                    && !bookkeeping(rel)
                    && std::fs::symlink_metadata(scene.p(rel))
                        .is_ok_and(|m| !m.file_type().is_file() && !m.file_type().is_dir());
                if planted_in_src && !failed {
                    failures.push(format!("{case}: copied a dataset holding {plant:?}"));
                }
                if target_copy && failed && !args.contains(&"--overwrite") {
                    let left = std::fs::symlink_metadata(scene.p("copy.blz")).is_ok();
                    if left {
                        failures.push(format!("{case}: a failed copy left copy.blz"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 21 item 6: a link to a secret file or to a directory tree, planted anywhere in
/// the source, makes `blz copy` fail naming it, before anything is written; the secret is
/// nowhere in the destination.
#[test]
fn copy_refuses_links_planted_in_the_source() {
    for (at, to_dir) in [("meta/notes", false), ("data/etc", true), ("extra", false)] {
        let scene = Scene::new();
        let src = scene.p("ds.blz");
        let target = if to_dir {
            scene.p("outside/dir")
        } else {
            scene.p("outside/victim.txt")
        };
        symlink(&target, src.join(at)).unwrap();
        let dst = scene.s("copy.blz");
        let o = run_limited(&["copy", &scene.s("ds.blz"), &dst]);
        let err = common::text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{at}: {err}");
        assert!(
            err.contains(&src.join(at).display().to_string()) && err.contains("symbolic link"),
            "{at}: {err}"
        );
        assert!(!Path::new(&dst).exists(), "{at}: a failed copy left {dst}");
        assert!(!scene.p("copy.blz.tmp-build").exists(), "{at}");
        // Without the link the copy works.
        std::fs::remove_file(src.join(at)).unwrap();
        ok(&["copy", &scene.s("ds.blz"), &dst]);
        ok(&["verify", &dst]);
    }
}

/// Issue 21 item 7: `ln -s "$PWD/victim" d2.tmp-build; blz create d2 --arange 10` must not
/// touch `victim/` and must leave `d2` a real directory.
#[test]
fn create_through_a_link_at_the_staging_name() {
    for suffix in [".tmp-build", ".tmp-old"] {
        let scene = Scene::new();
        let victim = scene.p("outside/dir");
        let before = snapshot(&victim);
        let d2 = scene.p("d2");
        symlink(&victim, scene.p(&format!("d2{suffix}"))).unwrap();
        ok(&["create", d2.to_str().unwrap(), "--arange", "10"]);
        ok(&[
            "create",
            d2.to_str().unwrap(),
            "--arange",
            "20",
            "--overwrite",
        ]);
        assert_eq!(snapshot(&victim), before, "{suffix}: victim/ changed");
        assert!(
            std::fs::symlink_metadata(&d2).unwrap().is_dir(),
            "{suffix}: d2 is not a real directory"
        );
        assert!(ok(&["get", d2.to_str().unwrap(), "-1:"]).contains("19"));
        // A FIFO or a plain file at the staging name is cleared away the same way.
        let tmp = scene.p(&format!("d3{suffix}"));
        mkfifo(&tmp);
        ok(&["create", &scene.s("d3"), "--arange", "10"]);
        std::fs::write(scene.p("d4.tmp-build"), b"junk").unwrap();
        ok(&["create", &scene.s("d4"), "--arange", "10"]);
    }
}

/// Issue 21 item 8: a FIFO (or a link to a device) in place of a superchunk file or a
/// metadata file makes `info` and `get` fail at once, naming it, instead of blocking.
#[test]
fn a_fifo_in_place_of_a_file_fails_promptly() {
    for rel in [
        "ds.blz/data/__1__.bin",
        "ds.blz/data/__7__.bin",
        "ds.blz/meta/sizes",
    ] {
        for plant in [Plant::Fifo, Plant::LinkToDevice] {
            let scene = Scene::new();
            scene.plant(rel, plant);
            let ds = scene.s("ds.blz");
            for args in [
                vec!["info", ds.as_str()],
                vec!["get", ds.as_str(), "0:5"],
                vec!["get", ds.as_str(), "24995:"],
            ] {
                let o = run_limited(&args);
                let err = common::text(&o.stderr);
                if o.status.success() {
                    // It did not need the file (info reads no superchunk file).
                    continue;
                }
                assert_eq!(o.status.code(), Some(1), "{rel} {plant:?} {args:?}: {err}");
                assert!(
                    err.contains(&scene.s(rel)) && err.contains("not a regular file"),
                    "{rel} {plant:?} {args:?}: {err}"
                );
            }
        }
    }
}

/// The smaller item: of several creates of one path at once, one wins; every other is
/// told another writer created (or is creating) it, never that the staging directory is
/// missing.
#[test]
fn losing_concurrent_creates_say_another_writer_won() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..6 {
        let p = dir.path().join(format!("n{round}.blz"));
        let p = p.to_str().unwrap().to_string();
        let children: Vec<_> = (0..6)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_blz"))
                    .args(["create", &p, "--arange", "10"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut won = 0;
        for c in children {
            let o = c.wait_with_output().unwrap();
            let err = common::text(&o.stderr);
            if o.status.success() {
                won += 1;
            } else {
                assert!(
                    err.contains("locked by another writer") || err.contains("already exists"),
                    "round {round}: {err}"
                );
            }
        }
        assert_eq!(won, 1, "round {round}");
        ok(&["verify", &p]);
    }
}
