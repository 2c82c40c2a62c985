//! A hostile or damaged object store (`spec/object-store.md`): every value of the state
//! object and of its manifests replaced by extreme, wrong or misplaced ones, every key
//! removed, arrays emptied and repeated, and the block-index and superchunk objects cut
//! short or flipped. Opening, reading, verifying and appending must each return a value or
//! an error: never panic, never allocate what a field claims, never run long, and never
//! read values other than the dataset's without an error.
//!
//! The mutations are enumerated, not drawn, so the run is the same every time; the
//! libFuzzer target `fuzz/fuzz_targets/object_state.rs` draws them for long runs.

mod hostile_store;

use hostile_store::{exercise, pristine, Outcome};
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The system allocator, remembering the largest single allocation asked of it.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the wrapper only
// records sizes.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

/// No single allocation of a case may pass this: the dataset is 56 KB of values.
const ALLOCATION_BOUND: usize = 64 << 20;
/// Nor may a case take longer.
const TIME_BOUND: Duration = Duration::from_secs(5);

/// What one case did, for the summary.
#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    refused_at_open: usize,
    failed_later: usize,
    read_whole: usize,
    /// What went wrong, one line a case.
    failures: Vec<String>,
}

impl Tally {
    /// Fails the test with every case that went wrong.
    fn check(&self) {
        eprintln!(
            "{} cases: {} refused at open, {} failed after, {} read whole",
            self.cases, self.refused_at_open, self.failed_later, self.read_whole
        );
        assert!(
            self.failures.is_empty(),
            "{} of {} cases went wrong:\n{}",
            self.failures.len(),
            self.cases + self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Opens the dataset these objects hold, reads it whole and in a few places, verifies it
/// and appends to it; panics (failing the test) on a panic inside blz, an allocation past
/// the bound, a case running long, or values read without error that are not the
/// dataset's.
fn run_case(what: &str, objects: &BTreeMap<String, Vec<u8>>, tally: &Mutex<Tally>) {
    run_case_as(what, objects, tally, false)
}

/// [`run_case`]; with `must_read`, every read must also succeed (the damage is to
/// something reads can do without).
fn run_case_as(
    what: &str,
    objects: &BTreeMap<String, Vec<u8>>,
    tally: &Mutex<Tally>,
    must_read: bool,
) {
    watch_panics();
    // One case at a time in the process: the allocation bound and the panic watch are
    // process-wide.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    LARGEST.store(0, Ordering::Relaxed);
    PANICKED.lock().unwrap().take();
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(|| exercise(objects, must_read));
    let elapsed = started.elapsed();
    let panicked = PANICKED.lock().unwrap().take();
    if let Some(msg) = panicked {
        t_fail(tally, format!("{what}: a thread panicked: {msg}"));
        return;
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    match outcome {
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            t_fail(tally, format!("{what}: panicked: {msg}"));
            return;
        }
        Ok(n) => {
            let mut t = tally.lock().unwrap();
            t.cases += 1;
            match n {
                Outcome::RefusedAtOpen => t.refused_at_open += 1,
                Outcome::FailedLater => t.failed_later += 1,
                Outcome::ReadWhole => t.read_whole += 1,
            }
        }
    }
    if largest > ALLOCATION_BOUND {
        t_fail(tally, format!("{what}: allocated {largest} bytes at once"));
    }
    if elapsed > TIME_BOUND {
        t_fail(tally, format!("{what}: took {elapsed:?}"));
    }
}

fn t_fail(tally: &Mutex<Tally>, msg: String) {
    tally.lock().unwrap().failures.push(msg);
}

/// A panic on any thread (a decode or I/O thread's too, which blz might turn into an
/// error), with its message; the hook is set once.
static PANICKED: Mutex<Option<String>> = Mutex::new(None);

fn watch_panics() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("{info}");
            *PANICKED.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string());
        }));
    });
}

/// Values a hostile JSON number or string might be replaced by.
fn replacements() -> Vec<Value> {
    let mut v: Vec<Value> = [
        "0",
        "1",
        "-1",
        "2",
        "255",
        "4294967295",
        "4294967296",
        "9007199254740993",
        "9223372036854775807",
        "18446744073709551615",
        "-9223372036854775808",
        "1e300",
        "0.5",
        "null",
        "true",
        "[]",
        "{}",
        "\"\"",
        "\"../../escape\"",
        "\"/abs\"",
        "\"data/__1__.bin\"",
        "[[0,0,18446744073709551615]]",
        "[[0,18446744073709551615]]",
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect();
    // A zlib stream that inflates to far more than any front or index holds.
    v.push(Value::String(zlib_bomb()));
    v
}

fn zlib_bomb() -> String {
    use base64::Engine;
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&vec![0u8; 64 << 20]).unwrap();
    base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap())
}

