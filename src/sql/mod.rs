//! SQL over tables and layers, through Apache DataFusion (feature `sql`).
//!
//! A [`SqlContext`] names datasets (tables and layer datasets, opened from a path or an
//! `s3://` URL, or handed over open) and runs queries over them; a query's rows come back as
//! Arrow record batches ([`QueryResult`], an iterator and an Arrow `RecordBatchReader`).
//! A table or layer can also be named in the query by its path, in double quotes
//! (`SELECT count(*) FROM "data/pts.blz"`): such names are opened when the query is planned.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = blz::sql::SqlContext::new()?;
//! ctx.register_path("t", "pts.blz")?;
//! for batch in ctx.query("SELECT g, avg(x) FROM t GROUP BY g ORDER BY g")? {
//!     let batch = batch?;
//!     println!("{} rows", batch.num_rows());
//! }
//! # Ok(()) }
//! ```
//!
//! What the scans do for a query (`table.rs`, `layer.rs`): only the columns the query names
//! are decoded (projection); its filters are pushed down to skip chunks whose statistics
//! (per-chunk minimum and maximum, kept with the data) prove that no row can match, and on
//! a layer dataset to seek the first column's value index and ask its membership filter;
//! a `LIMIT` stops the scan early; row ranges are read in parallel, one DataFusion partition
//! per core; and a layer dataset declares its sort order (its columns, ascending), so that
//! `ORDER BY` on its keys and merge joins need no sort.

mod layer;
mod table;

use crate::error::{Error, Result};
use crate::layer::Layer;
use crate::open::AnyDataset;
use crate::table::Table;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use std::sync::Arc;

/// A set of named tables and layer datasets, and the SQL engine that queries them.
pub struct SqlContext {
    ctx: SessionContext,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for SqlContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlContext")
            .field("session", &self.ctx.session_id())
            .finish()
    }
}

impl SqlContext {
    /// An engine with no tables, that runs a query's partitions on as many threads as blz's
    /// decoding pool has.
    ///
    /// # Errors
    /// [`Error::Io`] when the engine's threads cannot be started.
    pub fn new() -> Result<SqlContext> {
        let threads = rayon::current_num_threads().max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("blz-sql")
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the SQL engine's threads", "", e))?;
        let config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true);
        Ok(SqlContext {
            ctx: SessionContext::new_with_config(config),
            runtime: Arc::new(runtime),
        })
    }

    /// Names an open table `name` in queries. The table is read as of its last commit
    /// before each query.
    ///
    /// # Errors
    /// [`Error::Sql`] when `name` is taken.
    pub fn register_table(&self, name: &str, table: Table) -> Result<()> {
        let provider = table::TableSource::new(table)?;
        self.add(name, Arc::new(provider))
    }

    /// Names an open layer dataset `name` in queries: one row per row of its last column,
    /// with the values of every column (and the weight, when it has one), in key order.
    ///
    /// # Errors
    /// [`Error::Sql`] when `name` is taken.
    pub fn register_layer(&self, name: &str, layer: Layer) -> Result<()> {
        let provider = layer::LayerSource::new(layer)?;
        self.add(name, Arc::new(provider))
    }

    /// Names an open dataset: a table or a layer dataset.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an N-d array or a bcolz dataset (SQL queries tables);
    /// as [`register_table`](SqlContext::register_table).
    pub fn register(&self, name: &str, dataset: AnyDataset) -> Result<()> {
        match dataset {
            AnyDataset::Table(t) => self.register_table(name, t),
            AnyDataset::Layer(l) => self.register_layer(name, l),
            other => Err(Error::InvalidArgument(format!(
                "{} is a {} dataset: SQL queries tables and layer datasets",
                other.path().display(),
                other.kind()
            ))),
        }
    }

    /// Opens the dataset at `path_or_url` (a directory, or an `s3://` URL) read-only and
    /// names it `name`.
    ///
    /// # Errors
    /// What opening the dataset gives; as [`register`](SqlContext::register).
    pub fn register_path(&self, name: &str, path_or_url: &str) -> Result<()> {
        self.register(name, crate::open(path_or_url)?)
    }

    fn add(&self, name: &str, provider: Arc<dyn datafusion::catalog::TableProvider>) -> Result<()> {
        if self.ctx.table_exist(name).map_err(from_datafusion)? {
            return Err(Error::Sql(format!("a table is already named {name:?}")));
        }
        self.ctx
            .register_table(name, provider)
            .map_err(from_datafusion)?;
        Ok(())
    }

    /// Plans and starts `sql`, and returns its rows as a stream of record batches. Tables
    /// named in the query by a path (`FROM "data/pts.blz"`) that are not registered are
    /// opened read-only and registered under that name first.
    ///
    /// # Errors
    /// [`Error::Sql`] for a query that does not parse or plan (unknown table or column, type
    /// mismatch...); blz's own errors when a table cannot be read.
    pub fn query(&self, sql: &str) -> Result<QueryResult> {
        self.runtime.block_on(async {
            self.open_named_paths(sql)?;
            let df = self.ctx.sql(sql).await.map_err(from_datafusion)?;
            let stream = df.execute_stream().await.map_err(from_datafusion)?;
            Ok(QueryResult {
                schema: stream.schema(),
                stream,
                runtime: Arc::clone(&self.runtime),
            })
        })
    }

    /// Registers the table references of `sql` that are not yet names but are paths of
    /// datasets (they contain a `/`, end in `.blz` or are URLs).
    fn open_named_paths(&self, sql: &str) -> Result<()> {
        let state = self.ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let Ok(statement) = state.sql_to_statement(sql, &dialect) else {
            // Planning the query reports the parse error.
            return Ok(());
        };
        let Ok(refs) = state.resolve_table_references(&statement) else {
            return Ok(());
        };
        for r in refs {
            if r.schema().is_some() {
                continue;
            }
            let name = r.table();
            let looks_like_path =
                name.contains('/') || name.ends_with(".blz") || name.contains("://");
            if looks_like_path && !self.ctx.table_exist(name).map_err(from_datafusion)? {
                self.register_path(name, name)?;
            }
        }
        Ok(())
    }

    /// Runs `sql` and gathers all its rows.
    ///
    /// # Errors
    /// As [`query`](SqlContext::query), and what reading the rows gives.
    pub fn collect(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.query(sql)?.map(|b| b.map_err(from_arrow)).collect()
    }
}

