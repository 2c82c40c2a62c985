//! Table schemas: an ordered list of named fields, each a fixed-size dtype, a variable-length
//! string or byte string, or a nested structure of fields; and how each leaf column is stored.

use super::DEFAULT_VAR_CHUNKLEN;
use crate::blpk::Checksum;
use crate::dtype::{DType, Endianness};
use crate::engine::{build_storage_meta, CreateOptions};
use crate::error::{Error, Result};
use crate::meta::{self, Compression, FilterName};

pub use crate::column::{check_name, LeafKind};
use serde::{Deserialize, Serialize};

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// Fixed-size elements of a dtype.
    Scalar(DType),
    /// UTF-8 strings of any length.
    VarStr,
    /// Byte strings of any length.
    VarBytes,
    /// A nested structure: its fields are stored as columns in a sub-directory.
    Struct(Vec<Field>),
}

/// How one leaf column is stored. `None` picks the table's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnOptions {
    /// Compression (default: lz4 clevel 5 with shuffle for fixed-size columns, without
    /// shuffle for variable-length ones).
    pub compression: Option<Compression>,
    /// Rows per chunk.
    pub chunklen: Option<u64>,
    /// Chunks per superchunk file.
    pub superchunksize: Option<u64>,
    /// Digest after each chunk.
    pub checksum: Option<Checksum>,
    /// Bytes reserved after each chunk for in-place rewrites.
    pub slack: Option<u32>,
    /// Fill value for rows added without a value (JSON).
    pub fill: Option<serde_json::Value>,
    /// Whether the column may hold nulls (missing values): it then keeps a validity column
    /// beside its values (`spec/table.md` §3.5). Default: not nullable.
    pub nullable: Option<bool>,
    /// The pandas dtype of the column (`"Int64"`, `"string[pyarrow]"`, ...), recorded for
    /// clients that give the column back as pandas: blz itself does not read it.
    pub pandas: Option<String>,
    /// The time zone of a `datetime64` column of seconds or a finer unit: its values are
    /// instants counted in UTC, shown in this zone (an IANA name such as `"Europe/Paris"`,
    /// `"UTC"`, or a fixed offset `"+05:30"`; `spec/table.md` §2.3). See
    /// [`Field::with_timezone`].
    pub timezone: Option<String>,
    /// Whether a `varstr` column is dictionary-encoded: it stores an `int32` code per row
    /// and each distinct string once, in a dictionary beside it (`spec/table.md` §3.6).
    /// Default: not. Only `varstr` columns can be.
    pub dictionary: Option<bool>,
    /// The most entries a dictionary-encoded column's dictionary may hold (default and at
    /// most 2^31 − 1, the codes' range): a write that would pass it is refused with
    /// [`Error::DictionaryFull`], naming the column and the value, and nothing is written.
    pub dictionary_limit: Option<u64>,
    /// Entries a new dictionary-encoded column's dictionary starts with, in order (codes
    /// 0, 1, ...), before any row is written: pandas' categories, unused ones included.
    pub dictionary_entries: Option<Vec<String>>,
}

/// A named field of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Name: not empty, no `/`, `\`, NUL, not `.`/`..`, not starting with `__`.
    pub name: String,
    /// What it holds.
    pub kind: FieldKind,
    /// Storage options (leaf fields only).
    pub options: ColumnOptions,
}

impl Field {
    /// A fixed-size field.
    pub fn new(name: &str, dtype: DType) -> Field {
        Field {
            name: name.into(),
            kind: FieldKind::Scalar(dtype),
            options: ColumnOptions::default(),
        }
    }

    /// A variable-length UTF-8 string field.
    pub fn varstr(name: &str) -> Field {
        Field {
            name: name.into(),
            kind: FieldKind::VarStr,
            options: ColumnOptions::default(),
        }
    }

