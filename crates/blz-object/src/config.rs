//! S3 configuration: `s3://` URLs, the standard AWS environment variables, timeouts and retries,
//! payload signing, one client per bucket and configuration.

use blz_format::error::Error;
use blz_format::error::Result;
use object_store::ObjectStore;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
/// Splits `s3://BUCKET/KEY` into the bucket and the key. The key is `/`-separated plain
/// names (`spec/object-store.md` §1): none empty, `.` or `..`, and no slash at either end,
/// so `s3://b//x.blz` and `s3://b/x.blz/` are refused rather than taken for `s3://b/x.blz`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the URL and what is wrong with it.
pub fn parse_s3_url(url: &str) -> Result<(String, String)> {
    let bad = |what: &str| {
        Error::InvalidArgument(format!(
            "{url}: {what}; an object-store dataset is named s3://BUCKET/KEY, the key plain \
             names joined by single slashes"
        ))
    };
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::InvalidArgument(format!("{url} is not an s3:// URL")))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket name"));
    }
    if key.is_empty() {
        return Err(bad("no key after the bucket"));
    }
    if key.starts_with('/') || key.contains("//") {
        return Err(bad("an empty path component (two slashes in a row)"));
    }
    if key.ends_with('/') {
        return Err(bad("a trailing slash"));
    }
    if key.split('/').any(|c| c == "." || c == "..") {
        return Err(bad("a `.` or `..` path component"));
    }
    Ok((bucket.to_string(), key.to_string()))
}

/// The longest pause between two attempts of a request (the backoff starts at 100 ms and
/// grows at random up to this).
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How long the S3 client waits for an endpoint, and how often it tries again
/// (`spec/object-store.md` §1). Each field is set by a `BLZ_S3_*` variable (seconds, a
/// decimal number) or else by `object_store`'s `AWS_*` one where it has one (seconds, or a
/// number with a unit `ms`, `s`, `m`, `h`), and else takes its [`S3Timeouts::DEFAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S3Timeouts {
    /// Longest wait for a connection to the endpoint (`BLZ_S3_CONNECT_TIMEOUT`, else
    /// `AWS_CONNECT_TIMEOUT`; 10 s).
    pub connect: Duration,
    /// Longest a read waits without receiving a byte: for the first byte of the answer, then
    /// between bytes of its body (`BLZ_S3_TIMEOUT`, else `AWS_READ_TIMEOUT`; 30 s). Uploads
    /// and commits have no such bound (the HTTP client counts a request body's sending as
    /// waiting for the answer): [`S3Timeouts::request`] bounds them.
    pub idle: Duration,
    /// Longest one attempt of any request takes, from connecting to its last byte
    /// (`BLZ_S3_REQUEST_TIMEOUT`, else `AWS_TIMEOUT`; 300 s).
    pub request: Duration,
    /// Most times a failed request is tried again (`BLZ_S3_RETRIES`; 3). Retried: a
    /// failure to connect, a timeout, a dropped connection, a 5xx or 429 answer.
    pub retries: usize,
    /// No retry starts later than this after a request's first attempt
    /// (`BLZ_S3_RETRY_TIMEOUT`; 60 s).
    pub retry_timeout: Duration,
}

impl Default for S3Timeouts {
    fn default() -> Self {
        S3Timeouts::DEFAULT
    }
}

