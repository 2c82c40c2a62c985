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

mod codes;
mod layer;
mod minmax;
mod table;

use crate::error::{Error, Result};
use crate::layer::Layer;
use crate::open::AnyDataset;
use crate::table::Table;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{self as sqlast, Visit, Visitor};
use futures::StreamExt;
use std::ops::ControlFlow;
use std::sync::Arc;

/// The deepest expression a query may hold: operators nested in operators, counting every
/// operand of a chain such as `a + b + c` (which parses as `(a + b) + c`) as one level. The
/// engine plans and evaluates expressions by recursion; past this depth a query is refused
/// with [`Error::Sql`] before it is planned, rather than risk the stack of the thread that
/// runs it. The engine's threads have [`ENGINE_STACK`] bytes of stack, which holds several
/// times this depth.
pub const MAX_EXPRESSION_DEPTH: usize = 1000;

/// The stack of each of the engine's threads, where queries are parsed, planned and run
/// (the caller's thread only waits): large enough for [`MAX_EXPRESSION_DEPTH`] whatever
/// stack the caller has. Reserved address space, touched only as deep as a query goes.
const ENGINE_STACK: usize = 128 << 20;

/// How many times a query is started again when a writer's commit met its reads before it
/// gave any row (as reads of arrays and tables retry).
const CHANGED_RETRIES: u32 = 20;

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
            .thread_stack_size(ENGINE_STACK)
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the SQL engine's threads", "", e))?;
        let config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config(config);
        // Grouped float `min`/`max` that do not depend on the order of the rows, NaN above
        // every number as in duckdb (the engine's own: apache/datafusion#24432).
        for udaf in minmax::udafs() {
            ctx.register_udaf(udaf);
        }
        Ok(SqlContext {
            ctx,
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
    /// Only queries run: `SELECT`, `WITH`, `VALUES`, `EXPLAIN` of those, `DESCRIBE`, `SHOW
    /// TABLES` and `SHOW COLUMNS`. A statement that would write (`COPY`, `INSERT`, `CREATE ... AS`,
    /// `SELECT ... INTO`), read a location the caller did not name as a dataset (`CREATE
    /// EXTERNAL TABLE`), or change the session (`DROP`, `SET`, `RESET`) is refused before
    /// anything runs. The query is parsed, planned and run on the engine's threads, whatever
    /// the stack of the caller's thread.
    ///
    /// # Errors
    /// [`Error::Sql`] for a query that does not parse or plan (unknown table or column, type
    /// mismatch...), that is not a query, or whose expressions nest deeper than
    /// [`MAX_EXPRESSION_DEPTH`]; blz's own errors when a table cannot be read.
    pub fn query(&self, sql: &str) -> Result<QueryResult> {
        let paths = {
            let state = self.ctx.state();
            let sql = sql.to_string();
            self.on_engine(async move { checked_paths(&state, &sql) })??
        };
        // Opened here, on the caller's thread and outside the engine's runtime: opening a
        // dataset on an object store runs a runtime of its own.
        for name in paths {
            if !self
                .ctx
                .table_exist(name.as_str())
                .map_err(from_datafusion)?
            {
                self.register_path(&name, &name)?;
            }
        }
        let start = Start {
            ctx: self.ctx.clone(),
            sql: sql.to_string(),
        };
        let stream = self.on_engine(start.clone().run())??;
        Ok(QueryResult {
            schema: stream.schema(),
            stream: Some(stream),
            runtime: Arc::clone(&self.runtime),
            restart: Some((start, 0)),
        })
    }

    /// Runs `work` on one of the engine's threads and waits for it: those have the stack
    /// deep expressions need; a panic in it becomes an error.
    fn on_engine<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        on_engine(&self.runtime, work)
    }

    /// Runs `sql` and gathers all its rows.
    ///
    /// # Errors
    /// As [`query`](SqlContext::query), and what reading the rows gives.
    pub fn collect(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.query(sql)?.map(|b| b.map_err(from_arrow)).collect()
    }
}

/// Runs `work` on one of `runtime`'s threads and waits for it; a panic in it becomes
/// [`Error::Sql`] naming it an internal error.
fn on_engine<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    runtime.block_on(runtime.spawn(work)).map_err(|e| {
        let m = match e.try_into_panic() {
            Ok(p) => p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string()),
            Err(e) => e.to_string(),
        };
        Error::Sql(format!("internal error in the SQL engine: {m}"))
    })
}

/// A query, ready to be planned and started (again, after a writer's commit met its reads).
#[derive(Clone)]
struct Start {
    ctx: SessionContext,
    sql: String,
}

impl Start {
    async fn run(self) -> Result<SendableRecordBatchStream> {
        // What `checked_paths` refused never reaches here; the engine's own check of the
        // plan stands behind it.
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let df = self
            .ctx
            .sql_with_options(&self.sql, options)
            .await
            .map_err(from_datafusion)?;
        df.execute_stream().await.map_err(from_datafusion)
    }
}

/// Parses `sql`, refuses what is not a query or nests too deep, and gives the table
/// references that look like datasets' paths (they contain a `/`, end in `.blz` or are
/// URLs), for the caller to open.
fn checked_paths(state: &datafusion::execution::SessionState, sql: &str) -> Result<Vec<String>> {
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state
        .sql_to_statement(sql, &dialect)
        .map_err(from_datafusion)?;
    read_only(&statement)?;
    let refs = state
        .resolve_table_references(&statement)
        .map_err(from_datafusion)?;
    Ok(refs
        .into_iter()
        .filter(|r| r.schema().is_none())
        .map(|r| r.table().to_string())
        .filter(|n| n.contains('/') || n.ends_with(".blz") || n.contains("://"))
        .collect())
}

