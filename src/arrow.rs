//! Tables as Apache Arrow record batches (feature `arrow`): what the Python package's Arrow
//! C stream (`Table.__arrow_c_stream__`, read by pyarrow, polars and duckdb) and the SQL
//! engine ([`crate::sql`], feature `sql`) are made of.
//!
//! [`Export`] is a table's fields as Arrow fields (all of them, a projection, or a schema a
//! consumer asked for) and reads any row range of them as a [`RecordBatch`]; [`Batches`]
//! reads a whole table batch by batch. A stream yields one record batch per row range of a superchunk's size (the largest
//! `chunklen * superchunksize` among the columns read); each batch decodes its columns'
//! chunks in parallel on the library's rayon pool, straight into Arrow buffers. Types: blz's
//! numbers and `bool` as Arrow's, complex numbers as a fixed-size list of two floats (real,
//! imaginary), fixed-length `S<n>` byte strings as binary and `U<n>` strings as UTF-8 (their
//! zero padding removed, as numpy reads them), variable-length strings and byte strings as
//! large UTF-8 and large binary, dictionary-encoded string columns (`spec/table.md` §3.6) as
//! `Dictionary(Int32, Utf8)` (their codes and dictionary, nothing decoded), nested fields as
//! structs. A nullable column's field is nullable, its nulls those of its validity
//! (`spec/table.md` §3.5).
//!
//! A requested schema (the protocol's `requested_schema`) is honoured when it asks for a
//! subset of the fields, in any order, with the same types except that any string or binary
//! column may be asked for with 32-bit offsets (`utf8`, `binary`) or 64-bit ones (a
//! dictionary-encoded column then comes decoded, as plain strings); otherwise
//! the table's own schema is streamed, which the protocol allows (the consumer checks).

use crate::dtype::{DType, TimeUnit, NAT};
use crate::engine::Mode;
use crate::table::{FieldSpec, FieldType, LeafKind, Table};
use arrow_array::builder::{GenericBinaryBuilder, GenericStringBuilder};
use arrow_array::types::{
    Date32Type, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, IntervalYearMonthType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{make_array, Array};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, DictionaryArray, FixedSizeListArray,
    GenericBinaryArray, GenericStringArray, OffsetSizeTrait, PrimitiveArray, RecordBatch,
    RecordBatchOptions, RecordBatchReader, StructArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Fields, IntervalUnit, Schema, SchemaRef};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A field of the exported schema: a leaf column (its path, kind, and whether its strings
/// take 64-bit offsets) or a structure of fields.
#[derive(Clone, Debug)]
enum Node {
    Leaf {
        path: String,
        kind: LeafKind,
        large: bool,
        /// A zoned `datetime64` column's zone (`spec/table.md` §2.3): its timestamps carry it.
        tz: Option<Arc<str>>,
        /// A dictionary-encoded column, exported as `Dictionary(Int32, Utf8)`.
        dict: bool,
    },
    Struct(Vec<Slot>),
}

/// A leaf column to read: its path, kind, whether its strings take 64-bit offsets, its
/// zone, and whether it is read as a dictionary array.
type LeafRead<'a> = (&'a str, LeafKind, bool, Option<&'a Arc<str>>, bool);

/// A named field and whether it is declared nullable (a nullable column's, or one a
/// requested schema asks to be).
type Slot = (String, Node, bool);

impl Node {
    fn data_type(&self) -> DataType {
        match self {
            Node::Leaf { dict: true, .. } => dictionary_type(),
            Node::Leaf {
                kind, large, tz, ..
            } => zoned_type(leaf_type(*kind, *large), tz.as_ref()),
            Node::Struct(fields) => DataType::Struct(fields_of(fields)),
        }
    }

    fn leaves<'a>(&'a self, out: &mut Vec<LeafRead<'a>>) {
        match self {
            Node::Leaf {
                path,
                kind,
                large,
                tz,
                dict,
            } => out.push((path, *kind, *large, tz.as_ref(), *dict)),
            Node::Struct(fields) => fields.iter().for_each(|(_, n, _)| n.leaves(out)),
        }
    }

    /// The array of this field from the leaves' arrays, taken in order.
    fn assemble(
        &self,
        arrays: &mut impl Iterator<Item = ArrayRef>,
    ) -> Result<ArrayRef, ArrowError> {
        match self {
            Node::Leaf { path, .. } => arrays
                .next()
                .ok_or_else(|| ArrowError::ComputeError(format!("column {path} was not read"))),
            Node::Struct(fields) => {
                let children = fields
                    .iter()
                    .map(|(_, n, _)| n.assemble(arrays))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Arc::new(StructArray::try_new(
                    fields_of(fields),
                    children,
                    None,
                )?))
            }
        }
    }

    /// This field as `want` asks for it, when blz can produce that (see the module docs).
    fn requested(&self, want: &DataType) -> Option<Node> {
        match (self, want) {
            (Node::Leaf { path, kind, tz, .. }, want) => {
                let large = match (kind, want) {
                    (_, t) if *t == self.data_type() => return Some(self.clone()),
                    (LeafKind::VarStr | LeafKind::Fixed(DType::Str(_)), DataType::Utf8)
                    | (LeafKind::VarBytes | LeafKind::Fixed(DType::Bytes(_)), DataType::Binary) => {
                        false
                    }
                    (LeafKind::VarStr | LeafKind::Fixed(DType::Str(_)), DataType::LargeUtf8)
                    | (
                        LeafKind::VarBytes | LeafKind::Fixed(DType::Bytes(_)),
                        DataType::LargeBinary,
                    ) => true,
                    _ => return None,
                };
                Some(Node::Leaf {
                    path: path.clone(),
                    kind: *kind,
                    large,
                    tz: tz.clone(),
                    dict: false,
                })
            }
            (Node::Struct(fields), DataType::Struct(want)) => {
                requested_fields(fields, want).map(Node::Struct)
            }
            _ => None,
        }
    }
}

