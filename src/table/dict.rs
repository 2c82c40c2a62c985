//! Dictionary-encoded (categorical) string columns (`spec/table.md` §3.6). Such a column's
//! own files hold one `int32` code per row, and its distinct strings are kept once each in
//! a hidden `varstr` column `data/<path>/__dictionary__/`, appended to and never rewritten.
//! Both are ordinary columns of the table, so every operation (transactions, resizes,
//! schema changes, compaction, verification, the journal) carries them; the dictionary
//! differs only in its row count, which `meta/sizes` records as its `rows`. This module
//! turns strings into codes on writing (extending the dictionary), codes into strings on
//! reading, and gives clients the codes and the dictionary themselves.

use super::schema::{dictionary_path, DictPart, DictionarySpec, FieldKind};
use super::{Column, ColumnOptions, ColumnStorage, Engine, Field, LeafKind, Table, Values};
use crate::dtype::DType;
use crate::engine::{ArrayCore, ChunkWrites};
use crate::error::{Error, Result};
use crate::meta::{Compression, FilterName, MetaPaths};
use crate::selection::AxisSel;
use crate::stats::StatValue;
use crate::txn::Txn;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The most entries a dictionary can hold: codes are non-negative `int32`s.
pub(crate) const MAX_DICTIONARY_LIMIT: u64 = i32::MAX as u64;

/// The code a row holds when it holds the column's fill value (rows added without a value,
/// null rows): it reads as the dictionary's `dflt` string, whether or not that string is an
/// entry.
pub const FILL_CODE: i32 = -1;

/// A dictionary's entries as last read, kept by its column (entries are only ever
/// appended, so a cache of the committed count is the committed prefix).
#[derive(Debug, Default)]
pub(super) struct EntriesCache(Mutex<Option<Arc<Vec<Vec<u8>>>>>);

/// A dictionary-encoded column's values for some rows, as codes into its dictionary.
#[derive(Debug, Clone, PartialEq)]
pub struct DictionaryValues {
    /// One code per row, an index into `dictionary`; −1 at a null row (as pandas'
    /// categorical codes have it).
    pub codes: Vec<i32>,
    /// The entries the codes index: the column's dictionary, in order, and its fill value
    /// after them when a row holds the fill value and the dictionary has no such entry.
    pub dictionary: Vec<String>,
}

/// The codes' storage and the dictionary of a new field (`None` when the field is not
/// dictionary-encoded).
///
/// # Errors
/// [`Error::InvalidArgument`] for a dictionary asked of a column that is not `varstr`, a
/// limit out of range, a fill value that is not a string.
pub(super) fn new_spec(
    f: &Field,
    defaults: &ColumnOptions,
    expected: u64,
    file_bytes: u64,
) -> Result<Option<(ColumnStorage, DictionarySpec)>> {
    let asked = f.options.dictionary.unwrap_or(false);
    let by_default = f.options.dictionary.is_none() && defaults.dictionary == Some(true);
    if !asked && !by_default {
        return Ok(None);
    }
    match f.kind {
        FieldKind::VarStr => {}
        // The table's default applies to the columns it fits.
        _ if by_default => return Ok(None),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "column {}: only varstr columns can be dictionary-encoded",
                f.name
            )))
        }
    }
    let limit = f
        .options
        .dictionary_limit
        .or(defaults.dictionary_limit)
        .unwrap_or(MAX_DICTIONARY_LIMIT);
    if limit == 0 || limit > MAX_DICTIONARY_LIMIT {
        return Err(Error::InvalidArgument(format!(
            "column {}: a dictionary limit must be within 1..={MAX_DICTIONARY_LIMIT}, not {limit}",
            f.name
        )));
    }
    let fill = f
        .options
        .fill
        .clone()
        .or_else(|| defaults.fill.clone())
        .unwrap_or(serde_json::json!(""));
    if !fill.is_string() {
        return Err(Error::InvalidArgument(format!(
            "column {}: fill value {fill} of a string column must be a string",
            f.name
        )));
    }
    // Codes are small integers: bitshuffle keeps about log2(entries) bits of each, whatever
    // the table's default compression (chosen for other columns) is.
    let compression = f
        .options
        .compression
        .clone()
        .filter(|c| c.validate(DType::I32).is_ok())
        .unwrap_or(Compression {
            codec: crate::blosc::Codec::Lz4,
            clevel: 5,
            filters: vec![FilterName::Bitshuffle],
            mantissa_bits: None,
            blocksize: 0,
        });
    let codes = ColumnOptions {
        compression: Some(compression),
        fill: Some(serde_json::json!(FILL_CODE)),
        ..f.options.clone()
    };
    let codes = super::schema::leaf_storage(
        LeafKind::Fixed(DType::I32),
        &codes,
        defaults,
        expected,
        file_bytes,
    )?;
    let entries = ColumnOptions {
        chunklen: f.options.chunklen.or(defaults.chunklen),
        superchunksize: f.options.superchunksize.or(defaults.superchunksize),
        checksum: f.options.checksum.or(defaults.checksum),
        fill: Some(fill),
        ..ColumnOptions::default()
    };
    let entries = super::schema::leaf_storage(
        LeafKind::VarStr,
        &entries,
        &ColumnOptions::default(),
        0,
        file_bytes,
    )?;
    Ok(Some((
        codes,
        DictionarySpec {
            codes: "int32".into(),
            limit,
            storage: entries,
        },
    )))
}

