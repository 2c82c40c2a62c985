//! [`Values`]: the values of one column for a range or selection of rows, as reads return
//! them and writes take them.

use crate::dtype::{bytes_to_value, DType, Element, Endianness};
use crate::error::{Error, Result};

/// The values of one column for a range or selection of rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Fixed-size elements as native-endian bytes.
    Fixed {
        /// Element type.
        dtype: DType,
        /// `len * itemsize` bytes.
        data: Vec<u8>,
    },
    /// Variable-length items (UTF-8 for string columns).
    Var(Vec<Vec<u8>>),
}

impl Values {
    /// Fixed-size values from a slice.
    pub fn from_slice<T: Element>(v: &[T]) -> Values {
        let dtype = T::dtype();
        Values::Fixed {
            dtype,
            data: crate::engine::elements_to_bytes(v, dtype.itemsize()),
        }
    }

    /// Variable-length strings.
    pub fn strings<S: AsRef<str>>(v: &[S]) -> Values {
        Values::Var(v.iter().map(|s| s.as_ref().as_bytes().to_vec()).collect())
    }

    /// Variable-length byte strings.
    pub fn bytes<B: AsRef<[u8]>>(v: &[B]) -> Values {
        Values::Var(v.iter().map(|b| b.as_ref().to_vec()).collect())
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Fixed { dtype, data } => data.len() / dtype.itemsize().max(1),
            Values::Var(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `other`'s values (of the same kind and dtype) to these.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the kinds or dtypes differ.
    pub fn extend(&mut self, other: Values) -> Result<()> {
        match (self, other) {
            (
                Values::Fixed { dtype, data },
                Values::Fixed {
                    dtype: d,
                    data: more,
                },
            ) if *dtype == d => {
                if data.is_empty() {
                    *data = more;
                } else {
                    data.extend_from_slice(&more);
                }
                Ok(())
            }
            (Values::Var(items), Values::Var(more)) => {
                if items.is_empty() {
                    *items = more;
                } else {
                    items.extend(more);
                }
                Ok(())
            }
            _ => Err(Error::InvalidArgument(
                "values of different types cannot be joined".into(),
            )),
        }
    }

    /// Splits the values at `at` (clamped to the length): these keep the first `at`, the
    /// rest are returned.
    pub fn split_off(&mut self, at: usize) -> Values {
        match self {
            Values::Fixed { dtype, data } => {
                let at = (at * dtype.itemsize()).min(data.len());
                Values::Fixed {
                    dtype: *dtype,
                    data: data.split_off(at),
                }
            }
            Values::Var(items) => Values::Var(items.split_off(at.min(items.len()))),
        }
    }

    /// The values as a `Vec<T>`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `T` does not hold the values' dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        match self {
            Values::Fixed { dtype, data } if T::accepts(dtype) => Ok(data
                .chunks_exact(dtype.itemsize())
                .map(T::from_ne_bytes)
                .collect()),
            Values::Fixed { dtype, .. } => Err(Error::InvalidArgument(format!(
                "column holds {dtype}, not {}",
                std::any::type_name::<T>()
            ))),
            Values::Var(_) => Err(Error::InvalidArgument(
                "column holds variable-length values; use to_strings or items".into(),
            )),
        }
    }

    /// The values as strings (variable-length columns, and fixed `S<n>`/`U<n>` ones).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for numeric columns or bytes that are not UTF-8.
    pub fn to_strings(&self) -> Result<Vec<String>> {
        match self {
            Values::Var(v) => v
                .iter()
                .map(|b| {
                    String::from_utf8(b.clone())
                        .map_err(|_| Error::InvalidArgument("value is not UTF-8".into()))
                })
                .collect(),
            Values::Fixed {
                dtype: d @ (DType::Bytes(_) | DType::Str(_)),
                data,
            } => Ok(data
                .chunks_exact(d.itemsize())
                .map(|c| match bytes_to_value(c, *d, Endianness::native()) {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .collect()),
            Values::Fixed { dtype, .. } => Err(Error::InvalidArgument(format!(
                "column holds {dtype}, not strings"
            ))),
        }
    }

    /// Value `i` as JSON (for display and export).
    pub fn json(&self, i: usize) -> serde_json::Value {
        match self {
            Values::Fixed { dtype, data } => {
                let s = dtype.itemsize();
                data.get(i * s..(i + 1) * s)
                    .map_or(serde_json::Value::Null, |b| {
                        bytes_to_value(b, *dtype, Endianness::native())
                    })
            }
            Values::Var(v) => v.get(i).map_or(serde_json::Value::Null, |b| {
                serde_json::Value::String(String::from_utf8_lossy(b).into_owned())
            }),
        }
    }
}
