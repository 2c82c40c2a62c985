//! Filters on one dictionary-encoded column, decided on its codes.
//!
//! A filter that reads one dictionary-encoded column and nothing else (`city = 'Oslo'`,
//! `city IN (...)`, `city LIKE 'Os%'`, `upper(city) <> 'X'`, `city IS NULL`) has one answer
//! per distinct string. The scan evaluates it once on the column's dictionary, with
//! DataFusion's own expression (so its semantics are DataFusion's, nulls included), and then
//! decides each row by its code: no string of the column is decoded or compared per row. A
//! range of rows where no code matches is skipped without reading any other column (late
//! materialisation at the granularity of a range); a range where some match is read and cut
//! to the matching rows before DataFusion sees it. Such filters are pushed down "exact":
//! DataFusion does not apply them again.

use crate::table::Table;
use arrow_array::{Array, ArrayRef, BooleanArray, LargeStringArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{Expr, Volatility};
use datafusion::physical_expr::PhysicalExpr;
use std::sync::Arc;

/// The dictionary-encoded column that `filter` alone reads, if it reads one and nothing
/// else and always gives the same answer for the same value.
pub(super) fn code_column(table: &Table, filter: &Expr) -> Option<String> {
    let cols = filter.column_refs();
    let [col] = cols.into_iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    if filter.is_volatile() || !stable(filter) {
        return None;
    }
    table
        .is_dictionary(&col.name)
        .ok()
        .filter(|&d| d)
        .map(|_| col.name.clone())
}

/// Whether `e` is made only of what a value decides alone: columns, literals, operators,
/// `LIKE`, `IN` lists, `CASE`, casts and immutable functions (not `now()`, whose answer
/// changes from one query to the next, nor subqueries or placeholders).
fn stable(e: &Expr) -> bool {
    let mut ok = true;
    let _ = e.apply(|node| {
        ok &= match node {
            Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Immutable,
            Expr::Column(_)
            | Expr::Literal(..)
            | Expr::Alias(_)
            | Expr::BinaryExpr(_)
            | Expr::Not(_)
            | Expr::Negative(_)
            | Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::IsUnknown(_)
            | Expr::IsNotTrue(_)
            | Expr::IsNotFalse(_)
            | Expr::IsNotUnknown(_)
            | Expr::Like(_)
            | Expr::SimilarTo(_)
            | Expr::Between(_)
            | Expr::InList(_)
            | Expr::Case(_)
            | Expr::Cast(_)
            | Expr::TryCast(_) => true,
            _ => false,
        };
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    ok
}

/// A filter decided per code of one dictionary-encoded column.
#[derive(Debug)]
pub(super) struct CodeFilter {
    column: String,
    /// The filter over a batch of one large UTF-8 column named `column`.
    expr: Arc<dyn PhysicalExpr>,
    schema: Arc<Schema>,
    /// Whether the filter holds for each dictionary entry, by code.
    matches: Vec<bool>,
    /// Whether it holds for a null.
    null: bool,
}

impl CodeFilter {
    /// The filter `filter` on dictionary-encoded column `column` of `table`, evaluated on
    /// the column's dictionary and on a null.
    pub(super) fn new(
        state: &dyn Session,
        table: &Table,
        column: &str,
        filter: &Expr,
    ) -> DfResult<CodeFilter> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            column,
            DataType::LargeUtf8,
            true,
        )]));
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let expr = state.create_physical_expr(filter.clone(), &df_schema)?;
        let mut f = CodeFilter {
            column: column.to_string(),
            expr,
            schema,
            matches: Vec::new(),
            null: false,
        };
        f.null = f.eval(&[None])?[0];
        let entries = table.dictionary(column).map_err(super::to_datafusion)?;
        f.matches = f.eval(&entries.iter().map(|s| Some(s.as_str())).collect::<Vec<_>>())?;
        Ok(f)
    }

    /// The filter over `values`: true where it holds (false where it is false or null).
    fn eval(&self, values: &[Option<&str>]) -> DfResult<Vec<bool>> {
        let col: ArrayRef = Arc::new(LargeStringArray::from(values.to_vec()));
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), vec![col])?;
        let out = self.expr.evaluate(&batch)?.into_array(values.len())?;
        let b = out
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| DataFusionError::Internal("a filter that is not boolean".into()))?;
        Ok((0..b.len()).map(|i| b.is_valid(i) && b.value(i)).collect())
    }

    /// Whether the filter holds at each of rows `start..end`, from the rows' codes (and, for
    /// dictionary entries the scan has not met before, the filter on them).
    pub(super) fn mask(&mut self, table: &Table, start: u64, end: u64) -> DfResult<Vec<bool>> {
        let dv = table
            .column_codes(&self.column, start, end)
            .map_err(super::to_datafusion)?;
        if dv.dictionary.len() > self.matches.len() {
            // The column's fill value, when no entry holds it (or entries added since).
            let more: Vec<Option<&str>> = dv.dictionary[self.matches.len()..]
                .iter()
                .map(|s| Some(s.as_str()))
                .collect();
            let m = self.eval(&more)?;
            self.matches.extend(m);
        }
        Ok(dv
            .codes
            .iter()
            .map(|&c| match usize::try_from(c) {
                Ok(k) => self.matches.get(k).copied().unwrap_or(false),
                Err(_) => self.null,
            })
            .collect())
    }

    /// A copy to evaluate another partition's ranges with (its own entries met later).
    pub(super) fn fork(&self) -> CodeFilter {
        CodeFilter {
            column: self.column.clone(),
            expr: Arc::clone(&self.expr),
            schema: Arc::clone(&self.schema),
            matches: self.matches.clone(),
            null: self.null,
        }
    }
}

/// Rows `start..end` where every filter holds (`None`: every row, or no filter).
pub(super) fn range_mask(
    filters: &mut [CodeFilter],
    table: &Table,
    start: u64,
    end: u64,
) -> DfResult<Option<Vec<bool>>> {
    let mut mask: Option<Vec<bool>> = None;
    for f in filters.iter_mut() {
        let m = f.mask(table, start, end)?;
        mask = Some(match mask {
            None => m,
            Some(mut acc) => {
                acc.iter_mut().zip(&m).for_each(|(a, &b)| *a &= b);
                acc
            }
        });
        if mask.as_ref().is_some_and(|m| !m.contains(&true)) {
            break;
        }
    }
    Ok(mask.filter(|m| m.contains(&false)))
}
