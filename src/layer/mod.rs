//! Layer datasets: sorted columns with row groups, value indexes and membership filters.
//!
//! An n-layer dataset (n = 1, 2 or 3 in practice) stores n columns. Column 1 is one sorted
//! set of values. Row `j` of column `i` owns the `j`-th row group of column `i + 1`, and
//! each row group is sorted. The last column may carry an auxiliary value per row (a weight).
//! A dataset is written in a single pass over sorted input by [`LayerWriter`] (or from input
//! in any order by [`SortingLayerWriter`], an external sort in bounded memory) and read with
//! [`Cursor`]s from a [`Layer`].
//!
//! ```no_run
//! use blz::layer::{ColumnDef, Layer, LayerSchema, LayerWriter, Value};
//! use blz::layer::LeafKind;
//! use blz::DType;
//! # fn main() -> blz::Result<()> {
//! let schema = LayerSchema::new(vec![
//!     ColumnDef::new("k", LeafKind::Fixed(DType::I64)),
//!     ColumnDef::new("v", LeafKind::VarStr),
//! ])
//! .with_weight("w", DType::I64);
//! let mut w = LayerWriter::create("pairs.blz", schema)?;
//! w.push(&[1i64.into(), "a".into()], Some(10i64.into()))?;
//! w.push(&[1i64.into(), "b".into()], Some(Value::Int(-1)))?;
//! w.push(&[5i64.into(), "a".into()], Some(3i64.into()))?;
//! w.finish()?;
//!
//! let layer = Layer::open("pairs.blz")?;
//! let mut c = layer.cursor();
//! assert!(c.seek_ge(&Value::Int(2))?);
//! assert_eq!(c.value()?, Some(Value::Int(5)));
//! let child = c.child()?.expect("column 2");
//! assert_eq!(child.count(), 1);
//! assert!(!layer.may_contain(&Value::Int(3))? || !layer.contains(&Value::Int(3))?);
//! # Ok(()) }
//! ```
//!
//! The directory layout, every byte of the index, row-group and filter chunks, and the
//! reasons for the choices are in `spec/layer.md`.

pub(crate) mod filter;
mod merge;
mod reader;
mod sink;
mod sort;
pub mod value;
mod writer;

pub use merge::{merge, schema_of, LayerPaths, MergeReport};
pub use reader::{Cursor, Layer, ReadStats};
pub use sort::{
    SortOptions, SortReport, SortingLayerWriter, DEFAULT_FAN_IN, DEFAULT_SORT_MEMORY, SORT_RUNS_DIR,
};
pub use value::{Value, ValueType};
pub use writer::{LayerWriter, Numbers};

use crate::blpk::Checksum;
pub use crate::column::LeafKind;

use crate::column::check_name;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::meta::Compression;
use serde::{Deserialize, Serialize};

/// Value of `kind` in a layer dataset's `meta/storage` and `meta/sizes`.
pub(crate) const LAYER_KIND: &str = "layer";
/// Default rows per data chunk for fixed-size values.
pub const DEFAULT_FIXED_CHUNKLEN: u64 = 8192;
/// Default rows per data chunk for variable-length values.
pub const DEFAULT_VAR_CHUNKLEN: u64 = 1024;
/// Default index fan-out: entries per index chunk.
pub const DEFAULT_FANOUT: u64 = 256;
/// Default target false-positive rate of the membership filters.
pub const DEFAULT_FPR: f64 = 1e-4;
/// Values a filter block covers, at least (rounded up to whole data chunks).
pub(crate) const FILTER_BLOCK_VALUES: u64 = 65536;
/// Default chunks per superchunk file.
pub const DEFAULT_SUPERCHUNKSIZE: u64 = 1024;

/// Whether and how a column's values are filtered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterSetting {
    /// No filter: a membership query reads the candidate data chunk.
    Off,
    /// A filter sized for this false-positive rate.
    Fpr(f64),
    /// A filter with this many bits per value.
    BitsPerValue(u32),
}

/// Which kind of membership filter a column's filter blocks get.
///
/// An exact filter holds the block's integer values as Roaring bitmaps and answers without
/// false positives; a Bloom filter has the false-positive rate of its [`FilterSetting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterKind {
    /// Per filter block, the exact filter when its payload is no larger than the Bloom
    /// filter's, else the Bloom filter (Bloom for columns that are not integers).
    #[default]
    Auto,
    /// Bloom filters only.
    Bloom,
    /// Exact filters only (integer columns; refused for others).
    Exact,
}