    /// A variable-length byte-string field.
    pub fn varbytes(name: &str) -> Field {
        Field {
            name: name.into(),
            kind: FieldKind::VarBytes,
            options: ColumnOptions::default(),
        }
    }

    /// A nested structure.
    pub fn structure(name: &str, fields: Vec<Field>) -> Field {
        Field {
            name: name.into(),
            kind: FieldKind::Struct(fields),
            options: ColumnOptions::default(),
        }
    }

    /// The same field with storage options.
    pub fn with_options(mut self, options: ColumnOptions) -> Field {
        self.options = options;
        self
    }

    /// The same `varstr` field, dictionary-encoded (`spec/table.md` §3.6): each distinct
    /// string is stored once, and each row as a code into the dictionary.
    pub fn dictionary(mut self) -> Field {
        self.options.dictionary = Some(true);
        self
    }

    /// The same field, nullable: a leaf that may hold nulls, or a structure whose leaves
    /// all may.
    pub fn nullable(mut self) -> Field {
        if let FieldKind::Struct(sub) = self.kind {
            self.kind = FieldKind::Struct(sub.into_iter().map(Field::nullable).collect());
        } else {
            self.options.nullable = Some(true);
        }
        self
    }
}

/// Checks every name of a field list (recursively) and that no two siblings share a name.
///
/// # Errors
/// [`Error::InvalidArgument`] for the first bad or duplicate name, or an empty structure.
pub(crate) fn check_fields(fields: &[Field]) -> Result<()> {
    if fields.is_empty() {
        return Err(Error::InvalidArgument(
            "a table or structure needs at least one field".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for f in fields {
        check_name(&f.name)?;
        if !seen.insert(f.name.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "duplicate column name {:?}",
                f.name
            )));
        }
        if let FieldKind::Struct(sub) = &f.kind {
            check_fields(sub)?;
        }
    }
    Ok(())
}

/// How a leaf column is stored, as recorded in `meta/storage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnStorage {
    /// Byte order of fixed-size elements.
    pub endianness: Endianness,
    /// Rows per chunk.
    pub chunklen: u64,
    /// Chunks per superchunk file.
    pub superchunksize: u64,
    /// Compression.
    pub compression: Compression,
    /// Digest after each chunk.
    #[serde(with = "crate::meta::checksum_name")]
    pub checksum: Checksum,
    /// Bytes reserved after each chunk.
    pub slack: u32,
    /// Fill value.
    pub dflt: serde_json::Value,
    /// The column's identity (32 hex digits, random when the column is made; it stays when
    /// the column is renamed), recorded with the table's in each of its superchunk files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A field as recorded in `meta/storage`: `{"name", "dtype", "storage"}` where `dtype` is a
/// dtype name, `varstr`, `varbytes`, or a list of fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSpec {
    /// Field name.
    pub name: String,
    /// Type.
    pub dtype: FieldType,
    /// Storage of a leaf column (absent for structures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<ColumnStorage>,
    /// A nullable leaf's validity column (`spec/table.md` §3.5): how it is stored. Absent
    /// for a column that holds no nulls, and in every table written before nulls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<ColumnStorage>,
    /// The leaf's pandas dtype, for clients (`spec/table.md` §2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pandas: Option<String>,
    /// A `datetime64` leaf's time zone (`spec/table.md` §2.3); absent: no zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// A dictionary-encoded `varstr` leaf's dictionary (`spec/table.md` §3.6); `storage`
    /// then describes the leaf's `int32` codes. Absent for every other leaf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary: Option<DictionarySpec>,
}

/// The `dictionary` of a dictionary-encoded leaf in `meta/storage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DictionarySpec {
    /// The codes' dtype: `"int32"`.
    pub codes: String,
    /// The most entries the dictionary may hold.
    pub limit: u64,
    /// How the dictionary (a `varstr` column of distinct entries) is stored; its `dflt` is
    /// the string that the codes' fill (−1) reads as.
    pub storage: ColumnStorage,
}

