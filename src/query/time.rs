//! The kernels of `datetime64` and `timedelta64` in `where` expressions, with numpy's
//! semantics:
//!
//! - Values of different units compare by the instants (dates) or lengths (durations) they
//!   stand for, exactly: `day >= datetime64('2020-01-01T12:00')` on a column of days is
//!   false on 2020-01-01, as in numpy, which compares in the finer unit.
//! - Every comparison with NaT is false, but `!=`, which is true.
//! - `date - date` is a duration, `date ± duration` a date, `duration ± duration` a
//!   duration, each in the finer of the two units (numpy's). NaT in, NaT out; a result
//!   past the unit's range is NaT too (numpy wraps it around silently).
//! - Durations of years or months meet only years or months (numpy refuses the cast).
//!
//! The evaluator (`eval`) wraps these kernels in its values, types and proofs.

use super::expr::BinOp;
use crate::datetime::{self, Length, TimeUnit, NAT};
use std::cmp::Ordering;

/// The comparable key of a value of `unit`: the instant of a date (`delta` false), the length
/// of a duration; `None` for NaT.
pub(super) fn key(delta: bool, unit: TimeUnit, v: i64) -> Option<Length> {
    if delta {
        datetime::length(v, unit)
    } else {
        datetime::instant(v, unit).map(|(s, a)| Length::Fixed(s, a))
    }
}

/// Whether a unit is years or months (of varying length).
pub(super) fn calendar(unit: TimeUnit) -> bool {
    matches!(unit, TimeUnit::Year | TimeUnit::Month)
}

/// The finer of two units (numpy's common unit).
pub(super) fn finer(a: TimeUnit, b: TimeUnit) -> TimeUnit {
    a.max(b)
}

/// Whether values of these kinds and units may meet in a comparison or in `+`/`-`: durations
/// of years or months only with years or months.
pub(super) fn compatible(da: bool, ua: TimeUnit, db: bool, ub: TimeUnit) -> bool {
    !((da && calendar(ua) && !calendar(ub)) || (db && calendar(ub) && !calendar(ua)))
}

/// `a op b` of two keys (`None`: NaT).
pub(super) fn cmp_keys(op: BinOp, a: Option<Length>, b: Option<Length>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => op.holds(a.cmp(&b)),
        _ => op == BinOp::Ne,
    }
}

/// `x[i] op s` for a vector `x` of `unit` and a scalar whose key is `s`.
///
/// The scalar is placed on the vector's grid once, `k` the last step at or below it: for a
/// value `x` of the grid, `x <= k` means `x` is at or below the scalar, equal only when the
/// scalar lies exactly on `k`. Then each element is one integer comparison.
pub(super) fn cmp_scalar(
    op: BinOp,
    delta: bool,
    unit: TimeUnit,
    x: &[i64],
    s: Option<Length>,
) -> Vec<bool> {
    let Some(s) = s else {
        return vec![op == BinOp::Ne; x.len()];
    };
    let nat = op == BinOp::Ne;
    match floor_on(delta, unit, s) {
        Ok((k, exact)) => x
            .iter()
            .map(|&v| {
                if v == NAT {
                    return nat;
                }
                let ord = match v.cmp(&k) {
                    Ordering::Equal if !exact => Ordering::Less,
                    o => o,
                };
                op.holds(ord)
            })
            .collect(),
        // The scalar lies past every value of the unit: below (`Less`) or above them all.
        Err(side) => {
            let ord = side.reverse();
            x.iter()
                .map(|&v| if v == NAT { nat } else { op.holds(ord) })
                .collect()
        }
    }
}

/// The last value of `unit` at or below key `s`, and whether it is exactly `s`; `Err` with
/// the side (`Less`: below every value) when `s` lies past the unit's range.
fn floor_on(delta: bool, unit: TimeUnit, s: Length) -> std::result::Result<(i64, bool), Ordering> {
    let k = match s {
        Length::Fixed(secs, attos) => {
            if delta && calendar(unit) {
                // Checked out by `compatible`: never evaluated.
                return Err(Ordering::Less);
            }
            datetime::from_instant(secs, attos, unit).ok_or(if secs < 0 {
                Ordering::Less
            } else {
                Ordering::Greater
            })?
        }
        Length::Months(m) => {
            let per = if unit == TimeUnit::Year { 12 } else { 1 };
            i64::try_from(m.div_euclid(per))
                .ok()
                .filter(|&k| k != NAT)
                .ok_or(if m < 0 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                })?
        }
    };
    Ok((k, key(delta, unit, k) == Some(s)))
}

/// `x[i] op y[i]` for two vectors of units `ux` and `uy`.
pub(super) fn cmp_vectors(
    op: BinOp,
    delta: bool,
    (ux, x): (TimeUnit, &[i64]),
    (uy, y): (TimeUnit, &[i64]),
) -> Vec<bool> {
    if ux == uy {
        return x
            .iter()
            .zip(y)
            .map(|(&a, &b)| {
                if a == NAT || b == NAT {
                    op == BinOp::Ne
                } else {
                    op.holds(a.cmp(&b))
                }
            })
            .collect();
    }
    x.iter()
        .zip(y)
        .map(|(&a, &b)| cmp_keys(op, key(delta, ux, a), key(delta, uy, b)))
        .collect()
}

/// A value of `from` in unit `to` (rounded down, as numpy's casts); NaT when it does not
/// fit.
pub(super) fn convert(delta: bool, from: TimeUnit, to: TimeUnit, v: i64) -> i64 {
    if from == to {
        return v;
    }
    let r = if delta {
        datetime::convert_timedelta(v, from, to)
    } else {
        datetime::convert_datetime(v, from, to)
    };
    r.unwrap_or(NAT)
}

