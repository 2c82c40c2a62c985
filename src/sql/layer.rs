//! A layer dataset as a DataFusion table: one row per row of its last column, with the value
//! of every column on the path down to it (and the row's weight), in key order.
//!
//! Integers are read as `int64` (`uint64` for unsigned columns), floats as `float64`,
//! `varstr` as UTF-8 and `varbytes` as binary. The scan declares the order of the leading
//! key columns it returns (up to the first float column, whose order SQL and the layer may
//! not share for NaN), so that `ORDER BY` on keys and merge joins need no sort. Filters on
//! the first column are pushed down: an equality asks the membership filter first (a "no"
//! reads no data chunk) and seeks the value index; a range (`<`, `<=`, `>`, `>=`,
//! `BETWEEN`) seeks its lower end and stops after its upper end. A pushed-down filter only
//! skips rows SQL's own evaluation (which runs after it) would drop: for floats that means
//! SQL's comparisons, under which -0.0 equals 0.0 (the layer orders -0.0 before 0.0).

use super::to_datafusion;
use crate::dtype::DType;
use crate::layer::{Cursor, Layer, LeafKind, Value};
use arrow_array::{
    ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch, RecordBatchOptions, StringArray,
    UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, SortOptions};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column as PhysColumn;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// Rows per record batch of a layer scan.
const BATCH_ROWS: usize = 8192;

/// One output column of a layer: a key column (by position) or the weight.
#[derive(Debug, Clone, Copy)]
enum Source {
    Key(usize),
    Weight,
}

/// How a layer value is typed in Arrow.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ArrowKind {
    Int,
    UInt,
    Float,
    Str,
    Bytes,
}

impl ArrowKind {
    fn of(kind: LeafKind) -> ArrowKind {
        match kind {
            LeafKind::VarStr => ArrowKind::Str,
            LeafKind::VarBytes => ArrowKind::Bytes,
            LeafKind::Fixed(d) if d.is_float() => ArrowKind::Float,
            LeafKind::Fixed(DType::U8 | DType::U16 | DType::U32 | DType::U64) => ArrowKind::UInt,
            LeafKind::Fixed(_) => ArrowKind::Int,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            ArrowKind::Int => DataType::Int64,
            ArrowKind::UInt => DataType::UInt64,
            ArrowKind::Float => DataType::Float64,
            ArrowKind::Str => DataType::Utf8,
            ArrowKind::Bytes => DataType::Binary,
        }
    }
}

/// A registered layer dataset.
#[derive(Debug)]
pub(super) struct LayerSource {
    layer: Arc<Layer>,
    schema: SchemaRef,
    columns: Vec<(Source, ArrowKind)>,
}

impl LayerSource {
    pub(super) fn new(layer: Layer) -> crate::Result<LayerSource> {
        let meta = layer.storage_meta().clone();
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for (i, c) in meta.columns.iter().enumerate() {
            let kind = layer.kind(i).ok_or_else(|| {
                crate::Error::metadata(layer.path(), format!("column {} has no kind", c.name))
            })?;
            let Some(leaf) = kind.leaf() else {
                return Err(crate::Error::InvalidArgument(format!(
                    "column {} holds tuples ({}): SQL reads layer datasets of leaf columns only",
                    c.name,
                    kind.name()
                )));
            };
            let ak = ArrowKind::of(leaf);
            fields.push(Field::new(&c.name, ak.data_type(), false));
            columns.push((Source::Key(i), ak));
        }
        if let Some(w) = &meta.weight {
            // Written before names were checked across keys and weight: the layer reads,
            // but a table cannot have two columns of one name.
            if meta.columns.iter().any(|c| c.name == w.name) {
                return Err(crate::Error::InvalidArgument(format!(
                    "{}: the weight and a key column are both named {:?}; SQL needs distinct \
                     column names (rebuild the layer with another weight name)",
                    layer.path().display(),
                    w.name
                )));
            }
            let ak = ArrowKind::of(LeafKind::Fixed(w.dtype));
            fields.push(Field::new(&w.name, ak.data_type(), false));
            columns.push((Source::Weight, ak));
        }
        Ok(LayerSource {
            layer: Arc::new(layer),
            schema: Arc::new(Schema::new(fields)),
            columns,
        })
    }

