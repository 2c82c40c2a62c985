//! Hostile S3 endpoints and malformed `s3://` names, no S3 server needed: a "black hole"
//! listener on 127.0.0.1 that accepts connections and never answers, and one that answers
//! headers then stalls in the middle of the body, make a real `blz get s3://...` fail within
//! the bound `spec/object-store.md` §1 documents (short timeouts set through the `BLZ_S3_*`
//! variables keep the test quick), with an error naming the endpoint and what timed out.
//! The documented defaults and the variables that change them; URLs with empty components
//! or a trailing slash refused, naming what is wrong.

use blz::storage::object::{parse_s3_url, S3Timeouts, MAX_BACKOFF};
use blz::Error;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the fake endpoint treats a connection.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Accept, read nothing, answer nothing.
    Silent,
    /// Read the request, send the headers of a 1000-byte object and 10 bytes of it (or, for
    /// a ranged GET, of the range), then nothing more.
    StallMidBody,
}

/// A listener on a free loopback port serving `b` on a thread; connections are kept open
/// (held in the returned list) so that the client sees silence, not a closed socket.
fn endpoint(b: Behaviour) -> (String, Arc<Mutex<Vec<TcpStream>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            if let Behaviour::StallMidBody = b {
                let _ = answer_then_stall(&mut conn);
            }
            keep.lock().unwrap().push(conn);
        }
    });
    (format!("http://{addr}"), held)
}

fn answer_then_stall(conn: &mut TcpStream) -> std::io::Result<()> {
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        req.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&req).to_ascii_lowercase();
    const LEN: u64 = 1000;
    let start = text
        .lines()
        .find_map(|l| l.strip_prefix("range: bytes="))
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.trim().parse::<u64>().ok());
    let head = match start {
        Some(a) => format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\n\
             Content-Range: bytes {a}-{}/{LEN}\r\n",
            LEN - a,
            LEN - 1
        ),
        None => format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n"),
    };
    let head = format!(
        "{head}ETag: \"0123456789abcdef\"\r\nLast-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(b"{\"format\":")?;
    conn.flush()
}

/// The variables the fake endpoint is reached with: short timeouts, one retry (begun within
/// 1.5 s of the first attempt, so a request makes two attempts of a second each).
fn env(endpoint: &str) -> HashMap<&'static str, String> {
    HashMap::from([
        ("AWS_ENDPOINT_URL", endpoint.to_string()),
        ("AWS_ALLOW_HTTP", "true".to_string()),
        ("AWS_ACCESS_KEY_ID", "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("BLZ_S3_CONNECT_TIMEOUT", "1".to_string()),
        ("BLZ_S3_TIMEOUT", "1".to_string()),
        ("BLZ_S3_REQUEST_TIMEOUT", "20".to_string()),
        ("BLZ_S3_RETRIES", "1".to_string()),
        ("BLZ_S3_RETRY_TIMEOUT", "1.5".to_string()),
    ])
}

/// Runs `blz ARGS` with `vars` (and no other `AWS_*`/`BLZ_S3_*` variable of this process).
fn blz(args: &[&str], vars: &HashMap<&'static str, String>) -> (Output, Duration) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_blz"));
    c.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("BLZ_S3_") {
            c.env_remove(k);
        }
    }
    c.envs(vars);
    let t = Instant::now();
    let out = c.output().unwrap();
    (out, t.elapsed())
}

fn check_timed_out(b: Behaviour, what: &str) {
    let (url, _held) = endpoint(b);
    let vars = env(&url);
    let t = S3Timeouts::from_vars(|k| vars.get(k).cloned()).unwrap();
    let bound = t.silent_read_bound();
    assert_eq!(bound, Duration::from_millis(2500) + MAX_BACKOFF);
    let (out, took) = blz(&["get", "s3://bucket/x.blz"], &vars);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {msg}");
    // The bound, plus a second for starting the process.
    assert!(
        took <= bound + Duration::from_secs(1),
        "{what}: took {took:?}, beyond the bound {bound:?}: {msg}"
    );
    // Two attempts of one second each.
    assert!(
        took >= Duration::from_secs(2),
        "{what}: took {took:?}: {msg}"
    );
    for part in [
        url.as_str(),
        "s3://bucket/x.blz/meta/state",
        "timed out",
        "no byte of the answer for 1 s (BLZ_S3_TIMEOUT)",
    ] {
        assert!(msg.contains(part), "{what}: {part:?} not in {msg}");
    }
}

/// An endpoint that accepts connections and never answers.
#[test]
fn a_silent_endpoint_fails_within_the_bound() {
    check_timed_out(Behaviour::Silent, "silent endpoint");
}

/// An endpoint that answers headers and then stalls in the middle of the body.
#[test]
fn an_endpoint_stalling_mid_body_fails_within_the_bound() {
    check_timed_out(Behaviour::StallMidBody, "stall mid-body");
}