/// Reads a duration: a decimal number of seconds, or (`with_units`) a number followed by
/// `ms`, `s`, `m` or `h`.
pub(crate) fn parse_duration(var: &str, value: &str, with_units: bool) -> Result<Duration> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let scale = match unit.trim() {
        "" => 1.0,
        "ms" if with_units => 1e-3,
        "s" if with_units => 1.0,
        "m" | "min" if with_units => 60.0,
        "h" if with_units => 3600.0,
        _ => f64::NAN,
    };
    let secs = num.parse::<f64>().map_or(f64::NAN, |n| n * scale);
    if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
        return Err(Error::InvalidArgument(format!(
            "{var}={value:?}: expected a positive number of seconds{}",
            if with_units {
                " (or a number with a unit ms, s, m or h)"
            } else {
                ""
            }
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl S3Timeouts {
    /// The values blz uses when no variable sets them: 10 s to connect, 30 s without a byte
    /// while reading, 300 s for one attempt of a request, 3 retries started within 60 s.
    pub const DEFAULT: S3Timeouts = S3Timeouts {
        connect: Duration::from_secs(10),
        idle: Duration::from_secs(30),
        request: Duration::from_secs(300),
        retries: 3,
        retry_timeout: Duration::from_secs(60),
    };

    /// The settings the environment of this process gives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a variable whose value is not a duration (or, for
    /// `BLZ_S3_RETRIES`, a count).
    pub fn from_env() -> Result<S3Timeouts> {
        S3Timeouts::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings the variables `var` returns give (`var(name)` is the value of the
    /// environment variable `name`, if set).
    ///
    /// # Errors
    /// As [`S3Timeouts::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<S3Timeouts> {
        let d = S3Timeouts::DEFAULT;
        let duration = |blz: &str, aws: Option<&str>, default: Duration| -> Result<Duration> {
            if let Some(v) = var(blz).filter(|v| !v.is_empty()) {
                return parse_duration(blz, &v, false);
            }
            match aws.and_then(|a| var(a).filter(|v| !v.is_empty()).map(|v| (a, v))) {
                Some((a, v)) => parse_duration(a, &v, true),
                None => Ok(default),
            }
        };
        let retries = match var("BLZ_S3_RETRIES").filter(|v| !v.is_empty()) {
            Some(v) => v.trim().parse::<usize>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "BLZ_S3_RETRIES={v:?}: expected a whole number of retries"
                ))
            })?,
            None => d.retries,
        };
        Ok(S3Timeouts {
            connect: duration(
                "BLZ_S3_CONNECT_TIMEOUT",
                Some("AWS_CONNECT_TIMEOUT"),
                d.connect,
            )?,
            idle: duration("BLZ_S3_TIMEOUT", Some("AWS_READ_TIMEOUT"), d.idle)?,
            request: duration("BLZ_S3_REQUEST_TIMEOUT", Some("AWS_TIMEOUT"), d.request)?,
            retries,
            retry_timeout: duration("BLZ_S3_RETRY_TIMEOUT", None, d.retry_timeout)?,
        })
    }

    /// The longest a read waits on an endpoint that sends nothing (one that never answers,
    /// or stalls in the middle of an answer) before it fails:
    /// `retry_timeout + MAX_BACKOFF + idle` (95 s with the defaults; two attempts of 30 s
    /// in practice).
    pub fn silent_read_bound(&self) -> Duration {
        self.retry_timeout + MAX_BACKOFF + self.idle
    }

    /// The longest any request takes before it fails, whatever the endpoint does:
    /// `retry_timeout + MAX_BACKOFF + request` (365 s with the defaults).
    pub fn request_bound(&self) -> Duration {
        self.retry_timeout + MAX_BACKOFF + self.request
    }

    pub(crate) fn retry_config(&self) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: MAX_BACKOFF,
                base: 2.0,
            },
            max_retries: self.retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// A duration as `object_store`'s configuration takes it.
pub(crate) fn config_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Seconds for messages: `30 s`, `1.5 s`.
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The S3 clients of a bucket: one for reads (with the no-progress bound) and one for
/// writes, and what error messages say of them.
#[derive(Clone)]
pub(crate) struct S3Clients {
    pub(crate) read: Arc<dyn ObjectStore>,
    pub(crate) write: Arc<dyn ObjectStore>,
    pub(crate) endpoint: String,
    pub(crate) timeouts: S3Timeouts,
}

