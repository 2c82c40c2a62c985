//! A blz table as a DataFusion table: projection, chunk pruning from the statistics kept
//! with the data, limits, and a parallel scan.
//!
//! The scan cuts the table's rows into ranges of one chunk of the columns it reads (the
//! largest `chunklen` among them), drops the ranges whose statistics prove that the query's
//! filters hold for none of their rows (DataFusion's `PruningPredicate`, fed with each
//! range's minimum and maximum), and reads the rest in row order, split into one run of
//! consecutive ranges per partition. Most filters stay in the plan (pushdown is "inexact"):
//! the statistics only say which ranges to skip. A filter on one dictionary-encoded column
//! is decided by the scan on the column's codes ([`super::codes`]) and leaves the plan.

use super::codes::{code_column, range_mask, CodeFilter};
use super::to_datafusion;
use crate::arrow::Export;
use crate::dtype::DType;
use crate::stats::{ChunkStats, StatValue};
use crate::table::{LeafKind, Table};
use arrow_array::{
    ArrayRef, BooleanArray, Float16Array, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, Int8Array, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::stats::{Precision, Statistics};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Column, DFSchema};
use datafusion::datasource::TableType;
use datafusion::error::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, StatisticsArgs,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Rows per range when the scan reads no column at all (`SELECT count(*)`).
const ROWS_WITHOUT_COLUMNS: u64 = 1 << 20;

/// A registered table: its handle and its fields as Arrow's.
#[derive(Debug)]
pub(super) struct TableSource {
    table: Arc<Table>,
    export: Export,
}

impl TableSource {
    pub(super) fn new(table: Table) -> crate::Result<TableSource> {
        let export = Export::of(&table).decoded();
        Ok(TableSource {
            table: Arc::new(table),
            export,
        })
    }

    /// The table as of its last commit: each scan reads through a read-only handle of its
    /// own, so that a query sees one commit whole, and a later query sees later commits.
    fn current(&self) -> crate::Result<Arc<Table>> {
        let t = &self.table;
        Ok(Arc::new(Table::open_in(
            Arc::clone(t.storage()),
            t.path(),
            crate::Mode::ReadOnly,
        )?))
    }
}