impl FilterKind {
    /// The name used in `meta/storage`, the CLI and Python: `auto`, `bloom` or `exact`.
    pub fn name(&self) -> &'static str {
        match self {
            FilterKind::Auto => "auto",
            FilterKind::Bloom => "bloom",
            FilterKind::Exact => "exact",
        }
    }

    /// Parses [`name`](Self::name).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another name.
    pub fn parse(s: &str) -> Result<FilterKind> {
        match s {
            "auto" => Ok(FilterKind::Auto),
            "bloom" => Ok(FilterKind::Bloom),
            "exact" => Ok(FilterKind::Exact),
            other => Err(Error::InvalidArgument(format!(
                "unknown filter kind {other:?} (auto, bloom or exact)"
            ))),
        }
    }

    /// The kind of files written before exact filters existed.
    fn legacy() -> FilterKind {
        FilterKind::Bloom
    }
}

/// The named shapes of DBSP's batches, as layer datasets. Each has a weight `R` on its
/// last column's rows:
///
/// - [`Shape::WSet`] `(K, R)`: one column, the keys (`BTreeMap<K, R>`).
/// - [`Shape::IndexedZSet`] `K -> (V, R)`: two columns, keys and their values
///   (`BTreeMap<K, BTreeMap<V, R>>`).
/// - [`Shape::ValBatch`] `K -> V -> [(T, R)]`: three columns, keys, values and times
///   (`BTreeMap<K, BTreeMap<V, BTreeMap<T, R>>>`).
///
/// A shape is recorded in `meta/storage` (`"shape"`), checked against the columns when a
/// layer is built or opened, and kept by merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    /// `(K, R)`.
    #[serde(rename = "wset")]
    WSet,
    /// `K -> (V, R)`.
    #[serde(rename = "indexed_zset")]
    IndexedZSet,
    /// `K -> V -> [(T, R)]`.
    #[serde(rename = "val_batch")]
    ValBatch,
}

impl Shape {
    /// The recorded name: `wset`, `indexed_zset` or `val_batch`.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::WSet => "wset",
            Shape::IndexedZSet => "indexed_zset",
            Shape::ValBatch => "val_batch",
        }
    }

    /// Parses [`name`](Self::name).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another name.
    pub fn parse(s: &str) -> Result<Shape> {
        match s {
            "wset" => Ok(Shape::WSet),
            "indexed_zset" => Ok(Shape::IndexedZSet),
            "val_batch" => Ok(Shape::ValBatch),
            other => Err(Error::InvalidArgument(format!(
                "unknown shape {other:?} (wset, indexed_zset or val_batch)"
            ))),
        }
    }

    /// The number of key columns: 1, 2 or 3.
    pub fn ncolumns(&self) -> usize {
        match self {
            Shape::WSet => 1,
            Shape::IndexedZSet => 2,
            Shape::ValBatch => 3,
        }
    }

    /// The default column names of the shape's schema constructors: `key`, `val`, `time`.
    pub fn column_names(&self) -> &'static [&'static str] {
        &["key", "val", "time"][..self.ncolumns()]
    }

    /// Checks that `ncolumns` columns and a weight (or none) make this shape.
    fn check(&self, ncolumns: usize, weighted: bool) -> std::result::Result<(), String> {
        if ncolumns != self.ncolumns() || !weighted {
            return Err(format!(
                "a {} has {} column{} and a weight; this layer has {ncolumns} column{} and {}",
                self.name(),
                self.ncolumns(),
                if self.ncolumns() == 1 { "" } else { "s" },
                if ncolumns == 1 { "" } else { "s" },
                if weighted { "a weight" } else { "no weight" }
            ));
        }
        Ok(())
    }
}

/// One column of a layer dataset, as given to [`LayerWriter::create`].
#[derive(Debug, Clone)]
pub struct ColumnDef {
    /// Name (also the directory `data/<name>/`).
    pub name: String,
    /// Value type: an integer or float dtype, `varstr`, `varbytes`, or a tuple of these.
    pub kind: ValueType,
    /// Rows per data chunk (default by kind).
    pub chunklen: Option<u64>,
    /// Entries per index chunk.
    pub fanout: u64,
    /// Membership filter: off, or the Bloom filter's size.
    pub filter: FilterSetting,
    /// Kind of membership filter (when `filter` is not [`FilterSetting::Off`]).
    pub filter_kind: FilterKind,
    /// Compression of the data, index and row-group chunks.
    pub compression: Compression,
    /// Digest stored after every chunk.
    pub checksum: Checksum,
}