fn requested_fields(have: &[Slot], want: &Fields) -> Option<Vec<Slot>> {
    want.iter()
        .map(|w| {
            let (name, node, nullable) = have.iter().find(|(n, _, _)| n == w.name())?;
            if *nullable && !w.is_nullable() {
                // A column that may hold nulls cannot be streamed as one that holds none.
                return None;
            }
            Some((
                name.clone(),
                node.requested(w.data_type())?,
                w.is_nullable(),
            ))
        })
        .collect()
}

fn fields_of(nodes: &[Slot]) -> Fields {
    nodes
        .iter()
        .map(|(name, n, nullable)| Field::new(name, n.data_type(), *nullable))
        .collect()
}

/// The Arrow type of a dictionary-encoded column: its codes as keys into its entries.
fn dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// Rows `start..end` of dictionary-encoded column `path` as a dictionary array: the stored
/// codes as keys (a null row's key is 0, its validity added by [`with_validity`]), the
/// dictionary as values (with the fill value after it when a row holds it and it is no
/// entry).
fn dictionary_array(t: &Table, path: &str, start: u64, end: u64) -> Result<ArrayRef, ArrowError> {
    let crate::table::DictionaryValues {
        mut codes,
        mut dictionary,
    } = t.column_codes(path, start, end).map_err(blz_error)?;
    if codes.contains(&crate::table::FILL_CODE) {
        if dictionary.is_empty() {
            dictionary.push(String::new());
        }
        codes
            .iter_mut()
            .filter(|k| **k == crate::table::FILL_CODE)
            .for_each(|k| *k = 0);
    }
    let keys = PrimitiveArray::<Int32Type>::from(codes);
    let values: ArrayRef = Arc::new(GenericStringArray::<i32>::from(dictionary));
    Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(
        keys, values,
    )?))
}

fn leaf_type(kind: LeafKind, large: bool) -> DataType {
    let text = if large {
        DataType::LargeUtf8
    } else {
        DataType::Utf8
    };
    let binary = if large {
        DataType::LargeBinary
    } else {
        DataType::Binary
    };
    match kind {
        LeafKind::VarStr => text,
        LeafKind::VarBytes => binary,
        LeafKind::Fixed(dt) => match dt {
            DType::Bool => DataType::Boolean,
            DType::I8 => DataType::Int8,
            DType::I16 => DataType::Int16,
            DType::I32 => DataType::Int32,
            DType::I64 => DataType::Int64,
            DType::U8 => DataType::UInt8,
            DType::U16 => DataType::UInt16,
            DType::U32 => DataType::UInt32,
            DType::U64 => DataType::UInt64,
            DType::F16 => DataType::Float16,
            DType::F32 => DataType::Float32,
            DType::F64 => DataType::Float64,
            DType::C64 => complex_type(DataType::Float32),
            DType::C128 => complex_type(DataType::Float64),
            DType::Bytes(_) => binary,
            DType::Str(_) => text,
            DType::DateTime(u) => datetime_type(u),
            DType::TimeDelta(u) => timedelta_type(u),
        },
    }
}

/// `ty` with the zone `tz` when it is a timestamp (a zoned column's type).
fn zoned_type(ty: DataType, tz: Option<&Arc<str>>) -> DataType {
    match (ty, tz) {
        (DataType::Timestamp(u, None), Some(tz)) => DataType::Timestamp(u, Some(tz.clone())),
        (ty, _) => ty,
    }
}