#[async_trait]
impl datafusion::catalog::TableProvider for TableSource {
    fn schema(&self) -> SchemaRef {
        self.export.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match code_column(&self.table, f) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Inexact,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let rows = usize::try_from(self.table.nrows()).ok()?;
        let mut s = Statistics::new_unknown(&self.export.schema());
        s.num_rows = Precision::Exact(rows);
        Some(s)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let table = self.current().map_err(to_datafusion)?;
        let full = Export::of(&table).decoded();
        let export = match projection {
            Some(p) => full.project(p).map_err(to_datafusion)?,
            None => full.clone(),
        };
        let schema = export.schema();

        // The columns whose chunks set the ranges: those read, and those filtered on.
        let filtered: Vec<String> = filters
            .iter()
            .flat_map(|f| f.column_refs())
            .map(|c| c.name.clone())
            .collect();
        let mut paths: Vec<String> = export.leaf_paths().iter().map(|p| p.to_string()).collect();
        paths.extend(filtered.iter().cloned());
        let step = table
            .leaves()
            .iter()
            .filter(|l| paths.contains(&l.path))
            .map(|l| l.storage.chunklen)
            .max()
            .unwrap_or(ROWS_WITHOUT_COLUMNS)
            .max(1);
        // The filters decided on dictionary codes (those `supports_filters_pushdown` called
        // exact, which DataFusion does not apply again).
        let code_filters = filters
            .iter()
            .filter_map(|f| {
                code_column(&self.table, f).map(|c| CodeFilter::new(state, &table, &c, f))
            })
            .collect::<DfResult<Vec<_>>>()?;
        let nrows = table.nrows();
        let mut ranges: Vec<(u64, u64)> = (0..nrows.div_ceil(step))
            .map(|k| (k * step, nrows.min((k + 1) * step)))
            .collect();

        if let Some(expr) = conjunction(filters.iter().cloned()) {
            let full_schema = full.schema();
            let df_schema = DFSchema::try_from(full_schema.as_ref().clone())?;
            let physical = state.create_physical_expr(expr, &df_schema)?;
            // No predicate (one that cannot prune, or that DataFusion cannot turn into one on
            // statistics): every range is read.
            if let Some(predicate) = PruningPredicateBuilder::new()
                .with_file_schema(Arc::clone(&full_schema))
                .build(physical)
            {
                let stats = RangeStats::new(&table, &ranges, filtered).map_err(to_datafusion)?;
                let keep = predicate.prune(&stats)?;
                ranges = ranges
                    .into_iter()
                    .zip(keep)
                    .filter_map(|(r, k)| k.then_some(r))
                    .collect();
            }
        }

        let parts = state
            .config()
            .target_partitions()
            .max(1)
            .min(ranges.len().max(1));
        let per = ranges.len().div_ceil(parts).max(1);
        let partitions: Vec<Arc<dyn PartitionStream>> = if ranges.is_empty() {
            vec![Arc::new(RangeStream {
                table: Arc::clone(&table),
                export: export.clone(),
                ranges: Vec::new(),
                filters: Vec::new(),
            })]
        } else {
            ranges
                .chunks(per)
                .map(|run| {
                    Arc::new(RangeStream {
                        table: Arc::clone(&table),
                        export: export.clone(),
                        ranges: run.to_vec(),
                        filters: code_filters.iter().map(CodeFilter::fork).collect(),
                    }) as Arc<dyn PartitionStream>
                })
                .collect()
        };
        let rows: Vec<usize> = if ranges.is_empty() {
            vec![0]
        } else {
            ranges
                .chunks(per)
                .map(|run| run.iter().map(|&(s, e)| (e - s) as usize).sum())
                .collect()
        };
        let inner: Arc<dyn ExecutionPlan> = Arc::new(StreamingTableExec::try_new(
            schema,
            partitions,
            None,
            Vec::new(),
            false,
            limit,
        )?);
        Ok(Arc::new(ScanExec { inner, rows }))
    }
}

/// The scan's plan: DataFusion's streaming table over the row ranges, which also tells the
/// planner how many rows those ranges hold (at most: the filters are applied after), so that
/// a join builds its hash table on the smaller side, as it does over parquet files.
#[derive(Debug)]
struct ScanExec {
    inner: Arc<dyn ExecutionPlan>,
    /// Rows of each partition's ranges.
    rows: Vec<usize>,
}

impl DisplayAs for ScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.inner.fmt_as(t, f)?;
        if matches!(t, DisplayFormatType::Default | DisplayFormatType::Verbose) {
            write!(f, ", rows={}", self.rows.iter().sum::<usize>())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ScanExec {
    fn name(&self) -> &str {
        "BlzScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(datafusion::error::DataFusionError::Internal(
                "a blz scan has no children".into(),
            ))
        }
    }

    fn execute(
        &self,
        partition: usize,
        ctx: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        self.inner.execute(partition, ctx)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let mut rows = match args.partition() {
            Some(p) => self.rows.get(p).copied().unwrap_or(0),
            None => self.rows.iter().sum(),
        };
        if let Some(fetch) = self.inner.fetch() {
            rows = rows.min(fetch);
        }
        let mut s = Statistics::new_unknown(&self.inner.schema());
        s.num_rows = Precision::Inexact(rows);
        Ok(Arc::new(s))
    }

    fn fetch(&self) -> Option<usize> {
        self.inner.fetch()
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let inner = self.inner.with_fetch(limit)?;
        Some(Arc::new(ScanExec {
            inner,
            rows: self.rows.clone(),
        }))
    }
}

/// One partition of a scan: consecutive row ranges of a table, read in order.
#[derive(Debug)]
pub(super) struct RangeStream {
    pub(super) table: Arc<Table>,
    pub(super) export: Export,
    pub(super) ranges: Vec<(u64, u64)>,
    /// Filters decided on dictionary codes: rows where one fails are not passed on.
    pub(super) filters: Vec<CodeFilter>,
}

