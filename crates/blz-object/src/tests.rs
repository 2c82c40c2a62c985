//! Unit tests of the object-store backend's private parts.

use crate::config::s3_clients;
use crate::config::sign_payloads;
use crate::config::UNSIGNED_PAYLOAD_VAR;
use crate::entry::StateFile;
use crate::extents::add_range;
use crate::extents::clip_ranges;
use crate::front::base64_decode;
use crate::front::base64_encode;
use crate::front::Front;
use crate::front::FrontCopy;
use crate::handle::ObjectStorage;
use crate::keys::ExtentObject;
use crate::keys::MAX_FRONT;
use crate::spool::Spool;
use crate::spool::SPOOL_FILES;
use crate::state::state_bytes;
use crate::state::State;
use blz_format::error::Error;
use blz_format::storage::OpenMode;
use blz_format::storage::Storage;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
/// Bodies go up unsigned to an HTTPS endpoint and signed to a plain HTTP one, unless
/// `AWS_UNSIGNED_PAYLOAD` says otherwise (the builder's own reading of it stands).
#[test]
fn bodies_are_signed_only_over_plain_http() {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
    let unsigned = |b: AmazonS3Builder| b.get_config_value(&K::UnsignedPayload);
    let none = |_: &str| false;
    let base = AmazonS3Builder::new();
    for (endpoint, want) in [
        ("https://s3.eu-west-1.amazonaws.com", "true"),
        ("HTTPS://minio.example:9000", "true"),
        ("http://127.0.0.1:5000", "false"),
        ("localhost:9000", "false"),
    ] {
        let got = unsigned(sign_payloads(base.clone(), endpoint, none));
        assert_eq!(got.as_deref(), Some(want), "{endpoint}");
    }
    // Set in the environment: what the builder read is kept, either way.
    let set = |v: &str| v == UNSIGNED_PAYLOAD_VAR;
    let signed = base.clone().with_unsigned_payload(false);
    let got = unsigned(sign_payloads(signed, "https://s3.amazonaws.com", set));
    assert_eq!(got.as_deref(), Some("false"));
    let chosen = base.with_unsigned_payload(true);
    let got = unsigned(sign_payloads(chosen, "http://127.0.0.1:5000", set));
    assert_eq!(got.as_deref(), Some("true"));
}

/// Writes to a file being written go to its one spool file: none is made per write.
#[test]
fn a_file_written_many_times_has_one_spool_file() {
    let store = Arc::new(object_store::memory::InMemory::new());
    let s = ObjectStorage::in_memory(&store, "spools/x.blz").unwrap();
    let path = s.root().join("data/a.bin");
    let f = s.open(&path, OpenMode::Create).unwrap();
    let before = SPOOL_FILES.load(Ordering::Relaxed);
    for i in 0..50u64 {
        f.write_at(i * 8, &i.to_le_bytes()).unwrap();
        f.set_len(i * 8 + 8).unwrap();
    }
    let mut buf = [0u8; 8];
    f.read_at(49 * 8, &mut buf).unwrap();
    assert_eq!(u64::from_le_bytes(buf), 49);
    // Other tests of this process make spools meanwhile: a spool per write would show
    // as 100 or more.
    assert!(SPOOL_FILES.load(Ordering::Relaxed) - before < 20);
}

/// Bytes handed out mapped (an upload's) stay as they were while the file is written
/// again and shrunk; the file itself reads its new bytes.
#[test]
fn mapped_spool_bytes_outlive_later_writes() {
    let path = Path::new("memory://spools/y.blz/data/b.bin");
    let mut sp = Spool::new(path).unwrap();
    let old: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    sp.file_to_write(path)
        .unwrap()
        .write_all_at(&old, 0)
        .unwrap();
    sp.len = old.len() as u64;
    add_range(&mut sp.written, 0..sp.len);
    let store = Arc::new(object_store::memory::InMemory::new());
    let s = ObjectStorage::in_memory(&store, "spools/y.blz").unwrap();
    let mapped = sp
        .bytes_of(&s.backend, std::slice::from_ref(&(0..sp.len)), path)
        .unwrap();
    let tail = sp
        .bytes_of(&s.backend, std::slice::from_ref(&(90_000..100_000)), path)
        .unwrap();
    assert!(sp.mapped);
    assert_eq!(&mapped[..], &old[..]);
    sp.file_to_write(path)
        .unwrap()
        .write_all_at(&[7u8; 1000], 0)
        .unwrap();
    assert!(!sp.mapped);
    sp.file_to_write(path).unwrap().set_len(10).unwrap();
    sp.len = 10;
    clip_ranges(&mut sp.written, 10);
    assert_eq!(&mapped[..], &old[..]);
    assert_eq!(&tail[..], &old[90_000..]);
    let mut now = [0u8; 10];
    sp.read_at(&s.backend, 0, &mut now, path).unwrap();
    assert_eq!(now, [7u8; 10]);
}

/// A second open of a bucket under the same configuration takes the clients made for
/// the first (no client is built per open); another bucket gets its own.
#[test]
fn clients_are_made_once_per_bucket_and_configuration() {
    let a = s3_clients("blz-kept-a").unwrap();
    let again = s3_clients("blz-kept-a").unwrap();
    let b = s3_clients("blz-kept-b").unwrap();
    assert!(Arc::ptr_eq(&a.read, &again.read));
    assert!(Arc::ptr_eq(&a.write, &again.write));
    assert!(!Arc::ptr_eq(&a.read, &b.read));
    assert!(!Arc::ptr_eq(&a.read, &a.write));
}

