//! numpy's `datetime64` and `timedelta64` values: ISO 8601 text in and out, in every unit,
//! and the exact instants and lengths they stand for (to compare values of two units and to
//! convert them to Arrow's types).
//!
//! A `datetime64[unit]` is a signed 64-bit count of units since 1970-01-01T00:00 in the
//! proleptic Gregorian calendar, without a time zone; a `timedelta64[unit]` is a count of
//! units. [`NAT`] (`i64::MIN`) is NaT in both, as in numpy.

use crate::error::{Error, Result};
use std::fmt;

/// The unit of a `datetime64` or `timedelta64` element: every unit numpy has. A stored value
/// is a signed 64-bit count of this unit (since 1970-01-01T00:00 for dates); `i64::MIN` is
/// NaT ("not a time"), as in numpy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeUnit {
    /// Years (`Y`): calendar years since 1970.
    Year,
    /// Months (`M`): calendar months since 1970-01.
    Month,
    /// Weeks (`W`): 7 days.
    Week,
    /// Days (`D`).
    Day,
    /// Hours (`h`).
    Hour,
    /// Minutes (`m`).
    Minute,
    /// Seconds (`s`).
    Second,
    /// Milliseconds (`ms`).
    Millisecond,
    /// Microseconds (`us`).
    Microsecond,
    /// Nanoseconds (`ns`).
    Nanosecond,
    /// Picoseconds (`ps`).
    Picosecond,
    /// Femtoseconds (`fs`).
    Femtosecond,
    /// Attoseconds (`as`).
    Attosecond,
}

/// The value that stands for NaT (not a time) in a `datetime64` or `timedelta64` element.
pub const NAT: i64 = i64::MIN;

impl TimeUnit {
    /// Every unit, coarsest first.
    pub const ALL: [TimeUnit; 13] = [
        TimeUnit::Year,
        TimeUnit::Month,
        TimeUnit::Week,
        TimeUnit::Day,
        TimeUnit::Hour,
        TimeUnit::Minute,
        TimeUnit::Second,
        TimeUnit::Millisecond,
        TimeUnit::Microsecond,
        TimeUnit::Nanosecond,
        TimeUnit::Picosecond,
        TimeUnit::Femtosecond,
        TimeUnit::Attosecond,
    ];