/// `array` (a timestamp column's, or statistics of one) typed with the zone `tz`: the same
/// values, UTC instants, in Arrow's zoned timestamp type.
pub(crate) fn zoned(array: ArrayRef, tz: Option<&str>) -> Result<ArrayRef, ArrowError> {
    let Some(tz) = tz else {
        return Ok(array);
    };
    let ty = zoned_type(array.data_type().clone(), Some(&Arc::from(tz)));
    if &ty == array.data_type() {
        return Ok(array);
    }
    Ok(make_array(
        array.to_data().into_builder().data_type(ty).build()?,
    ))
}

/// The Arrow type of `datetime64[unit]`: Date32 for days and coarser units, a timestamp
/// without zone in seconds .. nanoseconds (hours and minutes in seconds). Pico-, femto- and
/// attoseconds have no Arrow type: they are typed as nanoseconds here and refused when read
/// ([`read_leaf`] names the column).
fn datetime_type(u: TimeUnit) -> DataType {
    use arrow_schema::TimeUnit as A;
    match u {
        TimeUnit::Year | TimeUnit::Month | TimeUnit::Week | TimeUnit::Day => DataType::Date32,
        TimeUnit::Hour | TimeUnit::Minute | TimeUnit::Second => {
            DataType::Timestamp(A::Second, None)
        }
        TimeUnit::Millisecond => DataType::Timestamp(A::Millisecond, None),
        TimeUnit::Microsecond => DataType::Timestamp(A::Microsecond, None),
        _ => DataType::Timestamp(A::Nanosecond, None),
    }
}

/// The Arrow type of `timedelta64[unit]`: a year-month interval for years and months, a
/// duration in seconds for weeks .. seconds, in its own unit for ms, us and ns (ps, fs and
/// as: as [`datetime_type`]).
fn timedelta_type(u: TimeUnit) -> DataType {
    use arrow_schema::TimeUnit as A;
    match u {
        TimeUnit::Year | TimeUnit::Month => DataType::Interval(IntervalUnit::YearMonth),
        TimeUnit::Week | TimeUnit::Day | TimeUnit::Hour | TimeUnit::Minute | TimeUnit::Second => {
            DataType::Duration(A::Second)
        }
        TimeUnit::Millisecond => DataType::Duration(A::Millisecond),
        TimeUnit::Microsecond => DataType::Duration(A::Microsecond),
        _ => DataType::Duration(A::Nanosecond),
    }
}

/// One `datetime64`/`timedelta64` count of `dt` as the value Arrow holds for it in
/// [`datetime_type`] / [`timedelta_type`] (days, seconds, months or the unit's own count);
/// `None` for NaT, for a value that does not fit, and for ps, fs and as.
#[cfg_attr(
    not(all(feature = "sql", not(test))),
    expect(dead_code, reason = "used by sql")
)]
pub(crate) fn time_to_arrow(dt: DType, v: i64) -> Option<i64> {
    if v == NAT {
        return None;
    }
    match dt {
        DType::DateTime(u) => match u {
            TimeUnit::Year | TimeUnit::Month | TimeUnit::Week | TimeUnit::Day => {
                crate::datetime::convert_datetime(v, u, TimeUnit::Day)
                    .and_then(|d| i32::try_from(d).ok())
                    .map(i64::from)
            }
            TimeUnit::Hour => v.checked_mul(3600),
            TimeUnit::Minute => v.checked_mul(60),
            TimeUnit::Picosecond | TimeUnit::Femtosecond | TimeUnit::Attosecond => None,
            _ => Some(v),
        },
        DType::TimeDelta(u) => match u {
            TimeUnit::Year => v
                .checked_mul(12)
                .and_then(|m| i32::try_from(m).ok())
                .map(i64::from),
            TimeUnit::Month => i32::try_from(v).ok().map(i64::from),
            TimeUnit::Week => v.checked_mul(7 * 86_400),
            TimeUnit::Day => v.checked_mul(86_400),
            TimeUnit::Hour => v.checked_mul(3600),
            TimeUnit::Minute => v.checked_mul(60),
            TimeUnit::Picosecond | TimeUnit::Femtosecond | TimeUnit::Attosecond => None,
            _ => Some(v),
        },
        _ => None,
    }
}