/// Codes as a fixed-size `int32` column's values.
fn codes_values(codes: &[i32]) -> Values {
    Values::Fixed {
        dtype: DType::I32,
        data: codes.iter().flat_map(|c| c.to_ne_bytes()).collect(),
    }
}

/// One dictionary as a write sees it: its committed entries and the ones it adds.
#[derive(Debug)]
struct Pending {
    /// The column's path.
    path: String,
    /// Entries committed before the write.
    committed: u64,
    limit: u64,
    /// Every entry (committed and added) with its code.
    index: HashMap<Vec<u8>, i32>,
    /// Entries the write adds, in code order from `committed`.
    added: Vec<Vec<u8>>,
}

/// Turns the strings written to dictionary-encoded columns into codes, collecting the
/// entries their dictionaries gain; the table then writes the codes as the column's values
/// and the new entries at the end of its dictionary, in the same transaction.
#[derive(Debug, Default)]
pub(super) struct Encoder {
    dicts: Vec<Pending>,
}

impl Encoder {
    /// An encoder for the writes to every dictionary-encoded column of `table` (whose
    /// dictionaries are read, or taken from their cache).
    ///
    /// # Errors
    /// Reading a dictionary.
    pub(super) fn new(table: &Table) -> Result<Encoder> {
        let mut dicts = Vec::new();
        for c in &table.columns {
            let DictPart::Codes { limit, .. } = c.leaf.dict else {
                continue;
            };
            let entries = table.entries(c)?;
            let index = entries
                .iter()
                .enumerate()
                .map(|(i, e)| (e.clone(), i as i32))
                .collect();
            dicts.push(Pending {
                path: c.leaf.path.clone(),
                committed: entries.len() as u64,
                limit,
                index,
                added: Vec::new(),
            });
        }
        Ok(Encoder { dicts })
    }

    /// The codes of `values` written to column `c` (`None` when `c` is not
    /// dictionary-encoded); `flags` false at null rows, which get the fill code.
    ///
    /// # Errors
    /// Values that are not strings, or not UTF-8; [`Error::DictionaryFull`].
    pub(super) fn encode(
        &mut self,
        root: &Path,
        c: &Column,
        values: &Values,
        flags: Option<&[bool]>,
    ) -> Result<Option<Values>> {
        if !c.leaf.is_dictionary() {
            return Ok(None);
        }
        let Some(d) = self.dicts.iter_mut().find(|d| d.path == c.leaf.path) else {
            return Err(Error::InvalidArgument(format!(
                "column {}: its dictionary was not read before the write",
                c.leaf.path
            )));
        };
        let Values::Var(items) = values else {
            return Err(super::values_mismatch(root, c));
        };
        let mut codes = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if flags.is_some_and(|f| f.get(i) == Some(&false)) {
                codes.push(FILL_CODE);
                continue;
            }
            if let Some(&k) = d.index.get(item) {
                codes.push(k);
                continue;
            }
            if std::str::from_utf8(item).is_err() {
                return Err(super::values_mismatch(root, c));
            }
            let k = d.committed + d.added.len() as u64;
            if k >= d.limit {
                return Err(Error::DictionaryFull {
                    dataset: root.to_path_buf(),
                    column: c.leaf.path.clone(),
                    value: String::from_utf8_lossy(item).into_owned(),
                    limit: d.limit,
                });
            }
            d.index.insert(item.clone(), k as i32);
            d.added.push(item.clone());
            codes.push(k as i32);
        }
        Ok(Some(codes_values(&codes)))
    }

    /// Writes the entries gained at the end of each dictionary (inside the write's
    /// transaction), recording their byte deltas and the dictionaries' new row counts.
    ///
    /// # Errors
    /// I/O errors.
    pub(super) fn write_entries(
        &self,
        columns: &[Column],
        txn: &mut Txn<'_>,
        deltas: &mut BTreeMap<String, (i64, i64)>,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        for d in self.dicts.iter().filter(|d| !d.added.is_empty()) {
            let path = dictionary_path(&d.path);
            let Some(c) = columns.iter().find(|c| c.leaf.path == path) else {
                continue;
            };
            let Engine::Var(var) = &c.engine else {
                continue;
            };
            let from = d.committed;
            let cl = c.leaf.storage.chunklen.max(1);
            let rewrite_from = (!from.is_multiple_of(cl)).then(|| from / cl);
            let mut w = ChunkWrites::new(c.store(), c.nchunks(from), rewrite_from);
            var.write(txn, &mut w, from, from, &d.added)?;
            deltas.insert(path.clone(), w.finish_both(txn)?);
            counts.insert(path, from + d.added.len() as u64);
        }
        Ok(())
    }
}

