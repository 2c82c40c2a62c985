//! Time zones of `datetime64` columns (`spec/table.md` §2.3). A column with a zone stores
//! instants exactly as a column without one does (a count of its unit since
//! 1970-01-01T00:00 UTC, NaT for missing); its field records the zone they are shown in,
//! as pandas' `datetime64[ns, tz]` and Arrow's `Timestamp(unit, Some(tz))` do. Nothing in
//! the stored values depends on the zone, so the zone is metadata only: reading, statistics
//! and comparisons are those of the UTC values, and a reader that ignores the key reads UTC.
//!
//! A zone is what Arrow's `Tz` parses (and so pyarrow, DataFusion and duckdb): an IANA name
//! of the tz database (`"UTC"`, `"Europe/Paris"`, `"America/New_York"`, case as the
//! database spells it) or a fixed offset from UTC, `+HH:MM`, `+HHMM` or `+HH` (or `-`).

use super::Table;
use crate::column::LeafKind;
use crate::dtype::{DType, TimeUnit};
use crate::error::{Error, Result};

/// Whether `tz` is a fixed offset `±HH:MM`, `±HHMM` or `±HH` (hours 0..=23, minutes
/// 0..=59), as Arrow reads one; its offset east of UTC in seconds.
pub(crate) fn fixed_offset_seconds(tz: &str) -> Option<i32> {
    let b = tz.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = |s: &[u8]| -> Option<i32> {
        (s.len() == 2 && s.iter().all(u8::is_ascii_digit))
            .then(|| i32::from(s[0] - b'0') * 10 + i32::from(s[1] - b'0'))
    };
    let rest = &b[1..];
    let (h, m) = match rest.len() {
        2 => (digits(rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    (h <= 23 && m <= 59).then_some(sign * (h * 3600 + m * 60))
}

/// Checks a time zone name: an IANA name of the tz database or a fixed offset (see the
/// [module documentation](self)).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the zone.
pub(crate) fn check_timezone(tz: &str) -> Result<()> {
    if fixed_offset_seconds(tz).is_some() || tz.parse::<chrono_tz::Tz>().is_ok() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "unknown time zone {tz:?}: give an IANA name such as \"UTC\" or \"Europe/Paris\", or \
         a fixed offset such as \"+05:30\""
    )))
}

/// Whether a `datetime64` of `unit` can take a zone: seconds and finer units down to
/// nanoseconds, and hours and minutes (Arrow's timestamps; days and coarser units are
/// calendar dates, which have no zone, and Arrow has no unit finer than nanoseconds).
fn zoned_unit(unit: TimeUnit) -> bool {
    matches!(
        unit,
        TimeUnit::Hour
            | TimeUnit::Minute
            | TimeUnit::Second
            | TimeUnit::Millisecond
            | TimeUnit::Microsecond
            | TimeUnit::Nanosecond
    )
}

/// Checks that column `path` of `kind` can have the zone `tz`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the column: `tz` is not a zone, or the column is not a
/// `datetime64` of hours .. nanoseconds.
pub(crate) fn check_leaf_zone(path: &str, kind: LeafKind, tz: &str) -> Result<()> {
    match kind {
        LeafKind::Fixed(DType::DateTime(u)) if zoned_unit(u) => check_timezone(tz)
            .map_err(|e| Error::InvalidArgument(format!("column {path}: {}", reason(e)))),
        _ => Err(Error::InvalidArgument(format!(
            "column {path} holds {}: only a datetime64 column of hours to nanoseconds takes a \
             time zone (here {tz:?})",
            kind.name()
        ))),
    }
}

fn reason(e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => m,
        other => other.to_string(),
    }
}

impl Table {
    /// The time zone of column `name` (`None`: a column without one, which is every column
    /// but a zoned `datetime64`'s).
    ///
    /// # Errors
    /// An unknown column.
    pub fn timezone(&self, name: &str) -> Result<Option<&str>> {
        Ok(self.col(name)?.leaf.timezone.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones() {
        for ok in [
            "UTC",
            "Europe/Paris",
            "America/New_York",
            "+05:30",
            "-0800",
            "+01",
        ] {
            check_timezone(ok).unwrap();
        }
        for bad in [
            "",
            "utc ",
            "Mars/Olympus",
            "+24:00",
            "+5:30",
            "05:30",
            "+01:60",
        ] {
            assert!(check_timezone(bad).is_err(), "{bad:?}");
        }
        assert_eq!(fixed_offset_seconds("-05:30"), Some(-19_800));
        assert_eq!(fixed_offset_seconds("+0100"), Some(3600));
        let ns = LeafKind::Fixed(DType::DateTime(TimeUnit::Nanosecond));
        check_leaf_zone("t", ns, "UTC").unwrap();
        let day = LeafKind::Fixed(DType::DateTime(TimeUnit::Day));
        let e = check_leaf_zone("d", day, "UTC").unwrap_err().to_string();
        assert!(e.contains("column d") && e.contains("datetime64[D]"), "{e}");
        let e = check_leaf_zone("t", ns, "Nowhere").unwrap_err().to_string();
        assert!(e.contains("column t") && e.contains("Nowhere"), "{e}");
    }
}
