//! Columns, beneath tables and layers: the kinds of leaf column ([`LeafKind`]: fixed-size
//! elements, variable-length strings or byte strings), the names a column may have
//! ([`check_name`]), and the variable-length codec (`spec/varlen.md`). Both dataset kinds
//! build on this module and on [`engine`](crate::engine); neither borrows from the other.

mod kind;
// `pub` items (the module is not) so that the `fuzzing` feature can reach the payload parser.
pub(crate) mod varlen;

pub use self::kind::{check_name, LeafKind};