    fn key_name(&self) -> Option<&str> {
        self.schema.fields().first().map(|f| f.name().as_str())
    }
}

/// Where a scan of the first column starts and stops.
#[derive(Debug, Clone, Default)]
struct KeyRange {
    /// The least value (and whether it is included).
    lower: Option<(Value, bool)>,
    /// The greatest value (and whether it is included).
    upper: Option<(Value, bool)>,
}

/// A float bound as the layer's order sees it. SQL compares floats as the layer orders them
/// (IEEE total order: -NaN first, NaN last) but with -0.0 and 0.0 equal, where the layer
/// keeps -0.0 just before 0.0. A bound at either zero therefore covers both keys when it
/// includes zero (`>= 0`, `<= 0`, `= 0`) and neither when it excludes it (`> 0`, `< 0`).
fn zero_bound(v: Value, inclusive: bool, lower: bool) -> Value {
    match v {
        // A float pattern compares by `==`: this arm takes -0.0 as well.
        Value::Float(0.0) => Value::Float(if lower == inclusive { -0.0 } else { 0.0 }),
        v => v,
    }
}

impl KeyRange {
    fn narrow_lower(&mut self, v: Value, inclusive: bool) {
        let v = zero_bound(v, inclusive, true);
        let tighter = match &self.lower {
            None => true,
            Some((w, inc)) => v > *w || (v == *w && !inclusive && *inc),
        };
        if tighter {
            self.lower = Some((v, inclusive));
        }
    }

    fn narrow_upper(&mut self, v: Value, inclusive: bool) {
        let v = zero_bound(v, inclusive, false);
        let tighter = match &self.upper {
            None => true,
            Some((w, inc)) => v < *w || (v == *w && !inclusive && *inc),
        };
        if tighter {
            self.upper = Some((v, inclusive));
        }
    }

    fn above_upper(&self, v: &Value) -> bool {
        match &self.upper {
            None => false,
            Some((u, inclusive)) => v > u || (v == u && !inclusive),
        }
    }

    fn below_lower(&self, v: &Value) -> bool {
        match &self.lower {
            None => false,
            Some((l, inclusive)) => v < l || (v == l && !inclusive),
        }
    }
}