/// The S3 clients for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP`, ...) and [`S3Timeouts::from_env`]. Made once per bucket and
/// configuration in a process: a later open of a dataset there skips building them (about
/// 10 ms) and finds their connections open.
pub(crate) fn s3_clients(bucket: &str) -> Result<S3Clients> {
    /// Clients kept at most: past it (a process going through many configurations), the
    /// kept ones are dropped and made again when next used.
    const KEPT: usize = 64;
    // One per process: a forked child makes its own, whose connections are its own.
    static CLIENTS: blz_format::process::PerProcess<Mutex<HashMap<String, S3Clients>>> =
        blz_format::process::PerProcess::new();
    // Everything the clients are made from: the bucket and every variable read.
    let mut config: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("BLZ_S3_"))
        .collect();
    config.sort();
    let key = format!("{bucket}\n{config:?}");
    let clients = CLIENTS.get_or_init(Mutex::default);
    let lock = || {
        clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(c) = lock().get(&key) {
        return Ok(c.clone());
    }
    let made = make_s3_clients(bucket)?;
    let mut kept = lock();
    if kept.len() >= KEPT {
        kept.clear();
    }
    Ok(kept.entry(key).or_insert(made).clone())
}

/// New S3 clients for `bucket` ([`s3_clients`]).
pub(crate) fn make_s3_clients(bucket: &str) -> Result<S3Clients> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
    use object_store::ClientConfigKey as C;
    let timeouts = S3Timeouts::from_env()?;
    let base = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(timeouts.retry_config())
        .with_config(
            K::Client(C::ConnectTimeout),
            config_duration(timeouts.connect),
        )
        .with_config(K::Client(C::Timeout), config_duration(timeouts.request));
    let endpoint = base.get_config_value(&K::Endpoint).unwrap_or_else(|| {
        let region = base
            .get_config_value(&K::Region)
            .unwrap_or_else(|| "us-east-1".into());
        format!("https://s3.{region}.amazonaws.com")
    });
    let base = sign_payloads(base, &endpoint, |name| std::env::var_os(name).is_some());
    let build = |b: AmazonS3Builder| -> Result<Arc<dyn ObjectStore>> {
        let store = b
            .build()
            .map_err(|e| Error::InvalidArgument(format!("s3://{bucket}: {e}")))?;
        Ok(Arc::new(store))
    };
    let read = build(
        base.clone()
            .with_config(K::Client(C::ReadTimeout), config_duration(timeouts.idle)),
    )?;
    let write = build(base)?;
    Ok(S3Clients {
        read,
        write,
        endpoint,
        timeouts,
    })
}

/// The environment variable `object_store` reads to set payload signing (`true` or
/// `false`).
pub const UNSIGNED_PAYLOAD_VAR: &str = "AWS_UNSIGNED_PAYLOAD";

/// `base` set to send request bodies to `endpoint` unsigned (`UNSIGNED-PAYLOAD`) or signed,
/// unless [`UNSIGNED_PAYLOAD_VAR`] `is_set` (then `base` as it is: the builder has read
/// the variable). Over HTTPS they go unsigned, as the AWS CLI's and SDKs' do: TLS guards
/// the bytes in transit (and every chunk carries its own checksum, checked when read), so
/// the SHA-256 a signed body needs would only be one more pass over every byte uploaded, on
/// the writer's CPU. Over plain HTTP the body is signed: nothing else guards its bytes
/// between client and server (`spec/object-store.md` §1).
pub(crate) fn sign_payloads(
    base: object_store::aws::AmazonS3Builder,
    endpoint: &str,
    is_set: impl Fn(&str) -> bool,
) -> object_store::aws::AmazonS3Builder {
    if is_set(UNSIGNED_PAYLOAD_VAR) {
        return base;
    }
    let scheme = endpoint.split_once("://").map_or("", |(s, _)| s);
    base.with_unsigned_payload(scheme.eq_ignore_ascii_case("https"))
}

/// The S3 client for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP`, ...) and the timeouts of [`S3Timeouts::from_env`] (the no-progress
/// bound included: use it to read).
///
/// # Errors
/// [`Error::InvalidArgument`] when the configuration is incomplete or malformed.
pub fn s3_store(bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    Ok(s3_clients(bucket)?.read)
}
