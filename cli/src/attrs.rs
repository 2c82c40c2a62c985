//! `blz attrs` on arrays and tables: print the user attributes, or set and delete some.

use crate::args::AttrsArgs;
use crate::failure::{say, Failure};
use crate::parse::parse_kv;
use blz::{Dataset, Table};
use std::io::Write;

/// A dataset with user attributes (an array or a table).
pub(crate) trait Attributes {
    /// The user attributes.
    fn get(&self) -> blz::Result<serde_json::Map<String, serde_json::Value>>;
    /// Replaces the user attributes.
    fn set(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> blz::Result<()>;
}

impl Attributes for Dataset {
    fn get(&self) -> blz::Result<serde_json::Map<String, serde_json::Value>> {
        self.attrs()
    }
    fn set(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> blz::Result<()> {
        self.set_attrs(attrs)
    }
}

/// Whether `blz attrs` changes the attributes (and opens the dataset for writing).
pub(crate) fn writes(a: &AttrsArgs) -> bool {
    !(a.set.is_empty() && a.delete.is_empty())
}

/// `blz attrs` on a dataset opened for it (for writing when it [`writes`]): prints the
/// attributes, or applies `--delete` and `--set`.
pub(crate) fn edit_attrs<D: Attributes>(a: &AttrsArgs, mut ds: D) -> Result<(), Failure> {
    if !writes(a) {
        let attrs = serde_json::Value::Object(ds.get()?);
        say!(
            "{}",
            serde_json::to_string_pretty(&attrs).unwrap_or_default()
        );
        return Ok(());
    }
    let sets = a
        .set
        .iter()
        .map(|kv| parse_kv(kv, "--set"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut attrs = ds.get()?;
    for k in &a.delete {
        if attrs.shift_remove(k).is_none() {
            return Err(Failure::new(format!(
                "{}: no attribute {k:?} to delete",
                a.path.display()
            )));
        }
    }
    for (k, v) in sets {
        attrs.insert(k, v);
    }
    ds.set(attrs)?;
    Ok(())
}

impl Attributes for Table {
    fn get(&self) -> blz::Result<serde_json::Map<String, serde_json::Value>> {
        self.attrs()
    }
    fn set(&mut self, attrs: serde_json::Map<String, serde_json::Value>) -> blz::Result<()> {
        self.set_attrs(attrs)
    }
}