/// Refuses a statement that is not a query, or whose expressions nest deeper than
/// [`MAX_EXPRESSION_DEPTH`].
fn read_only(statement: &DfStatement) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::Sql(format!(
            "blz runs queries only (SELECT, WITH, VALUES, EXPLAIN, DESCRIBE, SHOW TABLES, SHOW COLUMNS): \
             {what} is refused"
        )))
    };
    let inner = match statement {
        DfStatement::Statement(s) => s.as_ref(),
        DfStatement::Explain(e) => return read_only(&e.statement),
        DfStatement::CreateExternalTable(_) => return refuse("CREATE EXTERNAL TABLE"),
        DfStatement::CopyTo(_) => return refuse("COPY"),
        DfStatement::Reset(_) => return refuse("RESET"),
    };
    match inner {
        sqlast::Statement::Query(q) => {
            if selects_into(q) {
                return refuse("SELECT ... INTO");
            }
        }
        sqlast::Statement::ShowTables { .. }
        | sqlast::Statement::ShowColumns { .. }
        | sqlast::Statement::ExplainTable { .. } => {}
        other => {
            let text = other.to_string();
            let kind: Vec<&str> = text.split_whitespace().take(2).collect();
            return refuse(&kind.join(" "));
        }
    }
    let mut depth = Depth::default();
    if inner.visit(&mut depth).is_break() {
        return Err(Error::Sql(format!(
            "the query's expressions nest too deep (more than {MAX_EXPRESSION_DEPTH} levels \
             of operators); split it, or use IN (...) for long lists of alternatives"
        )));
    }
    Ok(())
}

/// Whether a query's outermost SELECT writes its rows into a new table.
fn selects_into(q: &sqlast::Query) -> bool {
    match q.body.as_ref() {
        sqlast::SetExpr::Select(s) => s.into.is_some(),
        sqlast::SetExpr::Query(q) => selects_into(q),
        _ => false,
    }
}

/// Counts how deep expressions nest, stopping at [`MAX_EXPRESSION_DEPTH`].
#[derive(Default)]
struct Depth {
    now: usize,
}

impl Visitor for Depth {
    type Break = ();

    fn pre_visit_expr(&mut self, _expr: &sqlast::Expr) -> ControlFlow<()> {
        self.now += 1;
        if self.now > MAX_EXPRESSION_DEPTH {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _expr: &sqlast::Expr) -> ControlFlow<()> {
        self.now -= 1;
        ControlFlow::Continue(())
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
    /// `None` once the rows are all read, or an error ended them.
    stream: Option<SendableRecordBatchStream>,
    runtime: Arc<tokio::runtime::Runtime>,
    /// How to start the query again, and how often it was, until it gives its first rows:
    /// a writer's commit that meets the reads before then starts it again on the new commit
    /// (after, the rows given would mix two commits: the error ends them).
    restart: Option<(Start, u32)>,
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
        loop {
            let stream = self.stream.take()?;
            // Polled on the engine's threads: operators evaluate expressions by recursion.
            let polled = on_engine(&self.runtime, async move {
                let mut stream = stream;
                let next = stream.next().await;
                (stream, next)
            });
            let e = match polled {
                Ok((stream, Some(Ok(batch)))) => {
                    self.stream = Some(stream);
                    self.restart = None;
                    return Some(Ok(batch));
                }
                Ok((stream, None)) => {
                    self.drop_on_engine(stream);
                    return None;
                }
                Ok((stream, Some(Err(e)))) => {
                    self.drop_on_engine(stream);
                    from_datafusion(e)
                }
                Err(e) => e,
            };
            let again = match (&e, self.restart.as_mut()) {
                (Error::Changed { .. }, Some((start, tries))) if *tries < CHANGED_RETRIES => {
                    *tries += 1;
                    start.clone()
                }
                _ => return Some(Err(to_arrow(e))),
            };
            match on_engine(&self.runtime, again.run()) {
                Ok(Ok(stream)) if stream.schema() == self.schema => self.stream = Some(stream),
                // A commit changed the columns: the rows end with the `Changed` met.
                Ok(Ok(_)) => return Some(Err(to_arrow(e))),
                Ok(Err(e)) | Err(e) => return Some(Err(to_arrow(e))),
            }
        }
    }
}

impl QueryResult {
    /// Drops a stream on the engine's threads: a plan with deep expressions is dropped by
    /// recursion too.
    fn drop_on_engine(&self, stream: SendableRecordBatchStream) {
        let _ = on_engine(&self.runtime, async move { drop(stream) });
    }
}

impl Drop for QueryResult {
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take() {
            // Within the engine (a caller in async code), dropped where it stands.
            if tokio::runtime::Handle::try_current().is_err() {
                self.drop_on_engine(stream);
            }
        }
    }
}

/// A blz error as Arrow carries it: blz's own error inside (a consumer gets it back with
/// [`from_arrow`], or by downcasting the external error).
pub fn to_arrow(e: Error) -> ArrowError {
    ArrowError::ExternalError(Box::new(e))
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
pub fn from_arrow(e: ArrowError) -> Error {
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