/// `a + b` or `a - b` of two counts of one unit: NaT when either is NaT or the result does
/// not fit.
pub(super) fn add_sub(op: BinOp, a: i64, b: i64) -> i64 {
    if a == NAT || b == NAT {
        return NAT;
    }
    let r = if op == BinOp::Add {
        a.checked_add(b)
    } else {
        a.checked_sub(b)
    };
    r.unwrap_or(NAT)
}

/// `-a` of a duration (NaT stays NaT).
pub(super) fn neg(a: i64) -> i64 {
    if a == NAT {
        NAT
    } else {
        -a
    }
}

/// Whether `a op b` is a date (`Some(false)`), a duration (`Some(true)`), or refused
/// (`None`), for operands that are durations (`da`, `db`) or dates: `date - date`,
/// `date ± duration`, `duration + date`, `duration ± duration`.
pub(super) fn arith_kind(op: BinOp, da: bool, db: bool) -> Option<bool> {
    match (op, da, db) {
        (BinOp::Sub, false, false) => Some(true),
        (BinOp::Add | BinOp::Sub, false, true) | (BinOp::Add, true, false) => Some(false),
        (BinOp::Add | BinOp::Sub, true, true) => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datetime::parse_datetime;
    use TimeUnit::*;

    fn day(s: &str) -> i64 {
        parse_datetime(s, Day).unwrap()
    }

    #[test]
    fn a_scalar_finer_than_the_column_compares_exactly() {
        let x = [day("2020-01-01"), day("2020-01-02"), NAT];
        let noon = key(
            false,
            Minute,
            parse_datetime("2020-01-01T12:00", Minute).unwrap(),
        );
        let midnight = key(false, Second, parse_datetime("2020-01-02", Second).unwrap());
        let run = |op, s| cmp_scalar(op, false, Day, &x, s);
        assert_eq!(run(BinOp::Ge, noon), [false, true, false]);
        assert_eq!(run(BinOp::Le, noon), [true, false, false]);
        assert_eq!(run(BinOp::Gt, noon), [false, true, false]);
        assert_eq!(run(BinOp::Lt, noon), [true, false, false]);
        assert_eq!(run(BinOp::Eq, noon), [false, false, false]);
        assert_eq!(run(BinOp::Ne, noon), [true, true, true]);
        assert_eq!(run(BinOp::Eq, midnight), [false, true, false]);
        assert_eq!(run(BinOp::Ge, midnight), [false, true, false]);
        assert_eq!(run(BinOp::Ne, None), [true, true, true]);
        assert_eq!(run(BinOp::Eq, None), [false, false, false]);
    }

    #[test]
    fn a_scalar_past_the_units_range_is_below_or_above_all() {
        // Year 3000 does not fit nanoseconds.
        let far = key(false, Day, day("3000-01-01"));
        let x = [0, 5, NAT];
        assert_eq!(
            cmp_scalar(BinOp::Lt, false, Nanosecond, &x, far),
            [true, true, false]
        );
        assert_eq!(
            cmp_scalar(BinOp::Gt, false, Nanosecond, &x, far),
            [false; 3]
        );
        let early = key(false, Day, day("1000-01-01"));
        assert_eq!(
            cmp_scalar(BinOp::Gt, false, Nanosecond, &x, early),
            [true, true, false]
        );
    }

    #[test]
    fn durations_compare_by_length_and_months_by_months() {
        let x = [90, 120, NAT];
        let two_hours = key(true, Hour, 2);
        assert_eq!(
            cmp_scalar(BinOp::Lt, true, Minute, &x, two_hours),
            [true, false, false]
        );
        assert_eq!(
            cmp_scalar(BinOp::Eq, true, Minute, &x, two_hours),
            [false, true, false]
        );
        let months = [11, 12, 13];
        let year = key(true, Year, 1);
        assert_eq!(
            cmp_scalar(BinOp::Ge, true, Month, &months, year),
            [false, true, true]
        );
        assert!(compatible(true, Year, true, Month));
        assert!(!compatible(true, Month, true, Day));
        assert!(!compatible(false, Day, true, Month));
        assert!(compatible(false, Month, true, Month));
    }

    #[test]
    fn vectors_of_different_units_compare_by_instant() {
        let days = [day("2020-01-01"), day("2020-01-02"), NAT];
        let hours = [
            parse_datetime("2020-01-01T00", Hour).unwrap(),
            parse_datetime("2020-01-01T05", Hour).unwrap(),
            0,
        ];
        let r = cmp_vectors(BinOp::Eq, false, (Day, &days), (Hour, &hours));
        assert_eq!(r, [true, false, false]);
        let r = cmp_vectors(BinOp::Gt, false, (Day, &days), (Hour, &hours));
        assert_eq!(r, [false, true, false]);
    }

    #[test]
    fn arithmetic_propagates_nat_and_overflow() {
        assert_eq!(add_sub(BinOp::Add, 1, NAT), NAT);
        assert_eq!(add_sub(BinOp::Add, i64::MAX, 1), NAT);
        assert_eq!(add_sub(BinOp::Sub, 5, 7), -2);
        assert_eq!(convert(false, Day, Nanosecond, day("2500-01-01")), NAT);
        assert_eq!(convert(true, Hour, Minute, 2), 120);
        assert_eq!(neg(NAT), NAT);
        assert_eq!(arith_kind(BinOp::Sub, false, false), Some(true));
        assert_eq!(arith_kind(BinOp::Add, false, false), None);
        assert_eq!(arith_kind(BinOp::Sub, true, false), None);
        assert_eq!(arith_kind(BinOp::Mul, true, true), None);
    }
}