/// Values from [`time_to_arrow`] (`None`: unknown) as an Arrow array of the column's type.
#[cfg_attr(
    not(all(feature = "sql", not(test))),
    expect(dead_code, reason = "used by sql")
)]
pub(crate) fn time_stat_array(dt: DType, v: Vec<Option<i64>>) -> ArrayRef {
    use arrow_schema::TimeUnit as A;
    fn p<T: ArrowPrimitiveType>(v: impl Iterator<Item = Option<T::Native>>) -> ArrayRef {
        Arc::new(v.collect::<PrimitiveArray<T>>())
    }
    let i32s = v.iter().map(|x| x.and_then(|y| i32::try_from(y).ok()));
    let ty = match dt {
        DType::DateTime(u) => datetime_type(u),
        _ => timedelta_type(dt.time_unit().unwrap_or(TimeUnit::Nanosecond)),
    };
    let i64s = v.iter().copied();
    match ty {
        DataType::Date32 => p::<Date32Type>(i32s),
        DataType::Interval(_) => p::<IntervalYearMonthType>(i32s),
        DataType::Timestamp(A::Second, _) => p::<TimestampSecondType>(i64s),
        DataType::Timestamp(A::Millisecond, _) => p::<TimestampMillisecondType>(i64s),
        DataType::Timestamp(A::Microsecond, _) => p::<TimestampMicrosecondType>(i64s),
        DataType::Timestamp(..) => p::<TimestampNanosecondType>(i64s),
        DataType::Duration(A::Second) => p::<DurationSecondType>(i64s),
        DataType::Duration(A::Millisecond) => p::<DurationMillisecondType>(i64s),
        DataType::Duration(A::Microsecond) => p::<DurationMicrosecondType>(i64s),
        _ => p::<DurationNanosecondType>(i64s),
    }
}

/// The validity of a column whose missing values are NaT: `None` when it has none (the
/// common case costs one pass and no buffer).
fn nat_validity(values: &[i64]) -> Option<NullBuffer> {
    values.contains(&NAT).then(|| {
        NullBuffer::new(BooleanBuffer::collect_bool(values.len(), |i| {
            values[i] != NAT
        }))
    })
}

/// `datetime64`/`timedelta64` values (native-endian `i64` counts of `unit`, NaT for
/// missing) as the Arrow array of [`datetime_type`] / [`timedelta_type`]: each value
/// converted exactly, or an error naming the column and the value that has no Arrow form.
fn time_array(path: &str, dt: DType, buf: &Buffer, n: usize) -> Result<ArrayRef, ArrowError> {
    let raw: &[i64] = &buf.typed_data::<i64>()[..n];
    let nulls = nat_validity(raw);
    let (date, unit) = match dt {
        DType::DateTime(u) => (true, u),
        DType::TimeDelta(u) => (false, u),
        _ => {
            return Err(ArrowError::ComputeError(format!(
                "column {path}: {dt} is not a time type"
            )))
        }
    };
    if matches!(
        unit,
        TimeUnit::Picosecond | TimeUnit::Femtosecond | TimeUnit::Attosecond
    ) {
        return Err(ArrowError::InvalidArgumentError(format!(
            "column {path} holds {dt}: Arrow has no unit finer than nanoseconds (convert the \
             column to [ns] first)"
        )));
    }
    let out_of_range = |v: i64| {
        let shown = if date {
            crate::datetime::format_datetime(v, unit)
        } else {
            crate::datetime::format_timedelta(v, unit)
        };
        ArrowError::InvalidArgumentError(format!(
            "column {path} ({dt}): the value {shown} does not fit Arrow's {}",
            if date {
                datetime_type(unit)
            } else {
                timedelta_type(unit)
            }
        ))
    };
    // Each value mapped (NaT to 0 under the null mask), or the first that does not fit.
    let map = |f: &dyn Fn(i64) -> Option<i64>| -> Result<Vec<i64>, ArrowError> {
        raw.iter()
            .map(|&v| {
                if v == NAT {
                    Ok(0)
                } else {
                    f(v).ok_or_else(|| out_of_range(v))
                }
            })
            .collect()
    };
    let scale = |k: i64| map(&move |v: i64| v.checked_mul(k));
    fn prim<T: ArrowPrimitiveType>(v: Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(v), nulls))
    }
    let to_i32 = |v: Vec<i64>| -> Result<Vec<i32>, ArrowError> {
        v.iter()
            .zip(raw)
            .map(|(&x, &orig)| i32::try_from(x).map_err(|_| out_of_range(orig)))
            .collect()
    };
    // Values that Arrow keeps as they are: the buffer itself when no value is NaT (no copy),
    // else a copy with NaT as 0 under the null mask.
    let same = || -> Vec<i64> { raw.iter().map(|&v| if v == NAT { 0 } else { v }).collect() };
    fn shared<T: ArrowPrimitiveType<Native = i64>>(
        buf: &Buffer,
        n: usize,
        nulls: Option<NullBuffer>,
        same: impl Fn() -> Vec<i64>,
    ) -> ArrayRef {
        match nulls {
            None => Arc::new(PrimitiveArray::<T>::new(
                ScalarBuffer::new(buf.clone(), 0, n),
                None,
            )),
            Some(nulls) => Arc::new(PrimitiveArray::<T>::new(
                ScalarBuffer::from(same()),
                Some(nulls),
            )),
        }
    }
    Ok(if date {
        match unit {
            TimeUnit::Day => {
                // The common case (dates): days are Date32's own unit, only narrowed.
                let mut days = Vec::with_capacity(n);
                for &v in raw {
                    if v == NAT {
                        days.push(0);
                    } else {
                        days.push(i32::try_from(v).map_err(|_| out_of_range(v))?);
                    }
                }
                prim::<Date32Type>(days, nulls)
            }
            TimeUnit::Year | TimeUnit::Month | TimeUnit::Week => {
                let days = map(&|v| crate::datetime::convert_datetime(v, unit, TimeUnit::Day))?;
                prim::<Date32Type>(to_i32(days)?, nulls)
            }
            TimeUnit::Hour => prim::<TimestampSecondType>(scale(3600)?, nulls),
            TimeUnit::Minute => prim::<TimestampSecondType>(scale(60)?, nulls),
            TimeUnit::Second => shared::<TimestampSecondType>(buf, n, nulls, same),
            TimeUnit::Millisecond => shared::<TimestampMillisecondType>(buf, n, nulls, same),
            TimeUnit::Microsecond => shared::<TimestampMicrosecondType>(buf, n, nulls, same),
            _ => shared::<TimestampNanosecondType>(buf, n, nulls, same),
        }
    } else {
        match unit {
            TimeUnit::Year => prim::<IntervalYearMonthType>(to_i32(scale(12)?)?, nulls),
            TimeUnit::Month => prim::<IntervalYearMonthType>(to_i32(raw.to_vec())?, nulls),
            TimeUnit::Week => prim::<DurationSecondType>(scale(7 * 86_400)?, nulls),
            TimeUnit::Day => prim::<DurationSecondType>(scale(86_400)?, nulls),
            TimeUnit::Hour => prim::<DurationSecondType>(scale(3600)?, nulls),
            TimeUnit::Minute => prim::<DurationSecondType>(scale(60)?, nulls),
            TimeUnit::Second => shared::<DurationSecondType>(buf, n, nulls, same),
            TimeUnit::Millisecond => shared::<DurationMillisecondType>(buf, n, nulls, same),
            TimeUnit::Microsecond => shared::<DurationMicrosecondType>(buf, n, nulls, same),
            _ => shared::<DurationNanosecondType>(buf, n, nulls, same),
        }
    })
}