impl PartitionStream for RangeStream {
    fn schema(&self) -> &SchemaRef {
        // `Export::schema` clones an Arc; the partition's schema must be borrowed.
        self.export.schema_ref()
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = self.export.schema();
        // The engine's operators work best on batches of its own size (8192 rows by default,
        // small enough for the cache); a range is a chunk (often 128 Ki rows or more). Each
        // range is read whole and handed over as zero-copy slices of that size.
        let batch_rows = ctx.session_config().batch_size().max(1);
        let per_range = usize::try_from(
            self.ranges
                .iter()
                .map(|&(s, e)| e - s)
                .max()
                .unwrap_or(0)
                .div_ceil(batch_rows as u64),
        )
        .unwrap_or(usize::MAX);
        let table = Arc::clone(&self.table);
        let export = self.export.clone();
        let ranges = self.ranges.clone();
        let mut filters: Vec<CodeFilter> = self.filters.iter().map(CodeFilter::fork).collect();
        // Room for one range's slices: the reader decodes the next range while the engine
        // works on this one (two ranges in memory per partition at most).
        super::blocking_stream(schema, per_range.clamp(1, 1024), move |tx| {
            for (start, end) in ranges {
                let batch = match read_matching(&table, &export, &mut filters, start, end) {
                    Ok(Some(b)) => b,
                    Ok(None) => continue,
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                };
                let rows = batch.num_rows();
                let mut offset = 0;
                while offset < rows {
                    let len = batch_rows.min(rows - offset);
                    if tx.blocking_send(Ok(batch.slice(offset, len))).is_err() {
                        return;
                    }
                    offset += len;
                }
            }
        })
    }
}

/// The rows of `start..end` where every code filter holds, read (`None`: no row holds them;
/// no column is read then but the filters' codes).
fn read_matching(
    table: &Table,
    export: &Export,
    filters: &mut [CodeFilter],
    start: u64,
    end: u64,
) -> DfResult<Option<arrow_array::RecordBatch>> {
    let mask = range_mask(filters, table, start, end)?;
    if mask.as_ref().is_some_and(|m| !m.contains(&true)) {
        return Ok(None);
    }
    let batch = export
        .read(table, start, end)
        .map_err(|e| datafusion::error::DataFusionError::ArrowError(Box::new(e), None))?;
    Ok(Some(match mask {
        Some(m) => datafusion::arrow::compute::filter_record_batch(&batch, &BooleanArray::from(m))?,
        None => batch,
    }))
}

/// One column's statistics: its element type, its chunk length, and each chunk's.
struct ColumnStats {
    dtype: DType,
    /// A zoned `datetime64` column's zone: its bounds are timestamps in it.
    timezone: Option<String>,
    chunklen: u64,
    chunks: Vec<Option<ChunkStats>>,
    /// A dictionary-encoded column's string bounds per chunk, from its codes' statistics
    /// (`Table::dictionary_chunk_bounds`); empty for other columns.
    strings: Vec<Option<(String, String)>>,
    /// Each chunk's null count (`None`: unknown).
    nulls: Vec<Option<u64>>,
}

/// The statistics of a scan's row ranges (DataFusion's "containers"), from the chunks each
/// range overlaps.
struct RangeStats<'a> {
    ranges: &'a [(u64, u64)],
    columns: HashMap<String, ColumnStats>,
    nrows: u64,
}