    /// numpy's code for the unit: `Y`, `M`, `W`, `D`, `h`, `m`, `s`, `ms`, `us`, `ns`, `ps`,
    /// `fs`, `as`.
    pub fn code(self) -> &'static str {
        match self {
            TimeUnit::Year => "Y",
            TimeUnit::Month => "M",
            TimeUnit::Week => "W",
            TimeUnit::Day => "D",
            TimeUnit::Hour => "h",
            TimeUnit::Minute => "m",
            TimeUnit::Second => "s",
            TimeUnit::Millisecond => "ms",
            TimeUnit::Microsecond => "us",
            TimeUnit::Nanosecond => "ns",
            TimeUnit::Picosecond => "ps",
            TimeUnit::Femtosecond => "fs",
            TimeUnit::Attosecond => "as",
        }
    }

    /// The unit of a numpy code (`μs` is accepted for `us`, as numpy does).
    pub fn from_code(code: &str) -> Option<TimeUnit> {
        let code = if code == "\u{3bc}s" { "us" } else { code };
        TimeUnit::ALL.into_iter().find(|u| u.code() == code)
    }

    /// The unit's length in attoseconds for the units of fixed length (weeks and finer);
    /// `None` for years and months, whose length varies.
    pub fn attoseconds(self) -> Option<i128> {
        const S: i128 = 1_000_000_000_000_000_000;
        Some(match self {
            TimeUnit::Year | TimeUnit::Month => return None,
            TimeUnit::Week => 7 * 86_400 * S,
            TimeUnit::Day => 86_400 * S,
            TimeUnit::Hour => 3_600 * S,
            TimeUnit::Minute => 60 * S,
            TimeUnit::Second => S,
            TimeUnit::Millisecond => S / 1_000,
            TimeUnit::Microsecond => S / 1_000_000,
            TimeUnit::Nanosecond => S / 1_000_000_000,
            TimeUnit::Picosecond => 1_000_000,
            TimeUnit::Femtosecond => 1_000,
            TimeUnit::Attosecond => 1,
        })
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

const ATTOS_PER_SECOND: i128 = 1_000_000_000_000_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i128, m: u32, d: u32) -> i128 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i128::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i128::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of a count of days since 1970-01-01.
pub(crate) fn civil_from_days(z: i128) -> (i128, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The instant a `datetime64[unit]` value `v` stands for, as (whole seconds since the
/// epoch, attoseconds past that second): exact for every unit and value, ordered as the
/// instants are. `None` for NaT.
pub fn instant(v: i64, unit: TimeUnit) -> Option<(i128, i64)> {
    if v == NAT {
        return None;
    }
    let v = i128::from(v);
    let days = |d: i128| (d * 86_400, 0);
    Some(match unit {
        TimeUnit::Year => days(days_from_civil(1970 + v, 1, 1)),
        TimeUnit::Month => days(days_from_civil(
            1970 + v.div_euclid(12),
            (v.rem_euclid(12) + 1) as u32,
            1,
        )),
        other => {
            let a = other.attoseconds().unwrap_or(1);
            if a >= ATTOS_PER_SECOND {
                (v * (a / ATTOS_PER_SECOND), 0)
            } else {
                let per = ATTOS_PER_SECOND / a;
                (v.div_euclid(per), (v.rem_euclid(per) * a) as i64)
            }
        }
    })
}

/// The `datetime64[unit]` value of an instant (seconds, attoseconds past it), rounded down
/// to the unit as numpy's casts do; `None` when it does not fit (or would be NaT).
pub(crate) fn from_instant(secs: i128, attos: i64, unit: TimeUnit) -> Option<i64> {
    let v: i128 = match unit {
        TimeUnit::Year | TimeUnit::Month => {
            let (y, m, _) = civil_from_days(secs.div_euclid(86_400));
            if unit == TimeUnit::Year {
                y - 1970
            } else {
                (y - 1970) * 12 + i128::from(m) - 1
            }
        }
        other => {
            let a = other.attoseconds().unwrap_or(1);
            if a >= ATTOS_PER_SECOND {
                secs.div_euclid(a / ATTOS_PER_SECOND)
            } else {
                let per = ATTOS_PER_SECOND / a;
                secs.checked_mul(per)?.checked_add(i128::from(attos) / a)?
            }
        }
    };
    i64::try_from(v).ok().filter(|&x| x != NAT)
}

/// Converts a `datetime64` value from one unit to another, rounding down as numpy's casts
/// do. NaT stays NaT; `None` when the value does not fit the other unit.
pub fn convert_datetime(v: i64, from: TimeUnit, to: TimeUnit) -> Option<i64> {
    match instant(v, from) {
        None => Some(NAT),
        Some((s, a)) => from_instant(s, a, to),
    }
}

/// The length a `timedelta64[unit]` value stands for: months for the `Y` and `M` units,
/// (seconds, attoseconds) for the others. Lengths of the two kinds cannot be compared (as
/// in numpy, which refuses to cast years and months to days).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Length {
    /// A number of calendar months.
    Months(i128),
    /// A fixed length: whole seconds, then attoseconds (floored, as [`instant`]).
    Fixed(i128, i64),
}

/// The length of a `timedelta64[unit]` value; `None` for NaT.
pub fn length(v: i64, unit: TimeUnit) -> Option<Length> {
    if v == NAT {
        return None;
    }
    Some(match unit {
        TimeUnit::Year => Length::Months(i128::from(v) * 12),
        TimeUnit::Month => Length::Months(i128::from(v)),
        other => {
            let (s, a) = instant(v, other)?;
            Length::Fixed(s, a)
        }
    })
}

/// Converts a `timedelta64` value from one unit to another as numpy does (rounding down for
/// a coarser unit); NaT stays NaT. `None` when it does not fit, or when one unit is
/// `Y`/`M` and the other is not (numpy refuses that cast).
pub fn convert_timedelta(v: i64, from: TimeUnit, to: TimeUnit) -> Option<i64> {
    if v == NAT {
        return Some(NAT);
    }
    let months = |u: TimeUnit| match u {
        TimeUnit::Year => Some(12i128),
        TimeUnit::Month => Some(1),
        _ => None,
    };
    let r = match (months(from), months(to)) {
        (Some(f), Some(t)) => (i128::from(v) * f).div_euclid(t),
        (None, None) => {
            let f = from.attoseconds()?;
            let t = to.attoseconds()?;
            if f >= t {
                i128::from(v).checked_mul(f / t)?
            } else {
                i128::from(v).div_euclid(t / f)
            }
        }
        _ => return None,
    };
    i64::try_from(r).ok().filter(|&x| x != NAT)
}

fn bad(s: &str, unit: TimeUnit, why: &str) -> Error {
    Error::InvalidArgument(format!("{s:?} is not a datetime64[{unit}] ({why})"))
}

fn num(s: &str, what: &str, text: &str, unit: TimeUnit) -> Result<i128> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 30 {
        return Err(bad(text, unit, &format!("bad {what}")));
    }
    s.parse::<i128>()
        .map_err(|_| bad(text, unit, &format!("bad {what}")))
}