/// A literal as a value of the first column, when it is one exactly.
fn literal_value(kind: LeafKind, e: &Expr) -> Option<Value> {
    let Expr::Literal(s, _) = e else { return None };
    let v = match s {
        ScalarValue::Int8(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int16(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int32(Some(x)) => Value::Int(i64::from(*x)),
        ScalarValue::Int64(Some(x)) => Value::Int(*x),
        ScalarValue::UInt8(Some(x)) => Value::UInt(u64::from(*x)),
        ScalarValue::UInt16(Some(x)) => Value::UInt(u64::from(*x)),
        ScalarValue::UInt32(Some(x)) => Value::UInt(u64::from(*x)),
        ScalarValue::UInt64(Some(x)) => Value::UInt(*x),
        ScalarValue::Float32(Some(x)) => Value::Float(f64::from(*x)),
        ScalarValue::Float64(Some(x)) if !x.is_nan() => Value::Float(*x),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Value::Str(s.clone()),
        ScalarValue::Binary(Some(b)) | ScalarValue::LargeBinary(Some(b)) => Value::Bytes(b.clone()),
        _ => return None,
    };
    // A value the column cannot hold exactly (3.5 for an integer column) bounds nothing.
    let c = crate::layer::value::coerce_leaf(kind, &v).ok()?;
    let same = match (&v, &c) {
        (Value::Float(a), Value::Float(b)) => a == b,
        (Value::Int(a), Value::Float(b)) => (*a as f64) == *b && (*b as i64) == *a,
        (Value::UInt(a), Value::Float(b)) => (*a as f64) == *b && (*b as u64) == *a,
        (Value::Int(a), Value::UInt(b)) => u64::try_from(*a).ok() == Some(*b),
        (Value::UInt(a), Value::Int(b)) => i64::try_from(*a).ok() == Some(*b),
        (a, b) => a == b,
    };
    same.then_some(c)
}

/// Whether `e` names the first column `key`.
fn is_key(e: &Expr, key: &str) -> bool {
    matches!(e, Expr::Column(c) if c.name == key)
}

/// What `filter` says of the first column, narrowed into `range`; false when it says
/// nothing this scan can use.
fn narrow(range: &mut KeyRange, filter: &Expr, key: &str, kind: LeafKind) -> bool {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            if *op == Operator::And {
                let a = narrow(range, left, key, kind);
                let b = narrow(range, right, key, kind);
                return a || b;
            }
            let (op, lit) = if is_key(left, key) {
                (*op, right.as_ref())
            } else if is_key(right, key) {
                match op.swap() {
                    Some(o) => (o, left.as_ref()),
                    None => return false,
                }
            } else {
                return false;
            };
            let Some(v) = literal_value(kind, lit) else {
                return false;
            };
            match op {
                Operator::Eq => {
                    range.narrow_lower(v.clone(), true);
                    range.narrow_upper(v, true);
                }
                Operator::Gt => range.narrow_lower(v, false),
                Operator::GtEq => range.narrow_lower(v, true),
                Operator::Lt => range.narrow_upper(v, false),
                Operator::LtEq => range.narrow_upper(v, true),
                _ => return false,
            }
            true
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_key(expr, key) => {
            let (Some(lo), Some(hi)) = (literal_value(kind, low), literal_value(kind, high)) else {
                return false;
            };
            range.narrow_lower(lo, true);
            range.narrow_upper(hi, true);
            true
        }
        _ => false,
    }
}

#[async_trait]
impl datafusion::catalog::TableProvider for LayerSource {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.columns.len()).collect();
        let projection = projection.cloned().unwrap_or(all);
        let schema = Arc::new(self.schema.project(&projection)?);
        let mut range = KeyRange::default();
        if let (Some(key), Some(kind)) =
            (self.key_name(), self.layer.kind(0).and_then(|k| k.leaf()))
        {
            for f in filters {
                narrow(&mut range, f, key, kind);
            }
        }
        // The leading key columns in the output, up to the first float one, in order.
        let mut ordering = Vec::new();
        for (i, (src, kind)) in self.columns.iter().enumerate() {
            let Source::Key(k) = src else { break };
            if *k != i || *kind == ArrowKind::Float {
                break;
            }
            let Some(pos) = projection.iter().position(|&p| p == i) else {
                break;
            };
            ordering.push(PhysicalSortExpr::new(
                Arc::new(PhysColumn::new(schema.field(pos).name(), pos)),
                SortOptions::new(false, false),
            ));
        }
        let orderings: Vec<LexOrdering> = LexOrdering::new(ordering).into_iter().collect();
        let stream = LayerStream {
            layer: Arc::clone(&self.layer),
            schema: Arc::clone(&schema),
            columns: projection
                .iter()
                .filter_map(|&i| self.columns.get(i).copied())
                .collect(),
            range,
        };
        Ok(Arc::new(StreamingTableExec::try_new(
            schema,
            vec![Arc::new(stream)],
            None,
            orderings,
            false,
            limit,
        )?))
    }
}

/// The one partition of a layer scan.
#[derive(Debug)]
struct LayerStream {
    layer: Arc<Layer>,
    schema: SchemaRef,
    columns: Vec<(Source, ArrowKind)>,
    range: KeyRange,
}

impl PartitionStream for LayerStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let walk = Walk {
            layer: Arc::clone(&self.layer),
            schema: Arc::clone(&self.schema),
            columns: self.columns.clone(),
            range: self.range.clone(),
        };
        // A short queue: the walk stays at most two batches ahead of the engine.
        super::blocking_stream(Arc::clone(&self.schema), 2, move |tx| {
            if let Err(e) = walk.run(&tx) {
                let _ = tx.blocking_send(Err(to_datafusion(e)));
            }
        })
    }
}

/// A walk of a layer in key order, batch by batch.
struct Walk {
    layer: Arc<Layer>,
    schema: SchemaRef,
    columns: Vec<(Source, ArrowKind)>,
    range: KeyRange,
}

/// Rows gathered for the next batch: one vector of values per output column.
struct Pending {
    values: Vec<Vec<Value>>,
    rows: usize,
}

