//! Why a command failed, and how it is told: one failure type for every command (the
//! message printed after `blz: ` and the exit status), the wording of library errors, and
//! `say!` for lines on standard output that stop quietly when the reader has gone.

/// Why a command failed: the message printed after `blz: `, and the exit status.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, for a person (empty: nothing more to say).
    pub message: String,
    /// The exit status.
    pub code: u8,
}

impl Failure {
    /// A failure with exit status 1.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::new(s)
    }
}

/// The exit status of a read that met a writer's commit, or of a write that lost the race
/// to commit on an object store (`EX_TEMPFAIL`): running the
/// command again reads the new state. Commands that print only at the end are re-run by
/// `main` before it gets this far.
pub const EXIT_CHANGED: u8 = 75;

impl From<blz::Error> for Failure {
    fn from(e: blz::Error) -> Failure {
        Failure {
            message: describe(&e),
            code: if matches!(e, blz::Error::Changed { .. } | blz::Error::Conflict { .. }) {
                EXIT_CHANGED
            } else {
                1
            },
        }
    }
}

/// The library's advice, in the command line's words: what the library calls an option,
/// the CLI names by its flag.
const IN_CLI_WORDS: &[(&str, &str)] = &[
    ("(use overwrite ", "(use --overwrite "),
    ("the schema names column", "--schema names column"),
    (
        "(store text with an S<n> or U<n> dtype)",
        "(give --dtype S<n> or U<n> to store text)",
    ),
    (
        "leave it out of the columns or write CSV",
        "leave it out of --columns or use --out FILE.csv",
    ),
];

/// The message for a library error, for a person.
pub fn describe(e: &blz::Error) -> String {
    let in_cli_words = |m: &str| {
        IN_CLI_WORDS
            .iter()
            .fold(m.to_string(), |m, (lib, cli)| m.replace(lib, cli))
    };
    match e {
        blz::Error::InvalidArgument(m) => in_cli_words(m),
        blz::Error::InvalidInput { .. } => in_cli_words(&e.to_string()),
        blz::Error::ChecksumMismatch {
            path,
            chunk: u64::MAX,
            algorithm,
            expected,
            got,
        } => format!(
            "{}: metadata section: checksum mismatch ({algorithm}): stored {expected}, computed {got}",
            path.display()
        ),
        other => other.to_string(),
    }
}

/// Standard output went away (`blz get ... | head`): stop quietly; anything else is an error.
pub(crate) fn out_err(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure {
            message: String::new(),
            code: 0,
        }
    } else {
        Failure::new(format!("writing output: {e}"))
    }
}

/// Writes a line to standard output, turning a closed pipe into a quiet stop.
macro_rules! say {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::failure::out_err)?
    };
}
pub(crate) use say;
