//! Errors: the library's as Python exceptions (classes in `blz/_errors.py`), the failure
//! type of the Rust side ([`Fail`]), and [`detached`], which runs library calls with the GIL
//! released and turns a panic into a `blz.Error`.

use pyo3::prelude::*;
use std::path::PathBuf;

/// The `blz` exception class for a library error (classes are defined in `blz/_errors.py`).
pub(crate) fn error_class(e: &blz::Error) -> &'static str {
    use blz::Error as E;
    match e {
        E::InvalidHeader { .. }
        | E::InvalidChunk { .. }
        | E::ChecksumMismatch { .. }
        | E::InvalidMetadata { .. }
        | E::NotBlz { .. }
        | E::ChunkOutOfRange { .. } => "CorruptionError",
        E::Locked { .. } => "LockedError",
        E::ReadOnly { .. } => "ReadOnlyError",
        E::Changed { .. } => "ChangedError",
        E::Conflict { .. } => "ConflictError",
        E::OutOfBounds { .. } => "OutOfBoundsError",
        E::Mismatch { .. } => "MismatchError",
        E::InvalidArgument(_) | E::InvalidExpression { .. } | E::DictionaryFull { .. } => {
            "InvalidArgumentError"
        }
        E::Sql(_) => "SqlError",
        E::Unsupported { .. } => "UnsupportedError",
        E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "NotFoundError",
        _ => "Error",
    }
}

/// The file and chunk an error names, when it names them.
pub(crate) fn error_place(e: &blz::Error) -> (Option<PathBuf>, Option<u64>) {
    use blz::Error as E;
    match e {
        E::InvalidChunk { path, chunk, .. } | E::ChecksumMismatch { path, chunk, .. } => {
            (Some(path.clone()), (*chunk != u64::MAX).then_some(*chunk))
        }
        E::ChunkOutOfRange { path, chunk, .. } => (Some(path.clone()), Some(*chunk)),
        E::Io { path, .. }
        | E::InvalidHeader { path, .. }
        | E::InvalidMetadata { path, .. }
        | E::NotBlz { path, .. }
        | E::Locked { path, .. }
        | E::ReadOnly { path }
        | E::Unsupported { path, .. }
        | E::Changed { path }
        | E::Conflict { path } => (Some(path.clone()), None),
        E::OutOfBounds { dataset, .. }
        | E::Mismatch { dataset, .. }
        | E::DictionaryFull { dataset, .. } => (Some(dataset.clone()), None),
        _ => (None, None),
    }
}

/// Builds the Python exception for a library error: the class by kind, the library's message
/// (which names the file and the chunk), and `filename` and `chunk` attributes.
pub(crate) fn raise(
    py: Python<'_>,
    class: &str,
    msg: String,
    place: (Option<PathBuf>, Option<u64>),
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("blz._errors")?.getattr(class)?;
        let exc = cls.call1((msg.clone(),))?;
        let (path, chunk) = place;
        exc.setattr("filename", path.map(|p| p.display().to_string()))?;
        exc.setattr("chunk", chunk)?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// A failure on the Rust side, before it becomes a Python exception (which needs the GIL).
pub(crate) enum Fail {
    Blz(blz::Error),
    Panic(String),
    Py(PyErr),
    /// A Python `blz.ChangedError` raised by Python code a library loop called
    /// ([`crate::handle::on_latest_commit`]): a read that met a writer's commit.
    PyChanged(PyErr),
}

impl From<blz::Error> for Fail {
    fn from(e: blz::Error) -> Fail {
        Fail::Blz(e)
    }
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Fail {
        Fail::Py(e)
    }
}

impl Fail {
    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Blz(e) => {
                let class = error_class(&e);
                let place = error_place(&e);
                raise(py, class, e.to_string(), place)
            }
            Fail::Panic(m) => raise(
                py,
                "Error",
                format!("internal error in blz: {m}"),
                (None, None),
            ),
            Fail::Py(e) | Fail::PyChanged(e) => e,
        }
    }
}

pub(crate) type FResult<T> = std::result::Result<T, Fail>;

/// The process that imported the module: a call in another (a child forked from it) runs
/// on threads of that process's own ([`blz::in_this_process`]).
pub(crate) static HOME: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Runs `f` with the GIL released; a panic inside becomes a `blz.Error`.
pub(crate) fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> FResult<T> + Send,
    T: Send,
{
    let r = py.detach(|| {
        let run = || std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        // In a child forked from the process that imported blz, on threads of its own.
        let home = *HOME.get_or_init(std::process::id);
        let ran = match blz::in_this_process(home, run) {
            Ok(ran) => ran,
            Err(e) => return Err(Fail::from(e)),
        };
        ran.unwrap_or_else(|p| Err(Fail::Panic(panic_message(p.as_ref()))))
    });
    r.map_err(|e| e.into_py(py))
}

/// The message a panic carried (`panic!`'s text), or "a panic".
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

pub(crate) fn lock_err(what: &str) -> Fail {
    Fail::Panic(format!("the {what} lock was poisoned by an earlier panic"))
}

/// One problem `verify` found: the `blz` exception class, the message, the file, the chunk.
pub(crate) type Problem = (String, String, Option<String>, Option<u64>);

pub(crate) fn errors_list(errors: Vec<blz::Error>) -> Vec<Problem> {
    errors
        .into_iter()
        .map(|e| {
            let (p, c) = error_place(&e);
            (
                error_class(&e).to_string(),
                e.to_string(),
                p.map(|p| p.display().to_string()),
                c,
            )
        })
        .collect()
}