fn complex_type(part: DataType) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", part, false)), 2)
}

/// The table's fields as export nodes (every string column with 64-bit offsets).
fn table_nodes(t: &Table) -> Vec<Slot> {
    let kinds: HashMap<&str, (LeafKind, bool, bool)> = t
        .leaves()
        .iter()
        .map(|l| (l.path.as_str(), (l.kind, l.nullable, l.is_dictionary())))
        .collect();
    fn walk(
        prefix: &str,
        specs: &[FieldSpec],
        kinds: &HashMap<&str, (LeafKind, bool, bool)>,
    ) -> Vec<Slot> {
        specs
            .iter()
            .filter_map(|s| {
                let path = format!("{prefix}{}", s.name);
                let (node, nullable) = match &s.dtype {
                    FieldType::Leaf(_) => {
                        let (kind, nullable, dict) = *kinds.get(path.as_str())?;
                        let tz = s.timezone.as_deref().map(Arc::from);
                        (
                            Node::Leaf {
                                kind,
                                path,
                                large: true,
                                tz,
                                dict,
                            },
                            nullable,
                        )
                    }
                    FieldType::Struct(sub) => {
                        (Node::Struct(walk(&format!("{path}/"), sub, kinds)), false)
                    }
                };
                // NaT reads as null: time columns are nullable.
                let nullable = nullable
                    || matches!(
                        &node,
                        Node::Leaf { kind: LeafKind::Fixed(d), .. } if d.is_time()
                    );
                Some((s.name.clone(), node, nullable))
            })
            .collect()
    }
    walk("", &t.storage_meta().dtype, &kinds)
}

fn blz_error(e: crate::Error) -> ArrowError {
    ArrowError::ExternalError(Box::new(e))
}

fn primitive<T: ArrowPrimitiveType>(buf: Buffer, n: usize) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::new(buf, 0, n), None))
}

fn complex<T: ArrowPrimitiveType>(buf: Buffer, n: usize) -> Result<ArrayRef, ArrowError> {
    let parts = primitive::<T>(buf, 2 * n);
    let field = Arc::new(Field::new("item", T::DATA_TYPE, false));
    Ok(Arc::new(FixedSizeListArray::try_new(
        field, 2, parts, None,
    )?))
}

fn check_offsets<O: OffsetSizeTrait>(path: &str, total: usize) -> Result<(), ArrowError> {
    if O::IS_LARGE || i32::try_from(total).is_ok() {
        Ok(())
    } else {
        Err(ArrowError::InvalidArgumentError(format!(
            "column {path}: {total} bytes of strings in one batch do not fit 32-bit offsets \
             (ask for large_utf8 / large_binary)"
        )))
    }
}