/// Every mutation of one JSON document: each leaf replaced by each replacement, each
/// object key removed, the values of each two keys of an object swapped, each array
/// emptied, reversed and its first element repeated.
fn json_mutations(doc: &Value) -> Vec<(String, Value)> {
    fn walk(
        v: &Value,
        path: &mut Vec<String>,
        out: &mut Vec<(String, Value)>,
        root: &Value,
        reps: &[Value],
    ) {
        let here = path.join("/");
        let mut put = |what: String, new: Value| {
            let mut d = root.clone();
            *d.pointer_mut(format!("/{}", path.join("/")).trim_end_matches('/'))
                .unwrap() = new;
            out.push((what, d));
        };
        match v {
            Value::Object(m) => {
                for k in m.keys() {
                    let mut d = m.clone();
                    d.remove(k);
                    put(format!("{here}: without {k}"), Value::Object(d));
                }
                let keys: Vec<&String> = m.keys().collect();
                for (i, a) in keys.iter().enumerate() {
                    for b in &keys[i + 1..] {
                        let mut d = m.clone();
                        d.insert((*a).clone(), m[*b].clone());
                        d.insert((*b).clone(), m[*a].clone());
                        put(format!("{here}: {a} and {b} swapped"), Value::Object(d));
                    }
                }
                for r in reps
                    .iter()
                    .filter(|r| matches!(r, Value::Array(_) | Value::Null))
                {
                    put(format!("{here} = {r}"), r.clone());
                }
                for (k, c) in m {
                    path.push(escape(k));
                    walk(c, path, out, root, reps);
                    path.pop();
                }
            }
            Value::Array(a) => {
                put(format!("{here} = []"), Value::Array(vec![]));
                if let Some(first) = a.first() {
                    let mut d = a.clone();
                    d.push(first.clone());
                    put(format!("{here}: first repeated"), Value::Array(d));
                }
                if a.len() > 1 {
                    let mut d = a.clone();
                    d.reverse();
                    put(format!("{here}: reversed"), Value::Array(d));
                }
                for (i, c) in a.iter().enumerate() {
                    path.push(i.to_string());
                    walk(c, path, out, root, reps);
                    path.pop();
                }
            }
            _ => {
                for r in reps {
                    if r != v {
                        put(format!("{here} = {}", short(r)), r.clone());
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(doc, &mut Vec::new(), &mut out, doc, &replacements());
    out
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}...", &s[..40])
    } else {
        s
    }
}

fn mutate_json_object(key_suffix: &str) -> Tally {
    let objects = pristine();
    let tally = Mutex::new(Tally::default());
    let keys: Vec<&String> = objects.keys().filter(|k| k.contains(key_suffix)).collect();
    assert!(!keys.is_empty());
    for key in keys {
        let doc: Value = serde_json::from_slice(&objects[key]).unwrap();
        for (what, d) in json_mutations(&doc) {
            let mut o = objects.clone();
            o.insert(key.clone(), serde_json::to_vec(&d).unwrap());
            run_case(&format!("{key}: {what}"), &o, &tally);
        }
    }
    tally.into_inner().unwrap()
}

#[test]
fn the_dataset_reads_whole_before_any_mutation() {
    let tally = Mutex::new(Tally::default());
    run_case("pristine", pristine(), &tally);
    let t = tally.into_inner().unwrap();
    t.check();
    assert_eq!(t.read_whole, 1, "{t:?}");
}

#[test]
fn every_value_of_the_state_mutated() {
    let t = mutate_json_object("meta/state");
    t.check();
    assert!(
        t.cases > 500 && t.refused_at_open > 0 && t.read_whole > 0,
        "{t:?}"
    );
}

#[test]
fn every_value_of_each_manifest_mutated() {
    let t = mutate_json_object("/manifests/");
    t.check();
    // An open reads the state object alone: a damaged manifest is refused by the first
    // read that needs a file of its (reading whole needs them all).
    assert!(
        t.cases > 500 && t.refused_at_open == 0 && t.failed_later > 500,
        "{t:?}"
    );
}

/// Block-index and superchunk objects: cut at every tenth of their length and at a few
/// bytes from either end, one byte flipped at each sixteenth, emptied, replaced by another
/// object's bytes, and missing. With a block-index object so damaged, every read still
/// succeeds (reading whole chunks), the short reads of `get` as much as the others.
#[test]
fn binary_objects_cut_flipped_and_swapped() {
    let objects = pristine();
    let tally = Mutex::new(Tally::default());
    let binary: Vec<&String> = objects.keys().filter(|k| k.contains("/data/")).collect();
    for (n, key) in binary.iter().enumerate() {
        let bytes = &objects[*key];
        let len = bytes.len();
        // A block index only spares bytes: damaged or missing, reads go on without it.
        let index = key.ends_with(".blocks");
        let mut cuts: Vec<usize> = (0..10).map(|i| len * i / 10).collect();
        cuts.extend([1, 4, len.saturating_sub(4), len.saturating_sub(1)]);
        for cut in cuts {
            let mut o = objects.clone();
            o.insert((*key).clone(), bytes[..cut].to_vec());
            run_case_as(&format!("{key} cut at {cut}"), &o, &tally, index);
        }
        for i in (0..16).map(|i| len * i / 16) {
            let mut o = objects.clone();
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            o.insert((*key).clone(), b);
            run_case_as(&format!("{key} byte {i} flipped"), &o, &tally, index);
        }
        let other = binary[(n + 1) % binary.len()];
        let mut o = objects.clone();
        o.insert((*key).clone(), objects[other].clone());
        run_case_as(&format!("{key} holding {other}"), &o, &tally, index);
        let mut o = objects.clone();
        o.remove(*key);
        run_case_as(&format!("{key} missing"), &o, &tally, index);
    }
    let t = tally.into_inner().unwrap();
    t.check();
    assert!(t.cases > 200 && t.failed_later > 0, "{t:?}");
}