impl Walk {
    fn run(&self, tx: &super::BatchSender) -> crate::Result<()> {
        let layer = self.layer.as_ref();
        let ncols = layer.ncolumns();
        let mut c0 = layer.cursor();
        if let Some((lo, inclusive)) = &self.range.lower {
            if let (Some(hi), true) = (&self.range.upper, *inclusive) {
                // An equality: the membership filter answers "no" without a data chunk.
                if hi.0 == *lo && !layer.may_contain(lo)? {
                    return Ok(());
                }
            }
            if !c0.seek_ge(lo)? {
                return Ok(());
            }
        } else if !c0.first() {
            return Ok(());
        }
        let mut pending = Pending {
            values: vec![Vec::new(); self.columns.len()],
            rows: 0,
        };
        let mut prefix: Vec<Value> = Vec::with_capacity(ncols);
        loop {
            if !c0.is_valid() {
                break;
            }
            let Some(v0) = c0.value()? else { break };
            if self.range.above_upper(&v0) {
                break;
            }
            if !self.range.below_lower(&v0) {
                prefix.clear();
                prefix.push(v0);
                if !self.descend(&mut c0, &mut prefix, &mut pending, tx)? {
                    return Ok(());
                }
            }
            if !c0.next() {
                break;
            }
        }
        if pending.rows > 0 {
            self.flush(&mut pending, tx)?;
        }
        Ok(())
    }

    /// Emits the rows under the row `cursor` is on (whose value, and its ancestors', are in
    /// `prefix`); false when the consumer is gone.
    fn descend(
        &self,
        cursor: &mut Cursor<'_>,
        prefix: &mut Vec<Value>,
        pending: &mut Pending,
        tx: &super::BatchSender,
    ) -> crate::Result<bool> {
        let Some(mut child) = cursor.child()? else {
            // The last column: one output row.
            let mut weight = None;
            for (out, (src, _)) in pending.values.iter_mut().zip(&self.columns) {
                let v = match src {
                    Source::Key(k) => prefix.get(*k).cloned(),
                    Source::Weight => {
                        if weight.is_none() {
                            weight = cursor.weight()?;
                        }
                        weight.clone()
                    }
                };
                out.push(v.ok_or_else(|| {
                    crate::Error::metadata(self.layer.path(), "a row without a value")
                })?);
            }
            pending.rows += 1;
            if pending.rows >= BATCH_ROWS {
                return self.flush(pending, tx);
            }
            return Ok(true);
        };
        if !child.first() {
            return Ok(true);
        }
        while let Some(v) = child.value()? {
            prefix.push(v);
            let go_on = self.descend(&mut child, prefix, pending, tx)?;
            prefix.pop();
            if !go_on {
                return Ok(false);
            }
            if !child.next() {
                break;
            }
        }
        Ok(true)
    }

    /// Sends the pending rows as a batch; false when the consumer is gone.
    fn flush(&self, pending: &mut Pending, tx: &super::BatchSender) -> crate::Result<bool> {
        let rows = pending.rows;
        let arrays: Vec<ArrayRef> = pending
            .values
            .iter_mut()
            .zip(&self.columns)
            .map(|(vals, (_, kind))| to_array(*kind, std::mem::take(vals)))
            .collect();
        pending.rows = 0;
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| DataFusionError::ArrowError(Box::new(e), None));
        Ok(tx.blocking_send(batch).is_ok())
    }
}

/// Layer values of one column as an Arrow array of its type.
fn to_array(kind: ArrowKind, vals: Vec<Value>) -> ArrayRef {
    match kind {
        ArrowKind::Int => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Value::Int(x) => Some(x),
                    Value::UInt(x) => i64::try_from(x).ok(),
                    _ => None,
                })
                .collect::<Int64Array>(),
        ),
        ArrowKind::UInt => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Value::UInt(x) => Some(x),
                    Value::Int(x) => u64::try_from(x).ok(),
                    _ => None,
                })
                .collect::<UInt64Array>(),
        ),
        ArrowKind::Float => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Value::Float(x) => Some(x),
                    _ => None,
                })
                .collect::<Float64Array>(),
        ),
        ArrowKind::Str => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Value::Str(s) => Some(s),
                    Value::Bytes(b) => String::from_utf8(b).ok(),
                    _ => None,
                })
                .collect::<StringArray>(),
        ),
        ArrowKind::Bytes => Arc::new(
            vals.into_iter()
                .map(|v| match v {
                    Value::Bytes(b) => Some(b),
                    Value::Str(s) => Some(s.into_bytes()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .iter()
                .map(|b| b.as_deref())
                .collect::<BinaryArray>(),
        ),
    }
}