fn strings<O: OffsetSizeTrait>(path: &str, items: &[&str]) -> Result<ArrayRef, ArrowError> {
    let total = items.iter().map(|s| s.len()).sum();
    check_offsets::<O>(path, total)?;
    let mut b = GenericStringBuilder::<O>::with_capacity(items.len(), total);
    items.iter().for_each(|s| b.append_value(s));
    Ok(Arc::new(b.finish()))
}

fn binaries<O: OffsetSizeTrait>(path: &str, items: &[&[u8]]) -> Result<ArrayRef, ArrowError> {
    let total = items.iter().map(|s| s.len()).sum();
    check_offsets::<O>(path, total)?;
    let mut b = GenericBinaryBuilder::<O>::with_capacity(items.len(), total);
    items.iter().for_each(|s| b.append_value(s));
    Ok(Arc::new(b.finish()))
}

fn text_array(path: &str, large: bool, items: &[&str]) -> Result<ArrayRef, ArrowError> {
    if large {
        strings::<i64>(path, items)
    } else {
        strings::<i32>(path, items)
    }
}

fn bytes_array(path: &str, large: bool, items: &[&[u8]]) -> Result<ArrayRef, ArrowError> {
    if large {
        binaries::<i64>(path, items)
    } else {
        binaries::<i32>(path, items)
    }
}