/// The unit numpy gives a date's text (`np.datetime64(text)`): `Y` for `2020`, `M` for
/// `2020-01`, `D` for a date, `h`, `m` or `s` for a time to the hour, minute or second, and
/// `ms`, `us`, `ns`, `ps`, `fs` or `as` for 1-3, 4-6, ... 16-18 digits of a second's
/// fraction. NaT (and text that is not a date, which [`parse_datetime`] refuses) gets `s`.
pub fn natural_unit(text: &str) -> TimeUnit {
    let s = text.trim();
    let s = s.strip_suffix('Z').unwrap_or(s);
    if s.eq_ignore_ascii_case("nat") {
        return TimeUnit::Second;
    }
    let (date, time) = match s.find(['T', ' ']) {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let Some(time) = time else {
        let body = date.strip_prefix(['-', '+']).unwrap_or(date);
        return match body.split('-').count() {
            1 => TimeUnit::Year,
            2 => TimeUnit::Month,
            _ => TimeUnit::Day,
        };
    };
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    match (hms.split(':').count(), frac.map(str::len)) {
        (1, _) => TimeUnit::Hour,
        (2, _) => TimeUnit::Minute,
        (_, None) => TimeUnit::Second,
        // Milliseconds (`ALL[7]`) for 1-3 digits, then one unit finer per 3 digits.
        (_, Some(n)) => TimeUnit::ALL[7 + (n.clamp(1, 18) - 1) / 3],
    }
}

/// Parses a date or date-time as numpy's `datetime64` does, into a `datetime64[unit]`
/// value: `NaT` (any case), `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, then optionally `T` (or a space)
/// and `hh`, `hh:mm`, `hh:mm:ss` or `hh:mm:ss.fff…` (up to 18 digits), optionally ending
/// in `Z`. A year may have a sign and more than four digits. A value finer than the unit is
/// rounded down, as numpy does.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the text for malformed dates, fields out of range and
/// values that do not fit the unit.
pub fn parse_datetime(text: &str, unit: TimeUnit) -> Result<i64> {
    let s = text.trim();
    if s.eq_ignore_ascii_case("nat") {
        return Ok(NAT);
    }
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = match s.find(['T', ' ']) {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let (neg, date) = match date.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, date.strip_prefix('+').unwrap_or(date)),
    };
    let mut parts = date.split('-');
    let y = num(parts.next().unwrap_or(""), "year", text, unit)?;
    let y = if neg { -y } else { y };
    let m = match parts.next() {
        Some(p) => num(p, "month", text, unit)?,
        None => 1,
    };
    let d = match parts.next() {
        Some(p) => num(p, "day", text, unit)?,
        None => 1,
    };
    if parts.next().is_some() {
        return Err(bad(text, unit, "too many fields"));
    }
    if !(1..=12).contains(&m) {
        return Err(bad(text, unit, "month out of range"));
    }
    let (ny, nm, _) = civil_from_days(days_from_civil(y, m as u32, 1) + 31);
    let month_len = days_from_civil(ny, nm, 1) - days_from_civil(y, m as u32, 1);
    if d < 1 || d > month_len {
        return Err(bad(text, unit, "day out of range"));
    }
    let mut secs = days_from_civil(y, m as u32, d as u32) * 86_400;
    let mut attos: i64 = 0;
    if let Some(t) = time {
        let (hms, frac) = match t.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (t, None),
        };
        let mut f = hms.split(':');
        let h = num(f.next().unwrap_or(""), "hour", text, unit)?;
        let mi = f.next().map(|p| num(p, "minute", text, unit)).transpose()?;
        let se = f.next().map(|p| num(p, "second", text, unit)).transpose()?;
        if f.next().is_some() || (frac.is_some() && se.is_none()) {
            return Err(bad(text, unit, "malformed time"));
        }
        let (mi, se) = (mi.unwrap_or(0), se.unwrap_or(0));
        if h > 23 || mi > 59 || se > 59 {
            return Err(bad(text, unit, "time out of range"));
        }
        secs += h * 3600 + mi * 60 + se;
        if let Some(fr) = frac {
            if fr.is_empty() || fr.len() > 18 || !fr.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(text, unit, "bad fraction of a second"));
            }
            let padded = format!("{fr:0<18}");
            attos = padded
                .parse::<i64>()
                .map_err(|_| bad(text, unit, "bad fraction of a second"))?;
        }
    }
    from_instant(secs, attos, unit).ok_or_else(|| bad(text, unit, "out of the unit's range"))
}