/// Runs `sql` over the datasets `tables` names (`(name, path or URL)` pairs), as
/// [`SqlContext::query`] does.
///
/// # Errors
/// As [`SqlContext::register_path`] and [`SqlContext::query`].
pub fn query(sql: &str, tables: &[(&str, &str)]) -> Result<QueryResult> {
    let ctx = SqlContext::new()?;
    for (name, path) in tables {
        ctx.register_path(name, path)?;
    }
    ctx.query(sql)
}

/// The rows of a query as they are computed: an iterator of record batches, and an Arrow
/// [`RecordBatchReader`] (what the Python package hands to pyarrow, polars and duckdb
/// through the Arrow C stream).
pub struct QueryResult {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for QueryResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryResult")
            .field("schema", &self.schema)
            .finish()
    }
}

impl QueryResult {
    /// The schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Iterator for QueryResult {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.runtime.block_on(self.stream.next())?;
        Some(next.map_err(|e| match from_datafusion(e) {
            Error::Sql(m) => ArrowError::ComputeError(m),
            e => ArrowError::ExternalError(Box::new(e)),
        }))
    }
}

impl RecordBatchReader for QueryResult {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// blz's own error when a DataFusion error carries one (a table that could not be read),
/// else the engine's message as [`Error::Sql`].
pub(crate) fn from_datafusion(e: DataFusionError) -> Error {
    match e {
        DataFusionError::External(b) => from_boxed(b),
        DataFusionError::ArrowError(a, _) => from_arrow(*a),
        DataFusionError::Context(_, inner) => from_datafusion(*inner),
        DataFusionError::Shared(s) => match Arc::try_unwrap(s) {
            Ok(e) => from_datafusion(e),
            Err(s) => Error::Sql(s.to_string()),
        },
        other => Error::Sql(other.to_string()),
    }
}

/// blz's own error inside an Arrow error, else its message.
pub(crate) fn from_arrow(e: ArrowError) -> Error {
    match e {
        ArrowError::ExternalError(b) => from_boxed(b),
        other => Error::Sql(other.to_string()),
    }
}

fn from_boxed(b: Box<dyn std::error::Error + Send + Sync>) -> Error {
    match b.downcast::<Error>() {
        Ok(e) => *e,
        Err(b) => match b.downcast::<DataFusionError>() {
            Ok(e) => from_datafusion(*e),
            Err(b) => match b.downcast::<ArrowError>() {
                Ok(e) => from_arrow(*e),
                Err(b) => Error::Sql(b.to_string()),
            },
        },
    }
}

/// A blz error as DataFusion carries it (and gives it back through [`from_datafusion`]).
pub(crate) fn to_datafusion(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The sending end a [`blocking_stream`] producer hands its batches to.
pub(crate) type BatchSender = tokio::sync::mpsc::Sender<datafusion::error::Result<RecordBatch>>;

/// A partition's stream of batches made by `produce` on one of the runtime's blocking
/// threads: reading decodes chunks on blz's rayon pool and may wait on storage, which must
/// never hold up the engine's workers. `capacity` batches wait in the queue at most (the
/// producer works ahead by that much); the producer sees a send fail when the consumer is
/// gone (after a LIMIT) and should stop.
pub(crate) fn blocking_stream(
    schema: SchemaRef,
    capacity: usize,
    produce: impl FnOnce(BatchSender) + Send + 'static,
) -> SendableRecordBatchStream {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity.max(1));
    tokio::task::spawn_blocking(move || produce(tx));
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}