#[test]
fn base64_round_trips_and_matches_rfc_4648() {
    // RFC 4648 §10's test vectors.
    for (plain, coded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64_encode(plain.as_bytes()), coded);
        assert_eq!(base64_decode(coded).unwrap(), plain.as_bytes());
    }
    let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    assert_eq!(base64_decode(&base64_encode(&all)).unwrap(), all);
    for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "Zg=a"] {
        assert!(base64_decode(bad).is_none(), "{bad}");
    }
}

#[test]
fn a_front_answers_reads_inside_its_ranges_and_checks_itself() {
    let file: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
    let ranges = [0..100u64, 2000..2500];
    let mut bytes = file[0..100].to_vec();
    bytes.extend_from_slice(&file[2000..2500]);
    let front = Front::new(&ranges, &bytes).unwrap();
    assert_eq!(front.ranges, vec![[0, 100], [2000, 500]]);
    assert_eq!(front.fault(5000), None);
    assert!(front.fault(2499).is_some(), "a range past the end");
    let copy = FrontCopy::new(front.clone());
    assert_eq!(copy.find(10, 20), Some(10));
    assert_eq!(copy.find(2100, 2500), Some(200));
    assert_eq!(copy.find(90, 110), None);
    assert_eq!(copy.find(2400, 2501), None);
    let b = copy.bytes().unwrap();
    assert_eq!(&b[200..600], &file[2100..2500]);
    // Ranges out of order, overlapping, empty or too large are refused.
    for r in [
        vec![[100, 10], [0, 10]],
        vec![[0, 10], [5, 10]],
        vec![[0, 0]],
        vec![[0, MAX_FRONT + 1]],
    ] {
        let f = Front {
            ranges: r.clone(),
            zlib: String::new(),
            blocks: None,
            blocks_object: None,
        };
        assert!(f.fault(u64::MAX / 2).is_some(), "{r:?}");
    }
    // An index both carried and in an object of its own is a fault.
    let both = Front {
        blocks: Some(String::new()),
        blocks_object: Some(ExtentObject {
            key: "data/x.blocks".into(),
            size: 1,
        }),
        ..front.clone()
    };
    assert!(both.fault(u64::MAX / 2).is_some());
    // A copy that decodes to another length than its ranges hold is an error.
    let short = FrontCopy::new(Front {
        ranges: vec![[0, 101]],
        zlib: front.zlib.clone(),
        blocks: None,
        blocks_object: None,
    });
    assert!(short.bytes().is_err());
    // A block index that is not base64, not zlib, or not records is an error; none is
    // no index.
    assert!(FrontCopy::new(front.clone())
        .block_index()
        .unwrap()
        .is_none());
    for bad in [
        "!!".to_string(),
        base64_encode(b"not zlib"),
        front.zlib.clone(),
    ] {
        let f = FrontCopy::new(Front {
            blocks: Some(bad.clone()),
            ..front.clone()
        });
        assert!(f.block_index().is_err(), "{bad}");
    }
}

/// A state past the bound a reader reads sheds files' fronts, the last files' first,
/// until it fits; one that does not fit without them is refused.
#[test]
fn a_state_too_long_sheds_fronts_then_is_refused() {
    let bytes: Vec<u8> = (0..4000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let front = Front::new(std::slice::from_ref(&(0..4000)), &bytes).unwrap();
    let files: BTreeMap<String, StateFile> = (0..40)
        .map(|i| {
            (
                format!("data/__{i:02}__.bin"),
                StateFile::Object {
                    key: format!("data/__{i:02}__.bin.1-0000000000000001"),
                    len: 1 << 20,
                    front: Some(front.clone()),
                },
            )
        })
        .collect();
    let state = State::first(files, Vec::new());
    let path = Path::new("s3://b/x.blz/meta/state");
    let whole = serde_json::to_vec(&state).unwrap().len() as u64;
    let mut same = state.clone();
    assert_eq!(
        state_bytes(&mut same, whole, path).unwrap().len() as u64,
        whole
    );
    assert_eq!(same, state, "a state that fits is left alone");
    let fronted = |s: &State| -> Vec<bool> {
        s.files
            .values()
            .map(|f| matches!(f, StateFile::Object { front: Some(_), .. }))
            .collect()
    };
    for max in [whole - 1, whole * 2 / 3, whole / 4] {
        let mut cut = state.clone();
        let b = state_bytes(&mut cut, max, path).unwrap();
        assert!(b.len() as u64 <= max, "{} over {max}", b.len());
        let back: State = serde_json::from_slice(&b).unwrap();
        assert_eq!(back, cut);
        let kept = fronted(&cut);
        let n = kept.iter().filter(|&&k| k).count();
        assert!(n < 40, "{max}: no front left out");
        assert!(
            kept[..n].iter().all(|&k| k),
            "{max}: the last files' go first"
        );
        // Not more left out than needed: one front more would not have fit.
        if n < 40 {
            let mut more = cut.clone();
            if let Some(StateFile::Object { front, .. }) = more.files.values_mut().nth(n) {
                *front = Some(Front::new(std::slice::from_ref(&(0..4000)), &bytes).unwrap());
            }
            let longer = serde_json::to_vec(&more).unwrap().len() as u64;
            assert!(longer > max, "{max}: front {n} was left out though it fit");
        }
    }
    let bare = {
        let mut s = state.clone();
        for f in s.files.values_mut() {
            if let StateFile::Object { front, .. } = f {
                *front = None;
            }
        }
        serde_json::to_vec(&s).unwrap().len() as u64
    };
    let mut refused = state.clone();
    match state_bytes(&mut refused, bare - 1, path) {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("s3://b/x.blz/meta/state") && m.contains("too many files"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}
