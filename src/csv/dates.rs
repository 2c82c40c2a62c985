//! Dates and timestamps in CSV cells: what inference recognises as one (ISO 8601
//! `YYYY-MM-DD`, optionally `T` or a space and `HH:MM`, `HH:MM:SS` or `HH:MM:SS.f…` up to 9
//! digits, optionally `Z` or an offset `±HH:MM`, `±HHMM`, `±HH`), and the parsing of any
//! `datetime64` cell with an offset into the UTC instant it names.

use crate::datetime::parse_datetime;
use crate::dtype::TimeUnit;
use crate::error::{Error, Result};

/// What a cell that looks like a date or timestamp holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// It has a time of day.
    pub time: bool,
    /// Digits of its fraction of a second (0 without one).
    pub frac: u8,
    /// It ends in `Z` or an offset: an instant.
    pub zoned: bool,
}

/// Splits a trailing `Z` or UTC offset off the time part of `s` (the text after the date's
/// `T` or space): the text without it and the offset east of UTC in seconds.
fn split_offset(s: &str) -> (&str, Option<i64>) {
    let Some(sep) = s.find(['T', ' ']) else {
        return (s, None);
    };
    if let Some(body) = s.strip_suffix('Z') {
        return (body, Some(0));
    }
    let time = &s[sep + 1..];
    let Some(at) = time.rfind(['+', '-']) else {
        return (s, None);
    };
    match crate::table::fixed_offset_seconds(&time[at..]) {
        Some(off) => (&s[..sep + 1 + at], Some(i64::from(off))),
        None => (s, None),
    }
}

fn digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

/// The shape of `t` (trimmed) when it is an ISO date or timestamp inference takes (see the
/// module documentation); `None` otherwise. The fields' ranges are checked by parsing.
pub(super) fn shape(t: &str) -> Option<Shape> {
    let b = t.as_bytes();
    if b.len() < 10
        || !digits(&b[..4])
        || b[4] != b'-'
        || !digits(&b[5..7])
        || b[7] != b'-'
        || !digits(&b[8..10])
    {
        return None;
    }
    if b.len() == 10 {
        return Some(Shape {
            time: false,
            frac: 0,
            zoned: false,
        });
    }
    if b[10] != b'T' && b[10] != b' ' {
        return None;
    }
    let (body, off) = split_offset(t);
    let time = body.get(11..)?.as_bytes();
    // HH:MM, HH:MM:SS or HH:MM:SS.f{1,9}
    let frac = match time.len() {
        5 | 8 => 0,
        n if (10..=18).contains(&n) && time[8] == b'.' && digits(&time[9..]) => (n - 9) as u8,
        _ => return None,
    };
    let hm = digits(&time[..2]) && time[2] == b':' && digits(&time[3..5]);
    let s = time.len() == 5 || (time[5] == b':' && digits(&time[6..8]));
    (hm && s).then_some(Shape {
        time: true,
        frac,
        zoned: off.is_some(),
    })
}

/// The unit a column of shapes needs: days when none has a time of day, else seconds,
/// milliseconds, microseconds or nanoseconds as its longest fraction needs.
pub(super) fn unit_for(time: bool, frac: u8) -> TimeUnit {
    match (time, frac) {
        (false, _) => TimeUnit::Day,
        (true, 0) => TimeUnit::Second,
        (true, 1..=3) => TimeUnit::Millisecond,
        (true, 4..=6) => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

/// Parses a `datetime64[unit]` cell as [`parse_datetime`] does, and besides an offset
/// after the time (`+02:00`, `-0500`, `+01`): the value is then the UTC instant the text
/// names. Text without an offset is taken as it reads (as UTC in a zoned column).
///
/// # Errors
/// As [`parse_datetime`]; an instant that does not fit the unit.
pub(super) fn parse_instant(text: &str, unit: TimeUnit) -> Result<i64> {
    let t = text.trim();
    let (body, off) = split_offset(t);
    match off {
        None | Some(0) => parse_datetime(body, unit),
        Some(secs) => {
            let local = parse_datetime(body, unit)?;
            // The offset in whole units (an offset of minutes in a column of hours is not).
            let shift = crate::datetime::convert_timedelta(secs, TimeUnit::Second, unit)
                .filter(|&k| {
                    unit_is_subdaily(unit)
                        && crate::datetime::convert_timedelta(k, unit, TimeUnit::Second)
                            == Some(secs)
                })
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{text:?}: its offset from UTC is not a whole number of the column's unit \
                         ({unit:?})"
                    ))
                })?;
            local.checked_sub(shift).ok_or_else(|| {
                Error::InvalidArgument(format!("{text:?} is out of the range of datetime64"))
            })
        }
    }
}

fn unit_is_subdaily(unit: TimeUnit) -> bool {
    !matches!(
        unit,
        TimeUnit::Year | TimeUnit::Month | TimeUnit::Week | TimeUnit::Day
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let s = |t| shape(t);
        assert_eq!(
            s("2020-01-02"),
            Some(Shape {
                time: false,
                frac: 0,
                zoned: false
            })
        );
        assert_eq!(s("2020-01-02 10:11").map(|x| x.frac), Some(0));
        assert_eq!(s("2020-01-02T10:11:12.123456").map(|x| x.frac), Some(6));
        assert_eq!(s("2020-01-02T10:11:12.123456789").map(|x| x.frac), Some(9));
        assert!(s("2020-01-02T10:11:12Z").unwrap().zoned);
        assert!(s("2020-01-02T10:11:12.5+05:30").unwrap().zoned);
        assert!(s("2020-01-02 10:11:12-0800").unwrap().zoned);
        for bad in [
            "2020-1-02",
            "20200102",
            "2020-01-02T",
            "2020-01-02T10",
            "2020-01-02T10:11:12.",
            "2020-01-02T10:11:12.1234567890",
            "2020-01-02x",
            "2020-01-02T10:11+5",
        ] {
            assert_eq!(s(bad), None, "{bad:?}");
        }
        assert_eq!(unit_for(true, 2), TimeUnit::Millisecond);
        assert_eq!(unit_for(true, 9), TimeUnit::Nanosecond);
    }

    #[test]
    fn instants() {
        let ns = TimeUnit::Nanosecond;
        let utc = parse_datetime("2020-03-29T01:30", ns).unwrap();
        for t in [
            "2020-03-29T01:30Z",
            "2020-03-29T03:30+02:00",
            "2020-03-29 03:30:00+0200",
            "2020-03-28T20:30-05",
        ] {
            assert_eq!(parse_instant(t, ns).unwrap(), utc, "{t}");
        }
        assert_eq!(parse_instant("2020-03-29", TimeUnit::Day).unwrap(), 18_350);
        assert!(parse_instant("2020-03-29T03:30+02:00", TimeUnit::Day).is_err());
        assert!(parse_instant("2020-03-29T03:00+05:30", TimeUnit::Hour).is_err());
        assert!(parse_instant("2020-03-29T03:00+05:00", TimeUnit::Hour).is_ok());
    }
}
