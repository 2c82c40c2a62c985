//! What a leaf column holds, and the names a column may have.

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Checks a column name: it becomes a directory name, so nothing that could escape the
/// dataset directory or collide with superchunk files is allowed.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the problem.
pub fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::InvalidArgument(format!(
            "column name {name:?} {why}"
        )))
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name == "." || name == ".." {
        return bad("is a path component");
    }
    if name.contains(['/', '\\', '\0']) {
        return bad("contains a path separator or NUL");
    }
    if name.starts_with("__") {
        return bad("starts with `__` (reserved for superchunk files)");
    }
    if name.len() > 255 {
        return bad("is longer than 255 bytes");
    }
    Ok(())
}

/// A leaf column's kind, resolved from its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    /// Fixed-size elements.
    Fixed(DType),
    /// Variable-length UTF-8 strings.
    VarStr,
    /// Variable-length byte strings.
    VarBytes,
}

impl LeafKind {
    /// The name recorded in `meta/storage`.
    pub fn name(&self) -> String {
        match self {
            LeafKind::Fixed(d) => d.name(),
            LeafKind::VarStr => "varstr".into(),
            LeafKind::VarBytes => "varbytes".into(),
        }
    }

    /// Parses a recorded name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown name.
    pub fn parse(s: &str) -> Result<LeafKind> {
        match s {
            "varstr" => Ok(LeafKind::VarStr),
            "varbytes" => Ok(LeafKind::VarBytes),
            other => Ok(LeafKind::Fixed(other.parse()?)),
        }
    }
}