/// Formats a `datetime64[unit]` value as numpy's `str` does: `2020-01-01` for days,
/// `2020-01` for months, `2020` for years, `2020-01-01T05` for hours and so on to 18
/// fraction digits for attoseconds; `NaT` for NaT.
pub fn format_datetime(v: i64, unit: TimeUnit) -> String {
    let Some((secs, attos)) = instant(v, unit) else {
        return "NaT".into();
    };
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    // numpy pads the year to four characters, sign included (`-005`).
    let year = format!("{y:04}");
    let tod = secs.rem_euclid(86_400);
    let (h, mi, s) = (tod / 3600, tod / 60 % 60, tod % 60);
    let frac = |digits: usize| {
        let a = format!("{attos:018}");
        format!(
            "{year}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{}",
            &a[..digits]
        )
    };
    match unit {
        TimeUnit::Year => year,
        TimeUnit::Month => format!("{year}-{m:02}"),
        TimeUnit::Week | TimeUnit::Day => format!("{year}-{m:02}-{d:02}"),
        TimeUnit::Hour => format!("{year}-{m:02}-{d:02}T{h:02}"),
        TimeUnit::Minute => format!("{year}-{m:02}-{d:02}T{h:02}:{mi:02}"),
        TimeUnit::Second => format!("{year}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}"),
        TimeUnit::Millisecond => frac(3),
        TimeUnit::Microsecond => frac(6),
        TimeUnit::Nanosecond => frac(9),
        TimeUnit::Picosecond => frac(12),
        TimeUnit::Femtosecond => frac(15),
        TimeUnit::Attosecond => frac(18),
    }
}

