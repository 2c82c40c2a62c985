//! What inputs share on their way into datasets and tables (`.npy` files, CSV files, a
//! client's own): a table's field tree from its leaf columns (`pos/x` is column `x` of the
//! nested field `pos`; a CSV header row and the fields of numpy records name columns so),
//! and the check that an input's rows fit a dataset.

use crate::error::{Error, Result};
use crate::table::{check_name, ColumnOptions, Field, FieldKind, LeafKind};
use crate::Dataset;
use std::path::Path;

/// `[3, 4]` for a shape, as messages and reports write it.
pub fn shape_str(shape: &[u64]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Checks that rows of an input of `shape` (read from `input`) fit the dataset `ds`: the
/// same shape but for axis 0 (a 0-d input, of shape `[]`, is one element).
///
/// # Errors
/// [`Error::InvalidInput`] naming `input`, the two shapes and the shape expected.
pub fn check_rows_fit(input: &Path, shape: &[u64], ds: &Dataset) -> Result<()> {
    if shape.get(1..).unwrap_or(&[]) == ds.shape().get(1..).unwrap_or(&[]) {
        return Ok(());
    }
    let mut want = vec!["n".to_string()];
    want.extend(ds.shape().iter().skip(1).map(u64::to_string));
    Err(Error::input(
        input,
        format!(
            "an array of shape {} does not fit the dataset's shape {}: expected shape [{}]",
            shape_str(shape),
            shape_str(ds.shape()),
            want.join(", ")
        ),
    ))
}

/// Checks a column path (`name` or `parent/name`) component by component; returns them.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the path and the bad component.
pub fn check_path(path: &str) -> Result<Vec<&str>> {
    let parts: Vec<&str> = path.split('/').collect();
    for p in &parts {
        check_name(p)
            .map_err(|e| Error::InvalidArgument(format!("column {path:?}: {}", reason(e))))?;
    }
    Ok(parts)
}

/// Inserts a leaf at a slash path into a field tree, making structures as needed.
fn insert(fields: &mut Vec<Field>, parts: &[&str], kind: FieldKind, path: &str) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidArgument(m));
    let Some((first, rest)) = parts.split_first() else {
        return bad(format!("column {path:?}: empty path"));
    };
    let pos = fields.iter().position(|f| f.name == *first);
    if rest.is_empty() {
        if pos.is_some() {
            return bad(format!("column {path:?} is given twice"));
        }
        fields.push(Field {
            name: (*first).to_string(),
            kind,
            options: ColumnOptions::default(),
        });
        return Ok(());
    }
    let i = match pos {
        Some(i) => i,
        None => {
            fields.push(Field::structure(first, Vec::new()));
            fields.len() - 1
        }
    };
    match fields.get_mut(i).map(|f| &mut f.kind) {
        Some(FieldKind::Struct(sub)) => insert(sub, rest, kind, path),
        _ => bad(format!(
            "column {path:?}: {first:?} is a column, so it cannot also hold nested columns"
        )),
    }
}

/// The nested field list of a table whose leaf columns are `leaves` (paths and kinds), in
/// order; every column gets the table's default options.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad name, a path given twice, or a column that would
/// also have to hold nested columns.
pub fn fields_from_leaves(leaves: &[(String, LeafKind)]) -> Result<Vec<Field>> {
    let mut fields = Vec::new();
    for (path, kind) in leaves {
        let parts = check_path(path)?;
        let kind = match kind {
            LeafKind::Fixed(d) => FieldKind::Scalar(*d),
            LeafKind::VarStr => FieldKind::VarStr,
            LeafKind::VarBytes => FieldKind::VarBytes,
        };
        insert(&mut fields, &parts, kind, path)?;
    }
    Ok(fields)
}

/// The message of an [`Error::InvalidArgument`] (what the caller prefixes with its own
/// context), or the error's text.
pub(crate) fn reason(e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => m,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn nests_by_path() {
        let f = fields_from_leaves(&[
            ("id".into(), LeafKind::Fixed(DType::I64)),
            ("pos/x".into(), LeafKind::Fixed(DType::F64)),
            ("name".into(), LeafKind::VarStr),
            ("pos/y".into(), LeafKind::Fixed(DType::F32)),
        ])
        .unwrap();
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["id", "pos", "name"]);
        let FieldKind::Struct(sub) = &f[1].kind else {
            panic!("pos is not a structure")
        };
        assert_eq!(sub.len(), 2);
        for bad in [
            vec![
                ("a".to_string(), LeafKind::VarStr),
                ("a".into(), LeafKind::VarStr),
            ],
            vec![
                ("a".into(), LeafKind::VarStr),
                ("a/b".into(), LeafKind::VarStr),
            ],
            vec![("a/../b".into(), LeafKind::VarStr)],
        ] {
            assert!(fields_from_leaves(&bad).is_err(), "{bad:?}");
        }
    }
}