/// The `dtype` of a [`FieldSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldType {
    /// A dtype name, `varstr` or `varbytes`.
    Leaf(String),
    /// A nested structure.
    Struct(Vec<FieldSpec>),
}

/// `meta/storage` of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableStorage {
    /// Always `"blz"`.
    pub format: String,
    /// Layout version.
    pub version: u32,
    /// Always `"table"`.
    pub kind: String,
    /// The fields, in order.
    pub dtype: Vec<FieldSpec>,
    /// Rows the user expected at creation (a sizing hint).
    #[serde(default)]
    pub expectedlen: u64,
    /// The table's identity (see `ArrayStorage::id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A leaf column: its slash-joined path (`point/x`), kind and storage.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// Path of the column: field names joined by `/`; also its directory under `data/`.
    pub path: String,
    /// What it holds.
    pub kind: LeafKind,
    /// How it is stored.
    pub storage: ColumnStorage,
    /// Whether the column may hold nulls (it then has a validity column).
    pub nullable: bool,
    /// The pandas dtype recorded for the column, if any.
    pub pandas: Option<String>,
    /// A `datetime64` column's time zone (its values are UTC instants), if any.
    pub timezone: Option<String>,
    /// This leaf is the validity column or the dictionary of a column before it: hidden
    /// from the table's users, carried by every operation like any other column.
    pub(crate) hidden: bool,
    /// Its part in a dictionary-encoded column, if any.
    pub(crate) dict: DictPart,
}

/// A leaf's part in a dictionary-encoded column (`spec/table.md` §3.6).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DictPart {
    /// No part: an ordinary leaf.
    None,
    /// The column itself, whose files hold `int32` codes: users see `varstr` values.
    Codes {
        /// The most entries its dictionary may hold.
        limit: u64,
        /// The string a code −1 (the codes' fill) reads as.
        fill: Vec<u8>,
    },
    /// The hidden dictionary: distinct entries, appended to, never rewritten.
    Entries,
}

/// The zone to record for field `f` (a leaf's `options.timezone`), checked.
///
/// # Errors
/// As [`check_leaf_zone`](super::zone::check_leaf_zone); a structure with a zone.
pub(crate) fn field_zone(f: &Field) -> Result<Option<String>> {
    let Some(tz) = &f.options.timezone else {
        return Ok(None);
    };
    let kind = match &f.kind {
        FieldKind::Scalar(d) => LeafKind::Fixed(*d),
        FieldKind::VarStr => LeafKind::VarStr,
        FieldKind::VarBytes => LeafKind::VarBytes,
        FieldKind::Struct(_) => {
            return Err(Error::InvalidArgument(format!(
                "structure {} cannot have a time zone ({tz:?}): only datetime64 leaves do",
                f.name
            )))
        }
    };
    super::zone::check_leaf_zone(&f.name, kind, tz)?;
    Ok(Some(tz.clone()))
}

impl Field {
    /// A `datetime64` field (seconds .. nanoseconds, or hours, minutes) whose values are
    /// instants in UTC shown in the zone `tz`: an IANA name (`"UTC"`, `"Europe/Paris"`) or a
    /// fixed offset (`"+05:30"`). The zone is checked when the table is created or the column
    /// added.
    ///
    /// ```
    /// use blz::table::Field;
    /// use blz::dtype::{DType, TimeUnit};
    /// let f = Field::new("t", DType::DateTime(TimeUnit::Nanosecond)).with_timezone("UTC");
    /// assert_eq!(f.options.timezone.as_deref(), Some("UTC"));
    /// ```
    pub fn with_timezone(mut self, tz: &str) -> Field {
        self.options.timezone = Some(tz.to_string());
        self
    }
}

/// A column's own option, else the table's default.
pub(super) fn pick<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
    a.clone().or_else(|| b.clone())
}