/// Formats a `timedelta64[unit]` value as numpy's `str` does: `5 days`, `1 seconds`,
/// `NaT`.
pub fn format_timedelta(v: i64, unit: TimeUnit) -> String {
    if v == NAT {
        return "NaT".into();
    }
    let name = match unit {
        TimeUnit::Year => "years",
        TimeUnit::Month => "months",
        TimeUnit::Week => "weeks",
        TimeUnit::Day => "days",
        TimeUnit::Hour => "hours",
        TimeUnit::Minute => "minutes",
        TimeUnit::Second => "seconds",
        TimeUnit::Millisecond => "milliseconds",
        TimeUnit::Microsecond => "microseconds",
        TimeUnit::Nanosecond => "nanoseconds",
        TimeUnit::Picosecond => "picoseconds",
        TimeUnit::Femtosecond => "femtoseconds",
        TimeUnit::Attosecond => "attoseconds",
    };
    format!("{v} {name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    /// Compares two `datetime64` values of possibly different units by the instants they
    /// stand for; `None` when either is NaT (every comparison with NaT but `!=` is false).
    fn compare_datetimes(a: i64, ua: TimeUnit, b: i64, ub: TimeUnit) -> Option<Ordering> {
        Some(instant(a, ua)?.cmp(&instant(b, ub)?))
    }

    #[test]
    fn natural_units_are_numpys() {
        // np.datetime64(text).dtype for each text, numpy 2.
        let cases = [
            ("2020", "Y"),
            ("-0044-03", "M"),
            ("2020-01-31", "D"),
            ("2020-01-31T10", "h"),
            ("2020-01-31 10:30", "m"),
            ("2020-01-31T10:30:05Z", "s"),
            ("2020-01-31T10:30:05.1", "ms"),
            ("2020-01-31T10:30:05.123", "ms"),
            ("2020-01-31T10:30:05.1234", "us"),
            ("2020-01-31T10:30:05.123456789", "ns"),
            ("2020-01-31T10:30:05.1234567890", "ps"),
            ("2020-01-31T10:30:05.123456789012345678", "as"),
        ];
        for (text, unit) in cases {
            assert_eq!(natural_unit(text).code(), unit, "{text}");
        }
    }

    #[test]
    fn civil_roundtrip() {
        for z in [-800_000i128, -719_468, -1, 0, 1, 18_262, 9_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(days_from_civil(2020, 1, 1), 18_262);
    }

    #[test]
    fn numpy_strings() {
        // Values printed by numpy 2.4: str(np.datetime64(1234567, unit)).
        let cases = [
            (TimeUnit::Year, "1236537"),
            (TimeUnit::Month, "104850-08"),
            (TimeUnit::Week, "25630-11-28"),
            (TimeUnit::Day, "5350-02-17"),
            (TimeUnit::Hour, "2110-11-03T07"),
            (TimeUnit::Minute, "1972-05-07T08:07"),
            (TimeUnit::Second, "1970-01-15T06:56:07"),
            (TimeUnit::Millisecond, "1970-01-01T00:20:34.567"),
            (TimeUnit::Microsecond, "1970-01-01T00:00:01.234567"),
            (TimeUnit::Nanosecond, "1970-01-01T00:00:00.001234567"),
            (
                TimeUnit::Attosecond,
                "1970-01-01T00:00:00.000000000001234567",
            ),
        ];
        for (u, s) in cases {
            assert_eq!(format_datetime(1_234_567, u), s, "{u}");
            if u != TimeUnit::Week {
                assert_eq!(parse_datetime(s, u).unwrap(), 1_234_567, "{u}");
            }
        }
        assert_eq!(format_datetime(-1_234_567, TimeUnit::Day), "-1411-11-14");
        assert_eq!(
            format_datetime(-1_234_567, TimeUnit::Nanosecond),
            "1969-12-31T23:59:59.998765433"
        );
        assert_eq!(format_datetime(NAT, TimeUnit::Day), "NaT");
        assert_eq!(parse_datetime("NaT", TimeUnit::Second).unwrap(), NAT);
        assert_eq!(
            parse_datetime("2020-01-01", TimeUnit::Nanosecond).unwrap(),
            1_577_836_800_000_000_000
        );
        // Finer than the unit: rounded down as numpy does.
        assert_eq!(
            parse_datetime("2020-01-01T05:00:01.5", TimeUnit::Second).unwrap(),
            parse_datetime("2020-01-01T05:00:01", TimeUnit::Second).unwrap()
        );
        assert_eq!(
            parse_datetime("2021-03-04", TimeUnit::Month).unwrap(),
            51 * 12 + 2
        );
        for bad in [
            "2020-13-01",
            "2020-02-30",
            "x",
            "2020-01-01T25",
            "2020-01-01T1:2:3.",
            "",
        ] {
            assert!(parse_datetime(bad, TimeUnit::Day).is_err(), "{bad}");
        }
        // Past the range of nanoseconds (about 1678-2262).
        assert!(parse_datetime("2300-01-01", TimeUnit::Nanosecond).is_err());
        assert_eq!(format_timedelta(5, TimeUnit::Day), "5 days");
    }

    #[test]
    fn units_compare_and_convert() {
        let d = parse_datetime("2020-01-01", TimeUnit::Day).unwrap();
        let m = parse_datetime("2020-01", TimeUnit::Month).unwrap();
        assert_eq!(
            compare_datetimes(d, TimeUnit::Day, m, TimeUnit::Month),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare_datetimes(NAT, TimeUnit::Day, m, TimeUnit::Month),
            None
        );
        assert_eq!(convert_datetime(d, TimeUnit::Day, TimeUnit::Year), Some(50));
        assert_eq!(
            convert_datetime(-1, TimeUnit::Second, TimeUnit::Day),
            Some(-1)
        );
        assert_eq!(
            convert_timedelta(-1, TimeUnit::Second, TimeUnit::Day),
            Some(-1)
        );
        assert_eq!(
            convert_timedelta(2, TimeUnit::Day, TimeUnit::Hour),
            Some(48)
        );
        assert_eq!(
            convert_timedelta(2, TimeUnit::Year, TimeUnit::Month),
            Some(24)
        );
        assert_eq!(convert_timedelta(2, TimeUnit::Year, TimeUnit::Day), None);
        assert!(length(1, TimeUnit::Day) > length(23, TimeUnit::Hour));
    }
}
