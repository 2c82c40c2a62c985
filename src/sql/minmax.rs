//! `min` and `max` whose answer over floats does not depend on the order of the rows.
//!
//! DataFusion 55's grouped `min`/`max` over Float16/32/64 compare with `partial_cmp` and
//! overwrite the running value whenever a comparison with NaN is unordered, so a group's
//! answer depends on the order its rows arrive in (apache/datafusion#24432: a grouped
//! `max` gave 112 where the answer was 747). Its ungrouped accumulators order by
//! `total_cmp`, under which a NaN with its sign bit set (what `inf - inf` gives on x86)
//! sorts below every number. blz keeps missing floats as NaN, so NaN is common.
//!
//! These replacements keep the engine's own `min`/`max` for every other type and, for
//! floats, order as duckdb does: every NaN (whatever its sign or payload) is greater than
//! every number, NaNs are equal to one another, and numbers keep IEEE's total order
//! (`-0.0` before `+0.0`). So `max` is NaN when a group holds a NaN, and `min` is NaN only
//! when every value of the group is NaN. Nulls are skipped, and a group with no value gives
//! null, as before.

use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BooleanArray, PrimitiveArray};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{DataType, FieldRef};
use datafusion::common::{internal_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::sync::Arc;

/// The replacements of the engine's `min` and `max`, to register in a session.
pub(super) fn udafs() -> [AggregateUDF; 2] {
    [
        AggregateUDF::new_from_impl(NanOrderedMinMax {
            inner: datafusion::functions_aggregate::min_max::min_udaf(),
            max: false,
        }),
        AggregateUDF::new_from_impl(NanOrderedMinMax {
            inner: datafusion::functions_aggregate::min_max::max_udaf(),
            max: true,
        }),
    ]
}

/// The engine's `min` (`max: false`) or `max`, with accumulators of its own for floats.
#[derive(Debug, PartialEq, Eq, Hash)]
struct NanOrderedMinMax {
    inner: Arc<AggregateUDF>,
    max: bool,
}

impl NanOrderedMinMax {
    fn inner(&self) -> &dyn AggregateUDFImpl {
        self.inner.inner().as_ref()
    }

    fn is_float(t: &DataType) -> bool {
        matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
    }
}

impl AggregateUDFImpl for NanOrderedMinMax {
    fn name(&self) -> &str {
        self.inner().name()
    }

    fn aliases(&self) -> &[String] {
        self.inner().aliases()
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner().schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> DfResult<String> {
        self.inner().display_name(params)
    }

    fn signature(&self) -> &Signature {
        self.inner().signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner().return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        self.inner().return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner().is_nullable()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(match args.return_field.data_type() {
            DataType::Float16 => Box::new(FloatAccumulator::<Float16Type>::new(self.max)),
            DataType::Float32 => Box::new(FloatAccumulator::<Float32Type>::new(self.max)),
            DataType::Float64 => Box::new(FloatAccumulator::<Float64Type>::new(self.max)),
            _ => return self.inner().accumulator(args),
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        self.inner().state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        Self::is_float(args.return_field.data_type())
            || self.inner().groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        Ok(match args.return_field.data_type() {
            DataType::Float16 => Box::new(FloatGroups::<Float16Type>::new(self.max)),
            DataType::Float32 => Box::new(FloatGroups::<Float32Type>::new(self.max)),
            DataType::Float64 => Box::new(FloatGroups::<Float64Type>::new(self.max)),
            _ => return self.inner().create_groups_accumulator(args),
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        self.inner().create_sliding_accumulator(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner().order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner().coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner().is_descending()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        // Statistics that leave NaN out would answer a float `max` without its NaN.
        if Self::is_float(statistics_args.return_type) {
            return None;
        }
        self.inner().value_from_stats(statistics_args)
    }

    fn default_value(&self, data_type: &DataType) -> DfResult<ScalarValue> {
        self.inner().default_value(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner().documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner().set_monotonicity(data_type)
    }
}

/// A float type ordered as duckdb orders it: NaN above every number.
trait NanOrdered: ArrowPrimitiveType + std::fmt::Debug + Send + Sync {
    /// `a` against `b`: every NaN is equal to every other and greater than every number;
    /// numbers in IEEE total order.
    fn order(a: Self::Native, b: Self::Native) -> Ordering;
}

macro_rules! nan_ordered {
    ($t:ty) => {
        impl NanOrdered for $t {
            fn order(a: Self::Native, b: Self::Native) -> Ordering {
                match (a.is_nan(), b.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => a.total_cmp(&b),
                }
            }
        }
    };
}
nan_ordered!(Float16Type);
nan_ordered!(Float32Type);
nan_ordered!(Float64Type);

/// Whether `new` replaces `current` as the running minimum (`max: false`) or maximum.
#[inline]
fn replaces<T: NanOrdered>(max: bool, new: T::Native, current: T::Native) -> bool {
    let o = T::order(new, current);
    if max {
        o == Ordering::Greater
    } else {
        o == Ordering::Less
    }
}

/// The values of a batch's first column as floats of type `T`.
fn floats<T: NanOrdered>(values: &[ArrayRef]) -> DfResult<&PrimitiveArray<T>> {
    match values
        .first()
        .and_then(|a| a.as_any().downcast_ref::<PrimitiveArray<T>>())
    {
        Some(a) => Ok(a),
        None => internal_err!("min/max: the input is not of type {}", T::DATA_TYPE),
    }
}

/// `min` or `max` of one group of floats (no GROUP BY, or a window).
#[derive(Debug)]
struct FloatAccumulator<T: NanOrdered> {
    max: bool,
    value: Option<T::Native>,
}

impl<T: NanOrdered> FloatAccumulator<T> {
    fn new(max: bool) -> Self {
        FloatAccumulator { max, value: None }
    }
}

impl<T: NanOrdered> Accumulator for FloatAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let a = floats::<T>(values)?;
        let mut fold = |v: T::Native| match self.value {
            Some(c) if !replaces::<T>(self.max, v, c) => {}
            _ => self.value = Some(v),
        };
        if a.null_count() == 0 {
            a.values().iter().for_each(|&v| fold(v));
        } else {
            a.iter().flatten().for_each(fold);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        ScalarValue::new_primitive::<T>(self.value, &T::DATA_TYPE)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.update_batch(states)
    }
}

/// `min` or `max` of floats for every group of a GROUP BY.
#[derive(Debug)]
struct FloatGroups<T: NanOrdered> {
    max: bool,
    /// Each group's running value (meaningless where `seen` is false).
    values: Vec<T::Native>,
    /// Whether a group has met a value (a group with none gives null).
    seen: Vec<bool>,
    _t: PhantomData<fn() -> T>,
}

impl<T: NanOrdered> FloatGroups<T> {
    fn new(max: bool) -> Self {
        FloatGroups {
            max,
            values: Vec::new(),
            seen: Vec::new(),
            _t: PhantomData,
        }
    }

    fn take(&mut self, emit_to: EmitTo) -> ArrayRef {
        let values = emit_to.take_needed(&mut self.values);
        let seen = emit_to.take_needed(&mut self.seen);
        let nulls = NullBuffer::new(BooleanBuffer::from(seen));
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        Arc::new(PrimitiveArray::<T>::new(values.into(), nulls))
    }
}

impl<T: NanOrdered> GroupsAccumulator for FloatGroups<T> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> DfResult<()> {
        let a = floats::<T>(values)?;
        if a.len() != group_indices.len() {
            return internal_err!(
                "min/max: {} values for {} group indices",
                a.len(),
                group_indices.len()
            );
        }
        self.values.resize(total_num_groups, T::Native::default());
        self.seen.resize(total_num_groups, false);
        let nulls = a.nulls();
        let raw = a.values();
        for (i, &g) in group_indices.iter().enumerate() {
            if nulls.is_some_and(|n| n.is_null(i)) {
                continue;
            }
            if let Some(f) = opt_filter {
                if !(f.is_valid(i) && f.value(i)) {
                    continue;
                }
            }
            let v = raw[i];
            if !self.seen[g] {
                self.seen[g] = true;
                self.values[g] = v;
            } else if replaces::<T>(self.max, v, self.values[g]) {
                self.values[g] = v;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> DfResult<ArrayRef> {
        Ok(self.take(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> DfResult<Vec<ArrayRef>> {
        Ok(vec![self.take(emit_to)])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> DfResult<()> {
        self.update_batch(values, group_indices, None, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> DfResult<Vec<ArrayRef>> {
        // Each row is its own group's state: its value, or null where filtered out.
        let a = floats::<T>(values)?.clone();
        let Some(filter) = opt_filter else {
            return Ok(vec![Arc::new(a)]);
        };
        let (_, buffer, nulls) = a.into_parts();
        let (keep, filter_nulls) = filter.clone().into_parts();
        let keep = match filter_nulls {
            Some(n) => n.inner() & &keep,
            None => keep,
        };
        let nulls = NullBuffer::union(nulls.as_ref(), Some(&NullBuffer::from(keep)));
        Ok(vec![Arc::new(PrimitiveArray::<T>::new(buffer, nulls))])
    }

    fn size(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<T::Native>() + self.seen.capacity()
    }
}