/// Nothing listening: the error names the endpoint and says it could not connect.
#[test]
fn a_closed_port_names_the_endpoint() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let (out, took) = blz(&["get", "s3://bucket/x.blz"], &env(&url));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        msg.contains(&url) && msg.contains("could not connect"),
        "{msg}"
    );
}

/// The defaults are the ones `spec/object-store.md` §1 and the README give; the `BLZ_S3_*`
/// variables set them, else `object_store`'s `AWS_*` ones; bad values are refused naming
/// the variable.
#[test]
fn timeouts_default_and_variables() {
    let none = S3Timeouts::from_vars(|_| None).unwrap();
    assert_eq!(none, S3Timeouts::DEFAULT);
    assert_eq!(none, S3Timeouts::default());
    assert_eq!(none.connect, Duration::from_secs(10));
    assert_eq!(none.idle, Duration::from_secs(30));
    assert_eq!(none.request, Duration::from_secs(300));
    assert_eq!(none.retries, 3);
    assert_eq!(none.retry_timeout, Duration::from_secs(60));
    assert_eq!(MAX_BACKOFF, Duration::from_secs(5));
    assert_eq!(none.silent_read_bound(), Duration::from_secs(95));
    assert_eq!(none.request_bound(), Duration::from_secs(365));

    let vars = |pairs: &[(&str, &str)]| {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        S3Timeouts::from_vars(move |k| m.get(k).cloned())
    };
    let t = vars(&[
        ("AWS_CONNECT_TIMEOUT", "2s"),
        ("AWS_READ_TIMEOUT", "1500ms"),
        ("AWS_TIMEOUT", "2m"),
        ("BLZ_S3_RETRIES", "0"),
        ("BLZ_S3_RETRY_TIMEOUT", "7.5"),
    ])
    .unwrap();
    assert_eq!(t.connect, Duration::from_secs(2));
    assert_eq!(t.idle, Duration::from_millis(1500));
    assert_eq!(t.request, Duration::from_secs(120));
    assert_eq!(t.retries, 0);
    assert_eq!(t.retry_timeout, Duration::from_millis(7500));
    // BLZ_S3_* wins over AWS_*.
    let t = vars(&[
        ("AWS_CONNECT_TIMEOUT", "2s"),
        ("BLZ_S3_CONNECT_TIMEOUT", "4"),
        ("AWS_READ_TIMEOUT", "9s"),
        ("BLZ_S3_TIMEOUT", "0.5"),
        ("BLZ_S3_REQUEST_TIMEOUT", "45"),
    ])
    .unwrap();
    assert_eq!(t.connect, Duration::from_secs(4));
    assert_eq!(t.idle, Duration::from_millis(500));
    assert_eq!(t.request, Duration::from_secs(45));
    for (k, v) in [
        ("BLZ_S3_TIMEOUT", "soon"),
        ("BLZ_S3_TIMEOUT", "0"),
        ("BLZ_S3_TIMEOUT", "-1"),
        ("BLZ_S3_CONNECT_TIMEOUT", "10s"),
        ("AWS_READ_TIMEOUT", "3 fortnights"),
        ("BLZ_S3_RETRIES", "many"),
    ] {
        let e = vars(&[(k, v)]).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(k) && m.contains(v)),
            "{k}={v}: {e}"
        );
    }
}

/// Empty components and slashes at either end of the key are refused (the spec forbids
/// them), not taken for the plain name; the message names the URL and what is wrong.
#[test]
fn malformed_urls_are_refused() {
    assert_eq!(
        parse_s3_url("s3://bucket/runs/x.blz").unwrap(),
        ("bucket".to_string(), "runs/x.blz".to_string())
    );
    for (url, what) in [
        ("s3://bucket//x.blz", "empty path component"),
        ("s3://bucket/runs//x.blz", "empty path component"),
        ("s3://bucket/x.blz/", "trailing slash"),
        ("s3://bucket/", "no key"),
        ("s3://bucket", "no key"),
        ("s3:///x.blz", "no bucket"),
        ("s3://bucket/a/../x.blz", "`..`"),
        ("s3://bucket/./x.blz", "`.`"),
    ] {
        let e = parse_s3_url(url).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(url) && m.contains(what)),
            "{url}: {e}"
        );
    }
    // Through the command line, before any request (the endpoint is a closed port).
    let vars = env("http://127.0.0.1:9");
    for url in ["s3://bucket//x.blz", "s3://bucket/x.blz/"] {
        let (out, _) = blz(&["get", url], &vars);
        let msg = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{msg}");
        assert!(msg.contains(url), "{msg}");
        assert!(!msg.contains("connect"), "{msg}");
    }
}
