//! How a CSV file is read into a table: [`CsvOptions`] (separator, declared columns,
//! whether dates are recognised) and the text form of a declared schema, [`parse_schema`],
//! shared by the command line (`--schema`) and the Python package (`schema=`).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::table::LeafKind;

/// A column a schema declares: its path, type, nullability and zone.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvColumn {
    /// The column's path (a header name; `pos/x` nests).
    pub path: String,
    /// Its type.
    pub kind: LeafKind,
    /// `Some(false)`: not nullable, an empty field is an error (the empty string in a string
    /// column); `Some(true)`: nullable; `None`: nullable when the file has an empty field.
    pub nullable: Option<bool>,
    /// A `datetime64` column's zone (`spec/table.md` §2.3): its text is read as UTC unless
    /// it carries an offset.
    pub timezone: Option<String>,
}

impl CsvColumn {
    /// A column of `kind`, nullable when the file has an empty field, without a zone.
    pub fn new(path: &str, kind: LeafKind) -> CsvColumn {
        CsvColumn {
            path: path.into(),
            kind,
            nullable: None,
            timezone: None,
        }
    }
}

/// How [`scan_table_with`](super::scan_table_with) reads a CSV file.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvOptions {
    /// The field separator (default `,`).
    pub delimiter: u8,
    /// Declared columns; the others are inferred.
    pub schema: Vec<CsvColumn>,
    /// Recognise ISO dates and timestamps when inferring types (default true); off, they
    /// are strings.
    pub dates: bool,
}

impl Default for CsvOptions {
    fn default() -> CsvOptions {
        CsvOptions {
            delimiter: b',',
            schema: Vec::new(),
            dates: true,
        }
    }
}

/// Splits at commas outside brackets (`datetime64[ns, UTC]` holds one).
fn items(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect()
}

/// Parses a declared schema: `NAME:TYPE` items separated by commas, `TYPE` a dtype name
/// (`int32`, `float64`, `S8`, `datetime64[ms]`, ...), `varstr`, `varbytes`, or a zoned
/// timestamp `datetime64[UNIT, ZONE]` (`datetime64[ns, Europe/Paris]`, as pandas writes
/// it); then optionally `not null` (an empty field is an error, the empty string in a
/// string column) or `null` (nullable even without an empty field). Without either a column
/// is nullable when the file has an empty field.
///
/// ```
/// # fn main() -> blz::Result<()> {
/// let s = blz::csv::parse_schema("qty:int32 not null, t:datetime64[ns, UTC], name:varstr")?;
/// assert_eq!(s[0].nullable, Some(false));
/// assert_eq!(s[1].timezone.as_deref(), Some("UTC"));
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] naming the item: no `:`, an unknown type or zone, a name given
/// twice.
pub fn parse_schema(s: &str) -> Result<Vec<CsvColumn>> {
    let mut out: Vec<CsvColumn> = Vec::new();
    for item in items(s) {
        let bad = |m: String| Error::InvalidArgument(format!("schema item {item:?}: {m}"));
        let (name, ty) = item
            .split_once(':')
            .ok_or_else(|| bad("expected NAME:TYPE, e.g. price:float64".into()))?;
        let (name, mut ty) = (name.trim(), ty.trim());
        let mut nullable = None;
        let lower = ty.to_ascii_lowercase();
        for (suffix, n) in [(" not null", false), (" null", true)] {
            if lower.ends_with(suffix) {
                ty = ty[..ty.len() - suffix.len()].trim_end();
                nullable = Some(n);
                break;
            }
        }
        let mut timezone = None;
        let kind = match ty {
            "varstr" => LeafKind::VarStr,
            "varbytes" => LeafKind::VarBytes,
            t => {
                let t = match t
                    .strip_prefix("datetime64[")
                    .and_then(|r| r.strip_suffix(']'))
                    .and_then(|r| r.split_once(','))
                {
                    Some((unit, zone)) => {
                        let zone = zone.trim();
                        crate::table::check_timezone(zone).map_err(|e| bad(e.to_string()))?;
                        timezone = Some(zone.to_string());
                        format!("datetime64[{}]", unit.trim())
                    }
                    None => t.to_string(),
                };
                LeafKind::Fixed(DType::parse_descr(&t).map(|(d, _)| d).map_err(|_| {
                    bad(format!(
                        "unknown type {t:?} (a dtype name such as int32, float64, S8, \
                         datetime64[ms], datetime64[ns, UTC]; varstr; varbytes)"
                    ))
                })?)
            }
        };
        if out.iter().any(|c| c.path == name) {
            return Err(bad(format!("column {name:?} is named twice")));
        }
        out.push(CsvColumn {
            path: name.into(),
            kind,
            nullable,
            timezone,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::TimeUnit;

    #[test]
    fn schemas() {
        let s =
            parse_schema("a:int32, b:datetime64[ms, Europe/Paris] null,c:varstr NOT NULL").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], CsvColumn::new("a", LeafKind::Fixed(DType::I32)));
        assert_eq!(
            s[1].kind,
            LeafKind::Fixed(DType::DateTime(TimeUnit::Millisecond))
        );
        assert_eq!(s[1].timezone.as_deref(), Some("Europe/Paris"));
        assert_eq!(s[1].nullable, Some(true));
        assert_eq!(s[2].nullable, Some(false));
        for bad in [
            "a",
            "a:nope",
            "a:int8,a:int16",
            "t:datetime64[ns, Mars/Base]",
        ] {
            assert!(parse_schema(bad).is_err(), "{bad}");
        }
    }
}