/// A string (`text`) or binary array of the items that `parts` holds as lengths and bytes
/// back to back, per chunk. Strings are checked as UTF-8 once, over the whole buffer.
fn var_array<O: OffsetSizeTrait>(
    path: &str,
    text: bool,
    parts: &[(Vec<u32>, Vec<u8>)],
) -> Result<ArrayRef, ArrowError> {
    let total: usize = parts.iter().map(|(_, b)| b.len()).sum();
    check_offsets::<O>(path, total)?;
    let n: usize = parts.iter().map(|(l, _)| l.len()).sum();
    let mut offsets: Vec<O> = Vec::with_capacity(n + 1);
    let mut values = MutableBuffer::with_capacity(total);
    let mut at = 0usize;
    offsets.push(O::usize_as(0));
    for (lens, bytes) in parts {
        for &l in lens {
            at += l as usize;
            offsets.push(O::usize_as(at));
        }
        values.extend_from_slice(bytes);
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let values: Buffer = values.into();
    Ok(if text {
        Arc::new(GenericStringArray::<O>::try_new(offsets, values, None)?)
    } else {
        Arc::new(GenericBinaryArray::<O>::try_new(offsets, values, None)?)
    })
}

fn trim_zeros(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    &b[..end]
}

/// `array` (rows `start..end` of column `path`) with the column's validity as its null
/// buffer, when the column is nullable and a row of the range is null.
fn with_validity(
    t: &Table,
    path: &str,
    start: u64,
    end: u64,
    array: ArrayRef,
) -> Result<ArrayRef, ArrowError> {
    if !t.is_nullable(path).map_err(blz_error)? {
        return Ok(array);
    }
    let mut flags = vec![0u8; array.len()];
    t.validity_into(path, start, end, &mut flags)
        .map_err(blz_error)?;
    if !flags.contains(&0) {
        return Ok(array);
    }
    let stored = NullBuffer::new(BooleanBuffer::collect_bool(flags.len(), |i| flags[i] != 0));
    // A time column's NaT is null already: a row is null when either says so.
    let nulls = NullBuffer::union(Some(&stored), array.nulls());
    let data = array.to_data().into_builder().nulls(nulls).build()?;
    Ok(make_array(data))
}

/// Rows `start..end` of one leaf column as an Arrow array.
fn read_leaf(
    t: &Table,
    path: &str,
    kind: LeafKind,
    large: bool,
    start: u64,
    end: u64,
) -> Result<ArrayRef, ArrowError> {
    let n = usize::try_from(end - start)
        .map_err(|_| ArrowError::ComputeError(format!("{} rows in one batch", end - start)))?;
    let dt = match kind {
        LeafKind::Fixed(dt) => dt,
        LeafKind::VarStr | LeafKind::VarBytes => {
            // The chunks' lengths and bytes straight into Arrow's offsets and values: one
            // allocation per buffer, not one per item.
            let parts = t.var_rows_flat(path, start, end).map_err(blz_error)?;
            let text = kind == LeafKind::VarStr;
            let array = if large {
                var_array::<i64>(path, text, &parts)
            } else {
                var_array::<i32>(path, text, &parts)
            };
            return array.map_err(|e| match e {
                ArrowError::InvalidArgumentError(m) => ArrowError::InvalidArgumentError(format!(
                    "column {path} of {}: {m}",
                    t.path().display()
                )),
                other => other,
            });
        }
    };
    let size = dt.itemsize();
    let mut raw = MutableBuffer::from_len_zeroed(n * size);
    t.column_rows_into(path, start, end, raw.as_slice_mut())
        .map_err(blz_error)?;
    let buf: Buffer = raw.into();
    Ok(match dt {
        DType::Bool => {
            let b = buf.as_slice();
            Arc::new(BooleanArray::new(
                BooleanBuffer::collect_bool(n, |i| b[i] != 0),
                None,
            ))
        }
        DType::I8 => primitive::<Int8Type>(buf, n),
        DType::I16 => primitive::<Int16Type>(buf, n),
        DType::I32 => primitive::<Int32Type>(buf, n),
        DType::I64 => primitive::<Int64Type>(buf, n),
        DType::U8 => primitive::<UInt8Type>(buf, n),
        DType::U16 => primitive::<UInt16Type>(buf, n),
        DType::U32 => primitive::<UInt32Type>(buf, n),
        DType::U64 => primitive::<UInt64Type>(buf, n),
        DType::F16 => primitive::<Float16Type>(buf, n),
        DType::F32 => primitive::<Float32Type>(buf, n),
        DType::F64 => primitive::<Float64Type>(buf, n),
        DType::DateTime(_) | DType::TimeDelta(_) => time_array(path, dt, &buf, n)?,
        DType::C64 => complex::<Float32Type>(buf, n)?,
        DType::C128 => complex::<Float64Type>(buf, n)?,
        DType::Bytes(_) => {
            let b = buf.as_slice();
            let items: Vec<&[u8]> = (0..n)
                .map(|i| trim_zeros(&b[i * size..(i + 1) * size]))
                .collect();
            bytes_array(path, large, &items)?
        }
        DType::Str(_) => {
            // UCS-4 code points, native-endian after blz's read, zero-padded.
            let b = buf.as_slice();
            let values = (0..n)
                .map(|i| &b[i * size..(i + 1) * size])
                .map(|cell| {
                    let mut s = String::with_capacity(cell.len() / 4);
                    for unit in cell.chunks_exact(4) {
                        let cp = u32::from_ne_bytes([unit[0], unit[1], unit[2], unit[3]]);
                        s.push(char::from_u32(cp).ok_or_else(|| {
                            ArrowError::InvalidArgumentError(format!(
                                "column {path} of {}: {cp:#x} is not a Unicode scalar value",
                                t.path().display()
                            ))
                        })?);
                    }
                    Ok(s.trim_end_matches('\0').to_string())
                })
                .collect::<Result<Vec<String>, ArrowError>>()?;
            let refs: Vec<&str> = values.iter().map(String::as_str).collect();
            text_array(path, large, &refs)?
        }
    })
}

/// A table's fields as Arrow fields, and the reading of row ranges of them as record
/// batches: all of a table's top-level fields ([`Export::of`]), a subset of them
/// ([`Export::project`]), or a schema a consumer asked for ([`Export::requested`]).
///
/// Types: blz's numbers and `bool` as Arrow's; complex numbers as a fixed-size list of two
/// floats (real, imaginary); `S<n>` byte strings as binary and `U<n>` strings as UTF-8 (their
/// zero padding removed, as numpy reads them); variable-length strings and byte strings as
/// large UTF-8 and large binary; nested fields as structs. A nullable column's field is
/// nullable and carries the column's nulls.
#[derive(Clone, Debug)]
pub struct Export {
    slots: Vec<Slot>,
    schema: SchemaRef,
}

impl Export {
    fn from_slots(slots: Vec<Slot>) -> Export {
        let schema = Arc::new(Schema::new(fields_of(&slots)));
        Export { slots, schema }
    }

    /// The same export with every dictionary-encoded column given as plain (large) UTF-8,
    /// decoded from its codes: what the SQL engine reads (DataFusion's string kernels and
    /// grouping are faster on plain strings than on dictionary arrays, measured by
    /// `benches/dict_query.py`).
    pub fn decoded(self) -> Export {
        fn plain(slots: Vec<Slot>) -> Vec<Slot> {
            slots
                .into_iter()
                .map(|(name, node, nullable)| {
                    let node = match node {
                        Node::Leaf {
                            path,
                            kind,
                            large,
                            tz,
                            ..
                        } => Node::Leaf {
                            path,
                            kind,
                            large,
                            tz,
                            dict: false,
                        },
                        Node::Struct(sub) => Node::Struct(plain(sub)),
                    };
                    (name, node, nullable)
                })
                .collect()
        }
        Export::from_slots(plain(self.slots))
    }

    /// Every top-level field of `table`, strings with 64-bit offsets.
    pub fn of(table: &Table) -> Export {
        Export::from_slots(table_nodes(table))
    }

    /// The fields `want` asks for, when blz can produce them: a subset of the table's fields
    /// in any order, with the same types except that any string or binary column may be
    /// asked for with 32-bit offsets (`utf8`, `binary`) or 64-bit ones, and nullable or not.
    /// `None` when it asks for something else.
    pub fn requested(table: &Table, want: &Schema) -> Option<Export> {
        requested_fields(&table_nodes(table), want.fields()).map(Export::from_slots)
    }

    /// The top-level fields at `indices` of this export (positions in its schema), in that
    /// order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an index past the last
    /// field.
    pub fn project(&self, indices: &[usize]) -> crate::Result<Export> {
        let slots = indices
            .iter()
            .map(|&i| {
                self.slots.get(i).cloned().ok_or_else(|| {
                    crate::Error::InvalidArgument(format!(
                        "field {i} of a table with {} fields",
                        self.slots.len()
                    ))
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Export::from_slots(slots))
    }

    /// The Arrow schema of the batches this export reads.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The Arrow schema of the batches this export reads, borrowed.
    pub fn schema_ref(&self) -> &SchemaRef {
        &self.schema
    }

    /// The leaf column paths this export reads (as [`Table`] names them), in order.
    pub fn leaf_paths(&self) -> Vec<&str> {
        let mut leaves = Vec::new();
        self.slots
            .iter()
            .for_each(|(_, n, _)| n.leaves(&mut leaves));
        leaves.into_iter().map(|(p, ..)| p).collect()
    }

    /// The rows per batch that reads whole superchunk files of every column read: the
    /// largest `chunklen * superchunksize` among them (at least 1).
    pub fn superchunk_rows(&self, table: &Table) -> u64 {
        let paths = self.leaf_paths();
        table
            .leaves()
            .iter()
            .filter(|l| paths.contains(&l.path.as_str()))
            .map(|l| l.storage.chunklen.saturating_mul(l.storage.superchunksize))
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// Rows `start..end` of `table` as one record batch of this export's schema. The columns'
    /// chunks are decoded in parallel on blz's rayon pool, straight into Arrow buffers.
    ///
    /// # Errors
    /// What reading the columns gives (a range past the table's rows, corrupt chunks...),
    /// and a strings column whose values in the range do not fit 32-bit offsets when they
    /// were asked for, as [`ArrowError`]s (blz's own errors as
    /// [`ArrowError::ExternalError`]).
    pub fn read(&self, table: &Table, start: u64, end: u64) -> Result<RecordBatch, ArrowError> {
        let mut leaves = Vec::new();
        self.slots
            .iter()
            .for_each(|(_, n, _)| n.leaves(&mut leaves));
        // Every column's chunks at once: each column's read is itself parallel over its
        // chunks, and rayon spreads the (column, chunk) pairs over the pool.
        let arrays = leaves
            .par_iter()
            .map(|(path, kind, large, tz, dict)| {
                let array = if *dict {
                    dictionary_array(table, path, start, end)?
                } else {
                    read_leaf(table, path, *kind, *large, start, end)?
                };
                let array = zoned(array, tz.map(|z| &**z))?;
                with_validity(table, path, start, end, array)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut it = arrays.into_iter();
        let columns = self
            .slots
            .iter()
            .map(|(_, n, _)| n.assemble(&mut it))
            .collect::<Result<Vec<_>, _>>()?;
        let rows = usize::try_from(end.saturating_sub(start))
            .map_err(|_| ArrowError::ComputeError("too many rows in one batch".into()))?;
        RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
    }
}

/// The record batches of a whole table, one per row range of a superchunk's size
/// ([`Export::superchunk_rows`]): an iterator and an Arrow [`RecordBatchReader`].
pub struct Batches {
    /// A read-only handle of its own: the stream reads the commit it started at, whatever
    /// the handle it came from does meanwhile (a writer's later commit that rewrites what
    /// it still has to read ends it with blz's "changed" error).
    table: Table,
    export: Export,
    next: u64,
    end: u64,
    step: u64,
}

impl Batches {
    /// The rows of `table` at this moment, in `export`'s fields (or all of them).
    ///
    /// # Errors
    /// What opening a second read-only handle of the table gives.
    pub fn new(table: &Table, export: Option<Export>) -> crate::Result<Batches> {
        let table = Table::open_in(Arc::clone(table.storage()), table.path(), Mode::ReadOnly)?;
        let export = export.unwrap_or_else(|| Export::of(&table));
        let step = export.superchunk_rows(&table);
        Ok(Batches {
            next: 0,
            end: table.nrows(),
            table,
            export,
            step,
        })
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let start = self.next;
        let end = self.end.min(start.saturating_add(self.step));
        self.next = end;
        let r = self.export.read(&self.table, start, end);
        if r.is_err() {
            // A failed stream ends there.
            self.next = self.end;
        }
        Some(r)
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        self.export.schema()
    }
}