/// The storage of a new leaf of kind `kind`: its own options, else the table's `defaults`,
/// checked, with the chunk length sized for `expected` rows (`file_bytes` as
/// `build_storage_meta` takes it) and a new identity.
pub(super) fn leaf_storage(
    kind: LeafKind,
    opts: &ColumnOptions,
    defaults: &ColumnOptions,
    expected: u64,
    file_bytes: u64,
) -> Result<ColumnStorage> {
    let (compression, chunklen) = match kind {
        LeafKind::Fixed(dtype) => {
            let probe = CreateOptions {
                chunkshape: pick(&opts.chunklen, &defaults.chunklen).map(|c| vec![c]),
                superchunksize: pick(&opts.superchunksize, &defaults.superchunksize),
                compression: pick(&opts.compression, &defaults.compression).unwrap_or_default(),
                expectedlen: Some(expected),
                fill: pick(&opts.fill, &defaults.fill).unwrap_or(serde_json::Value::Null),
                ..Default::default()
            };
            let m = build_storage_meta(dtype, &[0], &probe, file_bytes)?;
            return Ok(ColumnStorage {
                endianness: Endianness::native(),
                chunklen: m.chunkshape[0],
                superchunksize: m.superchunksize,
                compression: m.compression,
                checksum: pick(&opts.checksum, &defaults.checksum).unwrap_or(Checksum::Crc32),
                slack: pick(&opts.slack, &defaults.slack).unwrap_or(0),
                dflt: m.dflt,
                id: Some(meta::new_id()),
            });
        }
        LeafKind::VarStr | LeafKind::VarBytes => (
            pick(&opts.compression, &defaults.compression).unwrap_or(Compression {
                codec: crate::blosc::Codec::Zstd,
                clevel: 1,
                filters: vec![],
                mantissa_bits: None,
                blocksize: 0,
            }),
            pick(&opts.chunklen, &defaults.chunklen).unwrap_or(DEFAULT_VAR_CHUNKLEN),
        ),
    };
    if chunklen == 0 {
        return Err(Error::InvalidArgument("chunklen must be at least 1".into()));
    }
    if compression.filters.contains(&FilterName::Truncate) {
        return Err(Error::InvalidArgument(
            "the truncate filter applies to float columns only".into(),
        ));
    }
    compression.validate(DType::U8)?;
    let dflt = pick(&opts.fill, &defaults.fill).unwrap_or(serde_json::json!(""));
    if !dflt.is_string() {
        return Err(Error::InvalidArgument(format!(
            "fill value {dflt} of a variable-length column must be a string"
        )));
    }
    Ok(ColumnStorage {
        endianness: Endianness::native(),
        chunklen,
        superchunksize: pick(&opts.superchunksize, &defaults.superchunksize)
            .unwrap_or(256)
            .max(1),
        compression,
        checksum: pick(&opts.checksum, &defaults.checksum).unwrap_or(Checksum::Crc32),
        slack: pick(&opts.slack, &defaults.slack).unwrap_or(0),
        dflt,
        id: Some(meta::new_id()),
    })
}

impl Leaf {
    /// Whether the column is dictionary-encoded (it reads as `varstr`).
    pub fn is_dictionary(&self) -> bool {
        matches!(self.dict, DictPart::Codes { .. })
    }

    /// What the column's files hold: `int32` codes for a dictionary-encoded column, its
    /// kind otherwise.
    pub(crate) fn stored_kind(&self) -> LeafKind {
        match self.dict {
            DictPart::Codes { .. } => LeafKind::Fixed(DType::I32),
            _ => self.kind,
        }
    }

    /// The column's type as shown to people: its kind's name, and ` (dictionary)` for a
    /// dictionary-encoded one.
    pub fn type_name(&self) -> String {
        if self.is_dictionary() {
            format!("{} (dictionary)", self.kind.name())
        } else {
            self.kind.name()
        }
    }
}

