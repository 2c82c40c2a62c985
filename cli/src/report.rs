//! How commands report to a person: progress bars, sizes and counts in words, what `verify`
//! found, what `compact` saved.

use crate::failure::{describe, say, Failure};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// A progress bar on standard error, hidden when standard error is not a terminal.
pub(crate) fn progress(total: u64, what: &str, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{msg}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} ({{eta}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}

/// `1.5 MiB` for a byte count.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// `1 file`, `3 files`.
pub(crate) fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub(crate) use blz::ingest::shape_str;

/// What a problem `verify` found is: damage, a file that is not there (a GlusterFS brick
/// that is down, a file removed by hand), or one that cannot be read.
pub(crate) fn problem_kind(e: &blz::Error) -> &'static str {
    match e {
        blz::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "missing",
        blz::Error::Io { .. } => "unreadable",
        blz::Error::InvalidMetadata { .. } | blz::Error::NotBlz { .. } => "corrupt meta",
        _ => "corrupt",
    }
}

/// Prints what `verify` found in the `chunks` chunks of the dataset at `path` (held in
/// `place`: "3 files", "5 columns"), and fails when `errors` is not empty. `digests`: what
/// the chunks' checksums are ("crc32"), `None` when they have none (then only decoding
/// was checked, and `verify` says so).
pub(crate) fn report_verify(
    path: &Path,
    errors: &[blz::Error],
    chunks: u64,
    place: &str,
    digests: Option<&str>,
) -> Result<(), Failure> {
    // A writer's commit met while reading: the caller verifies the new state.
    if let Some(e @ blz::Error::Changed { .. }) = errors.first() {
        return Err(Failure::from(blz::Error::Changed {
            path: match e {
                blz::Error::Changed { path } => path.clone(),
                _ => path.to_path_buf(),
            },
        }));
    }
    // A damaged file header makes every chunk of the file fail the same way: say it once.
    let mut seen: Vec<(String, &str, u64)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for e in errors {
        let m = describe(e);
        match index.get(&m) {
            Some(&i) => seen[i].2 += 1,
            None => {
                index.insert(m.clone(), seen.len());
                seen.push((m, problem_kind(e), 1));
            }
        }
    }
    for (m, kind, c) in &seen {
        if *c > 1 {
            say!("{kind}: {m} ({c} chunks)");
        } else {
            say!("{kind}: {m}");
        }
    }
    let checked = match digests {
        Some(d) => format!("verified ({d} digests)"),
        None => {
            "decoded (no digests are stored: damage that still decodes cannot be seen)".to_string()
        }
    };
    if errors.is_empty() {
        say!(
            "{}: {} in {place} {checked}, all intact",
            path.display(),
            plural(chunks, "chunk"),
        );
        Ok(())
    } else {
        let count = |k: &str| errors.iter().filter(|e| problem_kind(e) == k).count();
        let parts: Vec<String> = ["corrupt", "corrupt meta", "missing", "unreadable"]
            .iter()
            .map(|k| (k, count(k)))
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        say!(
            "{}: {} in {place} {checked}, {}",
            path.display(),
            plural(chunks, "chunk"),
            parts.join(", ")
        );
        Err(Failure::new(format!(
            "{}: {}",
            path.display(),
            if count("corrupt") == errors.len() {
                format!("{} of {chunks} chunks are corrupt", errors.len())
            } else {
                format!("not intact ({})", parts.join(", "))
            }
        )))
    }
}

/// Bytes stored of the given files (missing ones count 0).
pub(crate) fn disk_bytes(storage: &dyn blz::Storage, files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|f| {
            storage
                .open(f, blz::storage::OpenMode::Read)
                .ok()?
                .len()
                .ok()
        })
        .sum()
}

/// Runs a compaction of the superchunk `files` of the dataset at `path` behind a spinner and
/// says what it saved.
pub(crate) fn run_compaction(
    path: &Path,
    storage: &dyn blz::Storage,
    files: &[PathBuf],
    compact: impl FnOnce() -> blz::Result<u64>,
) -> Result<(), Failure> {
    let before = disk_bytes(storage, files);
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new_spinner();
        pb.set_message(format!("compacting {}", plural(files.len() as u64, "file")));
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        pb
    } else {
        ProgressBar::hidden()
    };
    let saved = compact();
    pb.finish_and_clear();
    let saved = saved?;
    say!(
        "compacted {} of {}: saved {saved} bytes ({} -> {})",
        plural(files.len() as u64, "file"),
        path.display(),
        human(before),
        human(disk_bytes(storage, files))
    );
    Ok(())
}