impl ColumnDef {
    /// A column with the default chunking, fan-out, filter (exact or Bloom at 1e-4), LZ4 and Adler-32 digests.
    pub fn new(name: &str, kind: impl Into<ValueType>) -> ColumnDef {
        ColumnDef {
            name: name.to_string(),
            kind: kind.into(),
            chunklen: None,
            fanout: DEFAULT_FANOUT,
            filter: FilterSetting::Fpr(DEFAULT_FPR),
            filter_kind: FilterKind::Auto,
            compression: Compression::default(),
            checksum: Checksum::Adler32,
        }
    }

    /// Sets the rows per data chunk.
    pub fn with_chunklen(mut self, chunklen: u64) -> ColumnDef {
        self.chunklen = Some(chunklen);
        self
    }

    /// Sets the index fan-out.
    pub fn with_fanout(mut self, fanout: u64) -> ColumnDef {
        self.fanout = fanout;
        self
    }

    /// Sets the filter.
    pub fn with_filter(mut self, filter: FilterSetting) -> ColumnDef {
        self.filter = filter;
        self
    }

    /// Sets the kind of filter.
    pub fn with_filter_kind(mut self, kind: FilterKind) -> ColumnDef {
        self.filter_kind = kind;
        self
    }
}

/// The columns of a layer dataset and how it is written.
#[derive(Debug, Clone)]
pub struct LayerSchema {
    /// The columns, outermost first.
    pub columns: Vec<ColumnDef>,
    /// The auxiliary value of the last column's rows: name and dtype.
    pub weight: Option<(String, DType)>,
    /// Chunks per superchunk file.
    pub superchunksize: u64,
    /// Replace an existing layer dataset at the path.
    pub overwrite: bool,
    /// The named shape the layer has (checked against the columns and weight).
    pub shape: Option<Shape>,
}

impl LayerSchema {
    /// A schema with these columns and no weight.
    pub fn new(columns: Vec<ColumnDef>) -> LayerSchema {
        LayerSchema {
            columns,
            weight: None,
            superchunksize: DEFAULT_SUPERCHUNKSIZE,
            overwrite: false,
            shape: None,
        }
    }

    /// A WSet `(K, R)`: column `key` of `key` values, weight `weight` of type `r`.
    pub fn wset(key: impl Into<ValueType>, r: DType) -> LayerSchema {
        Self::shaped(Shape::WSet, vec![key.into()], r)
    }

    /// An IndexedZSet `K -> (V, R)`: columns `key` and `val`, weight `weight` of type `r`.
    pub fn indexed_zset(
        key: impl Into<ValueType>,
        val: impl Into<ValueType>,
        r: DType,
    ) -> LayerSchema {
        Self::shaped(Shape::IndexedZSet, vec![key.into(), val.into()], r)
    }

    /// A ValBatch `K -> V -> [(T, R)]`: columns `key`, `val` and `time`, weight `weight` of
    /// type `r`.
    pub fn val_batch(
        key: impl Into<ValueType>,
        val: impl Into<ValueType>,
        time: impl Into<ValueType>,
        r: DType,
    ) -> LayerSchema {
        Self::shaped(
            Shape::ValBatch,
            vec![key.into(), val.into(), time.into()],
            r,
        )
    }

    fn shaped(shape: Shape, types: Vec<ValueType>, r: DType) -> LayerSchema {
        let columns = shape
            .column_names()
            .iter()
            .zip(types)
            .map(|(n, t)| ColumnDef::new(n, t))
            .collect();
        let mut s = LayerSchema::new(columns).with_weight("weight", r);
        s.shape = Some(shape);
        s
    }

    /// Marks the schema as having `shape` (checked when the build starts).
    pub fn with_shape(mut self, shape: Shape) -> LayerSchema {
        self.shape = Some(shape);
        self
    }

    /// Adds a weight of `dtype` to the last column's rows.
    pub fn with_weight(mut self, name: &str, dtype: DType) -> LayerSchema {
        self.weight = Some((name.to_string(), dtype));
        self
    }
}