/// The name of a nullable column's validity column inside the column's directory.
pub(crate) const VALIDITY_DIR: &str = "__validity__";

/// The path of column `path`'s validity column (`data/<path>/__validity__/`).
pub(crate) fn validity_path(path: &str) -> String {
    format!("{path}/{VALIDITY_DIR}")
}

/// The name of a dictionary-encoded column's dictionary inside the column's directory.
pub(crate) const DICTIONARY_DIR: &str = "__dictionary__";

/// The path of column `path`'s dictionary (`data/<path>/__dictionary__/`).
pub(crate) fn dictionary_path(path: &str) -> String {
    format!("{path}/{DICTIONARY_DIR}")
}

/// Lists the leaf columns of a spec tree in order.
///
/// # Errors
/// [`Error::InvalidArgument`] for a leaf without storage, a bad name or an unknown dtype.
pub(crate) fn leaves(specs: &[FieldSpec]) -> Result<Vec<Leaf>> {
    fn walk(prefix: &str, specs: &[FieldSpec], out: &mut Vec<Leaf>) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for s in specs {
            check_name(&s.name)?;
            if !seen.insert(s.name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "duplicate column name {:?}",
                    s.name
                )));
            }
            let path = if prefix.is_empty() {
                s.name.clone()
            } else {
                format!("{prefix}/{}", s.name)
            };
            match &s.dtype {
                FieldType::Leaf(t) => {
                    let storage = s.storage.clone().ok_or_else(|| {
                        Error::InvalidArgument(format!("column {path} has no storage"))
                    })?;
                    let kind = LeafKind::parse(t)?;
                    if let Some(tz) = &s.timezone {
                        super::zone::check_leaf_zone(&path, kind, tz)?;
                    }
                    let dict = match &s.dictionary {
                        None => DictPart::None,
                        Some(d) => {
                            if kind != LeafKind::VarStr || d.codes != "int32" {
                                return Err(Error::InvalidArgument(format!(
                                    "column {path}: a dictionary needs a varstr column with \
                                     int32 codes, not {t} with {} codes",
                                    d.codes
                                )));
                            }
                            DictPart::Codes {
                                limit: d.limit,
                                fill: d.storage.dflt.as_str().unwrap_or("").as_bytes().to_vec(),
                            }
                        }
                    };
                    out.push(Leaf {
                        path: path.clone(),
                        kind,
                        storage,
                        nullable: s.validity.is_some(),
                        pandas: s.pandas.clone(),
                        timezone: s.timezone.clone(),
                        hidden: false,
                        dict,
                    });
                    if let Some(v) = &s.validity {
                        out.push(Leaf {
                            path: validity_path(&path),
                            kind: LeafKind::Fixed(DType::Bool),
                            storage: v.clone(),
                            nullable: false,
                            pandas: None,
                            timezone: None,
                            hidden: true,
                            dict: DictPart::None,
                        });
                    }
                    if let Some(d) = &s.dictionary {
                        out.push(Leaf {
                            path: dictionary_path(&path),
                            kind: LeafKind::VarStr,
                            storage: d.storage.clone(),
                            nullable: false,
                            pandas: None,
                            timezone: None,
                            hidden: true,
                            dict: DictPart::Entries,
                        });
                    }
                }
                FieldType::Struct(sub) => {
                    if s.timezone.is_some() {
                        return Err(Error::InvalidArgument(format!(
                            "structure {path} has a time zone (only datetime64 leaves have one)"
                        )));
                    }
                    if s.validity.is_some() || s.dictionary.is_some() {
                        return Err(Error::InvalidArgument(format!(
                            "structure {path} has a validity column or a dictionary (only leaves have one)"
                        )));
                    }
                    if sub.is_empty() {
                        return Err(Error::InvalidArgument(format!(
                            "structure {path} has no fields"
                        )));
                    }
                    walk(&path, sub, out)?
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk("", specs, &mut out)?;
    Ok(out)
}