impl Table {
    /// The committed rows of leaf `c`: the table's, or a dictionary's own count.
    pub(super) fn leaf_rows(&self, c: &Column) -> u64 {
        match c.leaf.dict {
            DictPart::Entries => self
                .sizes
                .columns
                .as_ref()
                .and_then(|m| m.get(&c.leaf.path))
                .and_then(|s| s.rows)
                .unwrap_or(0),
            _ => self.nrows(),
        }
    }

    /// The entries of dictionary-encoded column `c`'s dictionary, from its cache when it
    /// holds the committed count.
    fn entries(&self, c: &Column) -> Result<Arc<Vec<Vec<u8>>>> {
        let d = self.col_any(&dictionary_path(&c.leaf.path))?;
        let n = self.leaf_rows(d);
        let cached = d.entries.0.lock().ok().and_then(|g| g.clone());
        if let Some(e) = cached.filter(|e| e.len() as u64 == n) {
            return Ok(e);
        }
        let Engine::Var(var) = &d.engine else {
            return Err(Error::metadata(
                MetaPaths::new(&self.root).storage(),
                format!(
                    "the dictionary of column {} is not a varstr column",
                    c.leaf.path
                ),
            ));
        };
        if n > 0 {
            // Before a buffer is sized by it, the count read from disk names a file that
            // exists.
            if let Some(last) = d.missing_file_of_row(self.root.storage.as_ref(), n - 1) {
                return Err(Error::metadata(
                    MetaPaths::new(&self.root).sizes(),
                    format!(
                        "the dictionary of column {} has {n} entries, which need {}, which \
                         does not exist",
                        c.leaf.path,
                        last.display()
                    ),
                ));
            }
        }
        let items = Arc::new(self.unless_changed(var.read_rows(n, 0, n))?);
        if let Ok(mut g) = d.entries.0.lock() {
            *g = Some(Arc::clone(&items));
        }
        Ok(items)
    }