/// Filter parameters as recorded in `meta/storage`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FilterMeta {
    /// Bits per value.
    pub bits_per_value: u32,
    /// Bits set per value.
    pub hashes: u32,
    /// Data chunks covered by one filter chunk.
    pub chunks_per_block: u64,
    /// The false-positive rate the parameters predict.
    pub predicted_fpr: f64,
    /// Kind of the filter blocks (`bloom` when absent: files written before exact filters).
    #[serde(default = "FilterKind::legacy")]
    pub kind: FilterKind,
}

/// One column as recorded in `meta/storage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerColumn {
    /// Name and directory.
    pub name: String,
    /// `int8`..`uint64`, `float32`, `float64`, `varstr` or `varbytes`, or a tuple of
    /// these: `(int64,varstr)` (see [`ValueType::name`]).
    pub dtype: String,
    /// Rows per data chunk.
    pub chunklen: u64,
    /// Index entries per index chunk.
    pub fanout: u64,
    /// Chunks per superchunk file.
    pub superchunksize: u64,
    /// Compression.
    pub compression: Compression,
    /// Digest after each chunk.
    #[serde(with = "crate::meta::checksum_name")]
    pub checksum: Checksum,
    /// Membership filter, if any.
    pub filter: Option<FilterMeta>,
}

/// The weight column as recorded in `meta/storage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightMeta {
    /// Name (for display; stored in `data/<last column>/weight/`).
    pub name: String,
    /// Element type.
    pub dtype: DType,
}

/// `meta/storage` of a layer dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerStorage {
    /// Always `"blz"`.
    pub format: String,
    /// Layout version (1).
    pub version: u32,
    /// Always `"layer"`.
    pub kind: String,
    /// The columns, outermost first.
    pub columns: Vec<LayerColumn>,
    /// The last column's auxiliary value.
    pub weight: Option<WeightMeta>,
    /// The dataset's identity (as `id` of an N-d array's `meta/storage`), recorded in each of
    /// its superchunk files; absent in layer datasets built before files were bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The named shape (`wset`, `indexed_zset`, `val_batch`), when the layer has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
}

impl LayerStorage {
    /// Checks the recorded shape against the columns and weight.
    pub(crate) fn check_shape(&self) -> std::result::Result<(), String> {
        match self.shape {
            Some(s) => s.check(self.columns.len(), self.weight.is_some()),
            None => Ok(()),
        }
    }
}

/// Counts of one column in `meta/sizes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnCounts {
    /// Rows.
    pub rows: u64,
    /// Index chunks per level, bottom level first (the last level holds one chunk).
    pub index_chunks: Vec<u64>,
    /// Filter chunks.
    pub filter_chunks: u64,
    /// Filter chunks that are exact filters (absent in files written before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_filter_chunks: Option<u64>,
    /// Stored bytes (chunks plus digests) of the filter chunks (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_bytes: Option<u64>,
    /// Uncompressed bytes of all the column's chunks.
    pub nbytes: u64,
    /// Stored bytes (compressed chunks plus digests) of all the column's chunks.
    pub cbytes: u64,
}

/// `meta/sizes` of a layer dataset: written last, when the build is complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSizes {
    /// Always `"layer"`.
    pub kind: String,
    /// Per column, outermost first.
    pub columns: Vec<ColumnCounts>,
}