impl<'a> RangeStats<'a> {
    fn new(
        table: &Table,
        ranges: &'a [(u64, u64)],
        wanted: Vec<String>,
    ) -> crate::Result<RangeStats<'a>> {
        let mut columns = HashMap::new();
        for name in wanted {
            let Some(leaf) = table.leaves().into_iter().find(|l| l.path == name) else {
                continue;
            };
            let dtype = match leaf.kind {
                LeafKind::Fixed(dtype) => dtype,
                // No bounds, but null counts.
                _ => DType::Bytes(0),
            };
            let chunks = match leaf.kind {
                LeafKind::Fixed(_) => table.column_stats(&name)?,
                _ => Vec::new(),
            };
            let strings = if leaf.is_dictionary() {
                table.dictionary_chunk_bounds(&name)?
            } else {
                Vec::new()
            };
            let nulls = table.column_null_counts(&name)?;
            columns.insert(
                name,
                ColumnStats {
                    dtype,
                    timezone: leaf.timezone.clone(),
                    chunklen: leaf.storage.chunklen.max(1),
                    chunks,
                    strings,
                    nulls,
                },
            );
        }
        Ok(RangeStats {
            ranges,
            columns,
            nrows: table.nrows(),
        })
    }

    /// The least (or greatest) value of `column` in each range, `None` where unknown.
    fn bounds(&self, column: &Column, min: bool) -> Option<ArrayRef> {
        let c = self.columns.get(&column.name)?;
        if !c.strings.is_empty() {
            return Some(self.string_bounds(c, min));
        }
        if c.chunks.is_empty() {
            return None;
        }
        let values: Vec<Option<StatValue>> = self
            .ranges
            .iter()
            .map(|&(start, end)| {
                if end <= start {
                    return None;
                }
                let first = start / c.chunklen;
                let last = (end - 1) / c.chunklen;
                let mut acc: Option<StatValue> = None;
                for k in first..=last {
                    let s = c.chunks.get(usize::try_from(k).ok()?)?.as_ref()?;
                    // A time column's `nan_count` counts NaTs: nulls in SQL, outside the
                    // bounds and never matched by a comparison.
                    if s.nan_count > 0 && !c.dtype.is_time() {
                        // Arrow orders NaN after every number (and -NaN before): a bound that
                        // leaves NaN out could skip rows a comparison keeps.
                        return None;
                    }
                    let v = if min { s.min? } else { s.max? };
                    acc = Some(match acc {
                        None => v,
                        Some(a) => pick(a, v, min)?,
                    });
                }
                acc
            })
            .collect();
        crate::arrow::zoned(stat_array(c.dtype, &values), c.timezone.as_deref()).ok()
    }
}

impl RangeStats<'_> {
    /// A dictionary-encoded column's least (or greatest) string in each range, null where
    /// unknown.
    fn string_bounds(&self, c: &ColumnStats, min: bool) -> ArrayRef {
        let values: Vec<Option<&str>> = self
            .ranges
            .iter()
            .map(|&(start, end)| {
                if end <= start {
                    return None;
                }
                let mut acc: Option<&str> = None;
                for k in start / c.chunklen..=(end - 1) / c.chunklen {
                    let (lo, hi) = c.strings.get(usize::try_from(k).ok()?)?.as_ref()?;
                    let v = if min { lo.as_str() } else { hi.as_str() };
                    acc = Some(match acc {
                        Some(a) if (a <= v) == min => a,
                        _ => v,
                    });
                }
                acc
            })
            .collect();
        // The scan gives the column as large UTF-8 (`Export::decoded`).
        Arc::new(arrow_array::LargeStringArray::from(values))
    }
}

/// The number of nulls of column `c` in rows `start..end` (of `nrows`), from its chunks'
/// null counts: a chunk the range covers only in part counts only when it has none, since
/// a count larger than the range's could make `IS NOT NULL` skip rows it keeps.
fn range_nulls(c: &ColumnStats, start: u64, end: u64, nrows: u64) -> Option<u64> {
    if end <= start {
        return Some(0);
    }
    let mut total = 0u64;
    for k in start / c.chunklen..=(end - 1) / c.chunklen {
        let n = (*c.nulls.get(usize::try_from(k).ok()?)?)?;
        let (a, b) = (k * c.chunklen, ((k + 1) * c.chunklen).min(nrows));
        if n > 0 && (a < start || b > end) {
            return None;
        }
        total += n;
    }
    Some(total)
}