    /// The `int32` codes engine of dictionary-encoded column `c`.
    fn codes_core<'c>(&self, c: &'c Column) -> Result<&'c ArrayCore> {
        match &c.engine {
            Engine::Fixed(core) if c.leaf.is_dictionary() => Ok(core),
            _ => Err(Error::InvalidArgument(format!(
                "column {} is not dictionary-encoded",
                c.leaf.path
            ))),
        }
    }

    /// Whether column `name` is dictionary-encoded.
    ///
    /// # Errors
    /// An unknown column.
    pub fn is_dictionary(&self, name: &str) -> Result<bool> {
        Ok(self.col(name)?.leaf.is_dictionary())
    }

    /// The dictionary of dictionary-encoded column `name`: its distinct strings, in code
    /// order (the order in which they were first written).
    ///
    /// # Errors
    /// An unknown column or one that is not dictionary-encoded; reading the dictionary.
    pub fn dictionary(&self, name: &str) -> Result<Vec<String>> {
        let c = self.col(name)?;
        self.codes_core(c)?;
        self.entries(c)?
            .iter()
            .map(|e| {
                String::from_utf8(e.clone()).map_err(|_| {
                    Error::metadata(
                        MetaPaths::new(&self.root).storage(),
                        format!("the dictionary of column {name} holds bytes that are not UTF-8"),
                    )
                })
            })
            .collect()
    }

    /// The codes stored for rows `start..end` of dictionary-encoded column `name` (−1 where a
    /// row holds the column's fill value, at null rows too); only the codes' files are read.
    ///
    /// # Errors
    /// As [`Table::column_rows`]; a column that is not dictionary-encoded.
    pub fn column_codes_raw(&self, name: &str, start: u64, end: u64) -> Result<Vec<i32>> {
        self.check_range(start, end)?;
        let c = self.col(name)?;
        self.read_codes(c, start, end)
    }

    fn read_codes(&self, c: &Column, start: u64, end: u64) -> Result<Vec<i32>> {
        let core = self.codes_core(c)?;
        let mut data = vec![0u8; ((end - start) as usize) * 4];
        if end > start {
            let sel = [AxisSel {
                start,
                step: 1,
                count: end - start,
                reversed: false,
                keep: true,
            }];
            self.unless_changed(core.read_into(&sel, &[self.nrows()], &mut data))?;
        }
        Ok(data
            .chunks_exact(4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// Rows `start..end` of dictionary-encoded column `name` as codes into a dictionary
    /// (see [`DictionaryValues`]): what Arrow's dictionary arrays and pandas' categoricals
    /// are made of.
    ///
    /// # Errors
    /// As [`Table::column_codes_raw`]; a code outside the dictionary.
    pub fn column_codes(&self, name: &str, start: u64, end: u64) -> Result<DictionaryValues> {
        let mut codes = self.column_codes_raw(name, start, end)?;
        let c = self.col(name)?;
        let entries = self.entries(c)?;
        self.check_codes(c, &codes, entries.len())?;
        let valid = self.column_validity(name, start, end)?;
        let is_valid = |i: usize| valid.as_ref().is_none_or(|v| v.get(i) == Some(&true));
        let mut dictionary: Vec<String> = entries
            .iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect();
        let filled: Vec<usize> = (0..codes.len())
            .filter(|&i| codes[i] == FILL_CODE && is_valid(i))
            .collect();
        if !filled.is_empty() {
            let fill = self.fill_of(c);
            let k = match entries.iter().position(|e| e == fill) {
                Some(k) => k,
                None => {
                    dictionary.push(String::from_utf8_lossy(fill).into_owned());
                    entries.len()
                }
            };
            for i in filled {
                codes[i] = k as i32;
            }
        }
        for (i, x) in codes.iter_mut().enumerate() {
            if !is_valid(i) {
                *x = FILL_CODE;
            }
        }
        Ok(DictionaryValues { codes, dictionary })
    }

    /// Bounds of the strings of each chunk of dictionary-encoded column `name` (entry `k`
    /// covers the rows of chunk `k`): the least and the greatest of the entries whose codes
    /// lie within the chunk's code statistics (the fill value too when −1 does), decoding
    /// no chunk. `None` where the statistics are unknown or span more than 4,096 codes.
    /// What SQL's chunk pruning compares a string literal with: a chunk whose bounds
    /// exclude it holds no row equal to it.
    ///
    /// # Errors
    /// As [`Table::dictionary`].
    pub fn dictionary_chunk_bounds(&self, name: &str) -> Result<Vec<Option<(String, String)>>> {
        const MAX_SPAN: i64 = 4096;
        let c = self.col(name)?;
        let core = self.codes_core(c)?;
        let nchunks = c.nchunks(self.nrows());
        let stats = core
            .store
            .chunk_stats(nchunks, self.sizes.stats_current())?;
        let entries = self.entries(c)?;
        let fill = self.fill_of(c);
        Ok(stats
            .iter()
            .map(|s| {
                let s = s.as_ref()?;
                let (Some(StatValue::Int(lo)), Some(StatValue::Int(hi))) = (s.min, s.max) else {
                    return None;
                };
                if hi < lo || hi - lo >= MAX_SPAN || hi >= entries.len() as i64 {
                    return None;
                }
                let mut range = (lo.max(0)..=hi)
                    .filter_map(|k| entries.get(usize::try_from(k).ok()?))
                    .map(Vec::as_slice)
                    .chain((lo < 0).then_some(fill));
                let first = range.next()?;
                let (a, b) = range.fold((first, first), |(a, b), e| (a.min(e), b.max(e)));
                Some((
                    String::from_utf8(a.to_vec()).ok()?,
                    String::from_utf8(b.to_vec()).ok()?,
                ))
            })
            .collect())
    }

    /// Adds `entries` that its dictionary lacks to dictionary-encoded column `name`, in
    /// order, in one transaction (no rows change): a client that keeps categories in an
    /// order of its own (pandas' `Categorical`) gives them before the rows.
    ///
    /// # Errors
    /// An unknown column or one that is not dictionary-encoded; [`Error::DictionaryFull`]
    /// (nothing is added); [`Error::ReadOnly`]; I/O errors.
    pub fn extend_dictionary<S: AsRef<str>>(&mut self, name: &str, entries: &[S]) -> Result<()> {
        let _turn = self.turn()?;
        let mut enc = Encoder::new(self)?;
        let c = self.col(name)?;
        self.codes_core(c)?;
        enc.encode(&self.root, c, &Values::strings(entries), None)?;
        let nrows = self.nrows();
        self.run_to(None, false, |columns, txn, counts| {
            let mut deltas = BTreeMap::new();
            enc.write_entries(columns, txn, &mut deltas, counts)?;
            Ok((deltas, nrows))
        })
    }

    /// Gives the dictionary-encoded fields of a new table the entries their options name
    /// ([`ColumnOptions::dictionary_entries`]).
    pub(super) fn seed_dictionaries(&mut self, fields: &[Field], prefix: &str) -> Result<()> {
        for f in fields {
            let path = format!("{prefix}{}", f.name);
            match &f.kind {
                FieldKind::Struct(sub) => self.seed_dictionaries(sub, &format!("{path}/"))?,
                _ => {
                    if let Some(e) = f.options.dictionary_entries.as_ref() {
                        if !self.col(&path)?.leaf.is_dictionary() {
                            return Err(Error::InvalidArgument(format!(
                                "column {path}: dictionary entries given for a column that \
                                 is not dictionary-encoded"
                            )));
                        }
                        self.extend_dictionary(&path, e)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn fill_of<'c>(&self, c: &'c Column) -> &'c [u8] {
        match &c.leaf.dict {
            DictPart::Codes { fill, .. } => fill,
            _ => &[],
        }
    }

    /// Checks that every code is −1 or an entry of a dictionary of `n` entries.
    fn check_codes(&self, c: &Column, codes: &[i32], n: usize) -> Result<()> {
        match codes
            .iter()
            .find(|&&k| k < FILL_CODE || (k >= 0 && k as usize >= n))
        {
            Some(k) => self.unless_changed(Err(Error::metadata(
                MetaPaths::new(&self.root).sizes(),
                format!(
                    "column {}: code {k} is outside its dictionary of {n} entries",
                    c.leaf.path
                ),
            ))),
            None => Ok(()),
        }
    }

    /// The strings of `codes` of column `c`.
    fn decode(&self, c: &Column, codes: &[i32]) -> Result<Vec<Vec<u8>>> {
        let entries = self.entries(c)?;
        self.check_codes(c, codes, entries.len())?;
        let fill = self.fill_of(c);
        Ok(codes
            .iter()
            .map(|&k| match usize::try_from(k) {
                Ok(k) => entries[k].clone(),
                Err(_) => fill.to_vec(),
            })
            .collect())
    }

    /// Rows `start..end` of dictionary-encoded column `c`, as strings.
    pub(super) fn dict_rows(&self, c: &Column, start: u64, end: u64) -> Result<Values> {
        let codes = self.read_codes(c, start, end)?;
        Ok(Values::Var(self.decode(c, &codes)?))
    }

    /// The rows at `indices` of dictionary-encoded column `c`, as strings.
    pub(super) fn dict_take(&self, c: &Column, indices: &[u64]) -> Result<Values> {
        let core = self.codes_core(c)?;
        let bytes = core.take_rows(self.nrows(), indices)?;
        let codes: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Values::Var(self.decode(c, &codes)?))
    }

    /// Rows `start..end` of dictionary-encoded column `c` as (lengths, bytes) parts, as
    /// variable-length columns give them to Arrow.
    #[cfg(feature = "arrow")]
    pub(super) fn dict_rows_flat(
        &self,
        c: &Column,
        start: u64,
        end: u64,
    ) -> Result<Vec<(Vec<u32>, Vec<u8>)>> {
        let codes = self.read_codes(c, start, end)?;
        let entries = self.entries(c)?;
        self.check_codes(c, &codes, entries.len())?;
        let fill = self.fill_of(c);
        let mut lens = Vec::with_capacity(codes.len());
        let mut bytes = Vec::new();
        for &k in &codes {
            let e: &[u8] = match usize::try_from(k) {
                Ok(k) => &entries[k],
                Err(_) => fill,
            };
            lens.push(e.len() as u32);
            bytes.extend_from_slice(e);
        }
        Ok(vec![(lens, bytes)])
    }
}