impl ColumnDef {
    /// Checks the column's settings and turns them into its entry of `meta/storage`.
    fn to_storage(&self, superchunksize: u64) -> Result<LayerColumn> {
        check_name(&self.name)?;
        value::check_type(&self.kind)?;
        let chunklen = self.chunklen.unwrap_or(match self.kind.fixed_size() {
            Some(_) => DEFAULT_FIXED_CHUNKLEN,
            None => DEFAULT_VAR_CHUNKLEN,
        });
        if chunklen == 0 || chunklen > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument(format!(
                "column {}: chunklen must be 1..=2^32-1",
                self.name
            )));
        }
        if self.fanout < 2 || self.fanout > 1 << 20 {
            return Err(Error::InvalidArgument(format!(
                "column {}: fanout must be 2..=2^20",
                self.name
            )));
        }
        for leaf in self.kind.leaves() {
            self.compression.validate(match leaf {
                LeafKind::Fixed(d) => d,
                _ => DType::U8,
            })?;
        }
        Ok(LayerColumn {
            name: self.name.clone(),
            dtype: self.kind.name(),
            chunklen,
            fanout: self.fanout,
            superchunksize: superchunksize.max(1),
            compression: self.compression.clone(),
            checksum: self.checksum,
            filter: self.filter_meta(chunklen)?,
        })
    }

    /// The filter parameters of the column's setting, for chunks of `chunklen` values.
    fn filter_meta(&self, chunklen: u64) -> Result<Option<FilterMeta>> {
        let chunks_per_block = FILTER_BLOCK_VALUES.div_ceil(chunklen).max(1);
        let (bits_per_value, hashes, predicted_fpr) = match self.filter {
            FilterSetting::Off => return Ok(None),
            _ if self.filter_kind == FilterKind::Exact && !value::exact_capable(&self.kind) => {
                return Err(Error::InvalidArgument(format!(
                    "column {}: an exact filter needs an integer column, not {}",
                    self.name,
                    self.kind.name()
                )))
            }
            FilterSetting::Fpr(p) => {
                if !(p > 0.0 && p < 1.0) {
                    return Err(Error::InvalidArgument(format!(
                        "column {}: false-positive rate {p} is not in (0, 1)",
                        self.name
                    )));
                }
                filter::params_for_fpr(p)
            }
            FilterSetting::BitsPerValue(b) => {
                if !(1..=64).contains(&b) {
                    return Err(Error::InvalidArgument(format!(
                        "column {}: bits per value must be 1..=64",
                        self.name
                    )));
                }
                let (k, pred) = filter::best_hashes(f64::from(b));
                (b, k, pred)
            }
        };
        let kind = match self.filter_kind {
            FilterKind::Auto if !value::exact_capable(&self.kind) => FilterKind::Bloom,
            k => k,
        };
        Ok(Some(FilterMeta {
            bits_per_value,
            hashes,
            chunks_per_block,
            predicted_fpr,
            kind,
        }))
    }
}

impl LayerSchema {
    /// Checks the schema and turns it into the `meta/storage` document.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no columns, bad or duplicate names (a weight named as a
    /// column included), unsupported value types, zero chunk lengths, fan-outs below 2, bad
    /// filter settings or compression.
    pub fn to_storage(&self) -> Result<LayerStorage> {
        if self.columns.is_empty() {
            return Err(Error::InvalidArgument(
                "a layer dataset needs at least one column".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        let mut columns = Vec::new();
        for c in &self.columns {
            if !names.insert(c.name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "duplicate column name {:?}",
                    c.name
                )));
            }
            columns.push(c.to_storage(self.superchunksize)?);
        }
        let weight = match &self.weight {
            Some((name, dtype)) => {
                check_name(name)?;
                // SQL, the CLI's CSV and Python name a row's fields by these names: one name
                // for two of them would leave a reader unable to tell which it means.
                if names.contains(name.as_str()) {
                    return Err(Error::InvalidArgument(format!(
                        "the weight's name {name:?} is also a column's: keys and weight need \
                         distinct names"
                    )));
                }
                value::check_kind(LeafKind::Fixed(*dtype))?;
                Some(WeightMeta {
                    name: name.clone(),
                    dtype: *dtype,
                })
            }
            None => None,
        };
        Ok(LayerStorage {
            format: crate::meta::FORMAT_NAME.into(),
            version: crate::meta::FORMAT_VERSION,
            kind: LAYER_KIND.into(),
            columns,
            weight,
            id: Some(crate::meta::new_id()),
            shape: self.shape,
        })
        .and_then(|m: LayerStorage| {
            m.check_shape().map_err(Error::InvalidArgument)?;
            Ok(m)
        })
    }
}

/// Directory of a column's data chunks, relative to the root.
fn data_dir(col: &str) -> std::path::PathBuf {
    std::path::Path::new("data").join(col)
}

/// Directory of the data chunks of leaf field `j` (depth first) of tuple column `col`,
/// relative to the root.
fn field_dir(col: &str, j: usize) -> std::path::PathBuf {
    data_dir(col).join("fields").join(j.to_string())
}

/// True when `root` holds a layer dataset (its `meta/storage` says `kind: "layer"`).
pub fn is_layer(root: &std::path::Path) -> bool {
    crate::storage::for_path(root).is_ok_and(|(storage, root)| {
        crate::meta::dataset_kind(storage.as_ref(), &root) == Some(crate::meta::Kind::Layer)
    })
}