/// The lesser (`min`) or greater of two statistics of one column.
fn pick(a: StatValue, b: StatValue, min: bool) -> Option<StatValue> {
    let a_first = match (a, b) {
        (StatValue::Int(x), StatValue::Int(y)) => (x <= y) == min,
        (StatValue::UInt(x), StatValue::UInt(y)) => (x <= y) == min,
        (StatValue::Float(x), StatValue::Float(y)) => (x <= y) == min,
        (StatValue::Bool(x), StatValue::Bool(y)) => (x <= y) == min,
        _ => return None,
    };
    Some(if a_first { a } else { b })
}

/// Statistics as an Arrow array of the column's own type (null where unknown).
fn stat_array(dtype: DType, v: &[Option<StatValue>]) -> ArrayRef {
    let int = |s: &Option<StatValue>| match s {
        Some(StatValue::Int(x)) => Some(*x),
        _ => None,
    };
    let uint = |s: &Option<StatValue>| match s {
        Some(StatValue::UInt(x)) => Some(*x),
        _ => None,
    };
    let float = |s: &Option<StatValue>| match s {
        Some(StatValue::Float(x)) => Some(*x),
        _ => None,
    };
    match dtype {
        DType::Bool => Arc::new(
            v.iter()
                .map(|s| match s {
                    Some(StatValue::Bool(b)) => Some(*b),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        DType::I8 => Arc::new(
            v.iter()
                .map(|s| int(s).and_then(|x| i8::try_from(x).ok()))
                .collect::<Int8Array>(),
        ),
        DType::I16 => Arc::new(
            v.iter()
                .map(|s| int(s).and_then(|x| i16::try_from(x).ok()))
                .collect::<Int16Array>(),
        ),
        DType::I32 => Arc::new(
            v.iter()
                .map(|s| int(s).and_then(|x| i32::try_from(x).ok()))
                .collect::<Int32Array>(),
        ),
        DType::I64 => Arc::new(v.iter().map(int).collect::<Int64Array>()),
        DType::U8 => Arc::new(
            v.iter()
                .map(|s| uint(s).and_then(|x| u8::try_from(x).ok()))
                .collect::<UInt8Array>(),
        ),
        DType::U16 => Arc::new(
            v.iter()
                .map(|s| uint(s).and_then(|x| u16::try_from(x).ok()))
                .collect::<UInt16Array>(),
        ),
        DType::U32 => Arc::new(
            v.iter()
                .map(|s| uint(s).and_then(|x| u32::try_from(x).ok()))
                .collect::<UInt32Array>(),
        ),
        DType::U64 => Arc::new(v.iter().map(uint).collect::<UInt64Array>()),
        // A float32 statistic is the float32 value widened: narrowing it back is exact.
        #[allow(clippy::cast_possible_truncation)]
        DType::F32 => Arc::new(
            v.iter()
                .map(|s| float(s).map(|x| x as f32))
                .collect::<Float32Array>(),
        ),
        DType::F64 => Arc::new(v.iter().map(float).collect::<Float64Array>()),
        DType::F16 => Arc::new(
            v.iter()
                .map(|s| float(s).map(half::f16::from_f64))
                .collect::<Float16Array>(),
        ),
        DType::DateTime(_) | DType::TimeDelta(_) => {
            let a: Vec<Option<i64>> = v
                .iter()
                .map(|s| int(s).and_then(|x| crate::arrow::time_to_arrow(dtype, x)))
                .collect();
            crate::arrow::time_stat_array(dtype, a)
        }
        // Types without an order DataFusion prunes by: all unknown.
        _ => Arc::new(v.iter().map(|_| None::<i64>).collect::<Int64Array>()),
    }
}

impl PruningStatistics for RangeStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }

    fn num_containers(&self) -> usize {
        self.ranges.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let c = self.columns.get(&column.name)?;
        // NaT in a time column reads as null too, and the statistics do not count it apart.
        if c.dtype.is_time() {
            return None;
        }
        Some(Arc::new(
            self.ranges
                .iter()
                .map(|&(s, e)| range_nulls(c, s, e, self.nrows))
                .collect::<UInt64Array>(),
        ))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(
            self.ranges
                .iter()
                .map(|&(s, e)| e - s)
                .collect::<UInt64Array>(),
        ))
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<datafusion::scalar::ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}
