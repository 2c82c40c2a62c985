//! The expression language of `where` queries: numexpr's syntax as bcolz's `ctable.where`
//! takes it (Python's operator precedence: comparisons bind looser than `&` and `|`, so
//! `(a > 1) & (b < 2)` needs its parentheses).
//!
//! ```text
//! expr    := or [cmp_op or]              (one comparison: `a < b < c` is refused)
//! or      := and ('|' and)*
//! and     := sum ('&' sum)*
//! sum     := product (('+' | '-') product)*
//! product := unary (('*' | '/' | '%') unary)*
//! unary   := ('-' | '~') unary | atom
//! atom    := number | string | True | False | name | `quoted name` | '(' expr ')'
//!          | isnull '(' name ')' | notnull '(' name ')'
//!          | datetime64 '(' string [',' string] ')' | timedelta64 '(' ['-'] integer ',' string ')'
//! cmp_op  := '<' | '<=' | '>' | '>=' | '==' | '!='
//! ```
//!
//! Names are column paths: letters, digits and `_`, joined by `/` for nested columns when
//! the joined path names a column (`pos/x`; otherwise `/` divides); a name in backquotes is
//! taken whole. Strings are in single or double quotes with backslash escapes, optionally
//! prefixed `b` (bytes, numexpr's form). Numbers are decimal integers (Python's ints, kept
//! exactly from -2^127 to 2^127 - 1; larger ones are floats) or floats (`1.5`, `.5`,
//! `1e-3`, `inf`, `nan`).
//!
//! Dates and durations are numpy's: `datetime64('2020-01-31')` (the unit numpy gives the
//! text, days here, or the one named second: `datetime64('2020-01-31', 'ms')`),
//! `timedelta64(90, 'm')` and `datetime64('NaT')`. A string compared with a `datetime64`
//! column is read as a date of the unit its text has (`day >= '2020-01-01'`, as pandas'
//! `query` reads it).
//!
//! # Limits
//!
//! An expression may have at most [`MAX_DEPTH`] (128) levels: the height of its tree, and
//! nested unary operators; and at most [`MAX_PARENS`] (64) nested parentheses. `+`, `-`, `*`, `/`, `%` and comparisons group from
//! the left, so a chain `a + b + ...` of more than 127 operators is refused; chains of `&` or
//! `|` are kept balanced (`a | b | c | d` is `(a | b) | (c | d)`, which means the same), so
//! a thousand alternatives take 10 levels. It may have at most [`MAX_NODES`] (10,000) names,
//! literals and operators, and [`MAX_LEN`] (1 MiB) of text. Past a limit, [`parse`] returns
//! [`Error::InvalidExpression`] ("expression too deep" / "expression too long"), so that
//! every walk of the tree (checking, evaluation, the statistics' proof, printing, dropping),
//! each recursing once per level, stays within a small thread stack.

use crate::datetime::{self, TimeUnit, NAT};
use crate::error::{Error, Result};

/// A literal of the expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `True` / `False`.
    Bool(bool),
    /// An integer (Python's int, which numpy 2 treats as "weak": it takes the type of the
    /// integer column it meets in arithmetic, and compares exactly whatever its size).
    Int(i128),
    /// A float.
    Float(f64),
    /// A string (its UTF-8 bytes) or a `b'...'` byte string.
    Str(Vec<u8>),
    /// A `datetime64` (`delta` false) or `timedelta64` (`delta` true) value of `unit`
    /// ([`NAT`] for NaT).
    Time {
        /// A duration (`timedelta64`), not a date.
        delta: bool,
        /// The unit of `value`.
        unit: TimeUnit,
        /// The count of `unit`s.
        value: i64,
    },
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (true division: the result is a float)
    Div,
    /// `%` (the sign of the divisor, as Python and numpy)
    Rem,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&` (logical and of booleans)
    And,
    /// `|` (logical or of booleans)
    Or,
}

impl BinOp {
    /// Whether comparison `self` holds between two values ordered `ord` (`!=` for an
    /// operator that is not a comparison).
    pub(crate) fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            BinOp::Lt => ord == Less,
            BinOp::Le => ord != Greater,
            BinOp::Gt => ord == Greater,
            BinOp::Ge => ord != Less,
            BinOp::Eq => ord == Equal,
            _ => ord != Equal,
        }
    }

    /// Whether this is a comparison.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }

    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&",
            BinOp::Or => "|",
        }
    }
}

/// A parsed expression; `pos` is the byte offset in the text where each node starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A column, by its path.
    Column {
        /// The column's path.
        name: String,
        /// Where it starts in the text.
        pos: usize,
    },
    /// A literal.
    Lit {
        /// Its value.
        value: Literal,
        /// Where it starts in the text.
        pos: usize,
    },
    /// Unary minus.
    Neg {
        /// The operand.
        arg: Box<Expr>,
        /// Where the operator is.
        pos: usize,
    },
    /// `~`: logical not of a boolean.
    Not {
        /// The operand.
        arg: Box<Expr>,
        /// Where the operator is.
        pos: usize,
    },
    /// `isnull(column)` (or, `negated`, `notnull(column)`): whether a row of a nullable
    /// column is missing (or holds NaT, as pandas' `isna` and SQL's NULL count it).
    IsNull {
        /// The column's path.
        name: String,
        /// `notnull`.
        negated: bool,
        /// Where the call starts in the text.
        pos: usize,
    },
    /// A binary operation.
    Bin {
        /// The operator.
        op: BinOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Where the operator is.
        pos: usize,
    },
}

impl Expr {
    /// Where the node starts (or its operator is) in the text.
    pub fn pos(&self) -> usize {
        match self {
            Expr::Column { pos, .. }
            | Expr::Lit { pos, .. }
            | Expr::Neg { pos, .. }
            | Expr::Not { pos, .. }
            | Expr::IsNull { pos, .. }
            | Expr::Bin { pos, .. } => *pos,
        }
    }

    /// The columns the expression names, each once, in order of appearance.
    pub fn columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column { name, .. } | Expr::IsNull { name, .. } = e {
                if !out.contains(name) {
                    out.push(name.clone());
                }
            }
        });
        out
    }

    /// Calls `f` with each column whose values `self` reads (not those it only tests for
    /// nulls).
    pub(crate) fn walk_values(&self, f: &mut impl FnMut(&str)) {
        match self {
            Expr::Column { name, .. } => f(name),
            Expr::Neg { arg, .. } | Expr::Not { arg, .. } => arg.walk_values(f),
            Expr::Bin { left, right, .. } => {
                left.walk_values(f);
                right.walk_values(f);
            }
            Expr::Lit { .. } | Expr::IsNull { .. } => {}
        }
    }

    fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Neg { arg, .. } | Expr::Not { arg, .. } => arg.walk(f),
            Expr::Bin { left, right, .. } => {
                left.walk(f);
                right.walk(f);
            }
            _ => {}
        }
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Column { name, .. } => write!(f, "`{name}`"),
            Expr::Lit { value, .. } => match value {
                Literal::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
                Literal::Int(i) => write!(f, "{i}"),
                Literal::Float(x) if x.is_nan() => write!(f, "nan"),
                Literal::Float(x) if x.is_infinite() => {
                    write!(f, "{}", if *x > 0.0 { "inf" } else { "(-inf)" })
                }
                Literal::Float(x) => write!(f, "{x:?}"),
                Literal::Str(s) => {
                    write!(f, "b'")?;
                    for &c in s {
                        match c {
                            b'\'' | b'\\' => write!(f, "\\{}", c as char)?,
                            0x20..=0x7e => write!(f, "{}", c as char)?,
                            _ => write!(f, "\\x{c:02x}")?,
                        }
                    }
                    write!(f, "'")
                }
                Literal::Time {
                    delta: false,
                    unit,
                    value,
                } => write!(
                    f,
                    "datetime64('{}', '{}')",
                    datetime::format_datetime(*value, *unit),
                    unit.code()
                ),
                Literal::Time { unit, value, .. } if *value == NAT => {
                    write!(f, "timedelta64('NaT', '{}')", unit.code())
                }
                Literal::Time { unit, value, .. } => {
                    write!(f, "timedelta64({value}, '{}')", unit.code())
                }
            },
            Expr::Neg { arg, .. } => write!(f, "(-{arg})"),
            Expr::Not { arg, .. } => write!(f, "(~{arg})"),
            Expr::IsNull { name, negated, .. } => write!(
                f,
                "{}(`{name}`)",
                if *negated { "notnull" } else { "isnull" }
            ),
            Expr::Bin {
                op, left, right, ..
            } => write!(f, "({left} {} {right})", op.symbol()),
        }
    }
}

/// The error of expression `text` at byte `pos`.
pub(crate) fn error(text: &str, pos: usize, reason: impl Into<String>) -> Error {
    Error::InvalidExpression {
        expr: text.to_string(),
        position: pos,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Lit(Literal),
    /// The integer 2^127: `i128::MIN` when negated, else a float.
    Pow127,
    Op(&'static str),
    LParen,
    RParen,
    End,
}

struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Column paths, to tell `a/b` the column from `a / b` the division.
    names: &'a [&'a str],
}

impl<'a> Lexer<'a> {
    fn err(&self, pos: usize, reason: impl Into<String>) -> Error {
        error(self.text, pos, reason)
    }

    fn peek_byte(&self, off: usize) -> Option<u8> {
        self.bytes.get(self.at + off).copied()
    }

    fn next(&mut self) -> Result<(Tok, usize)> {
        while self.peek_byte(0).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
        let start = self.at;
        let Some(c) = self.peek_byte(0) else {
            return Ok((Tok::End, start));
        };
        let two = self.bytes.get(start..start + 2);
        for op in ["<=", ">=", "==", "!="] {
            if two == Some(op.as_bytes()) {
                self.at += 2;
                return Ok((Tok::Op(op), start));
            }
        }
        let one = match c {
            b'<' => Some("<"),
            b'>' => Some(">"),
            b'&' => Some("&"),
            b'|' => Some("|"),
            b'~' => Some("~"),
            b'+' => Some("+"),
            b'-' => Some("-"),
            b'*' => Some("*"),
            b'/' => Some("/"),
            b'%' => Some("%"),
            b',' => Some(","),
            _ => None,
        };
        if let Some(op) = one {
            if c == b'*' && self.peek_byte(1) == Some(b'*') {
                return Err(self.err(start, "`**` (power) is not supported"));
            }
            self.at += 1;
            return Ok((Tok::Op(op), start));
        }
        match c {
            b'(' => {
                self.at += 1;
                Ok((Tok::LParen, start))
            }
            b')' => {
                self.at += 1;
                Ok((Tok::RParen, start))
            }
            b'=' => Err(self.err(start, "`=` is not an operator: use `==` to compare")),
            b'!' => Err(self.err(
                start,
                "`!` is not an operator: use `~` for not, `!=` to compare",
            )),
            b'\'' | b'"' => self.string(start, false),
            b'b' | b'B' if matches!(self.peek_byte(1), Some(b'\'' | b'"')) => {
                self.at += 1;
                self.string(start, true)
            }
            b'`' => {
                let end = self.text[start + 1..]
                    .find('`')
                    .ok_or_else(|| self.err(start, "unterminated `quoted name`"))?;
                let name = self.text[start + 1..start + 1 + end].to_string();
                self.at = start + end + 2;
                Ok((Tok::Name(name), start))
            }
            b'0'..=b'9' | b'.' => self.number(start),
            c if c == b'_' || c.is_ascii_alphabetic() => Ok((self.name(start), start)),
            _ => {
                let ch = self.text[start..].chars().next().unwrap_or('?');
                Err(self.err(start, format!("unexpected character {ch:?}")))
            }
        }
    }

    fn ident_end(&self, from: usize) -> usize {
        let mut i = from;
        while self
            .bytes
            .get(i)
            .is_some_and(|c| *c == b'_' || c.is_ascii_alphanumeric())
        {
            i += 1;
        }
        i
    }

    fn name(&mut self, start: usize) -> Tok {
        let mut end = self.ident_end(start);
        // `a/b` is column `a/b` when a column path is, or starts with, it.
        while self.bytes.get(end) == Some(&b'/')
            && self
                .bytes
                .get(end + 1)
                .is_some_and(|c| *c == b'_' || c.is_ascii_alphabetic())
        {
            let next = self.ident_end(end + 1);
            let cand = &self.text[start..next];
            let known = self
                .names
                .iter()
                .any(|n| *n == cand || n.starts_with(&format!("{cand}/")));
            if !known {
                break;
            }
            end = next;
        }
        self.at = end;
        let word = &self.text[start..end];
        let is_column = self.names.contains(&word);
        match word {
            "True" | "true" if !is_column => Tok::Lit(Literal::Bool(true)),
            "False" | "false" if !is_column => Tok::Lit(Literal::Bool(false)),
            "inf" if !is_column => Tok::Lit(Literal::Float(f64::INFINITY)),
            "nan" if !is_column => Tok::Lit(Literal::Float(f64::NAN)),
            _ => Tok::Name(word.to_string()),
        }
    }

    fn number(&mut self, start: usize) -> Result<(Tok, usize)> {
        let mut i = start;
        let digits = |i: &mut usize| {
            while self.bytes.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
        };
        digits(&mut i);
        let mut float = false;
        if self.bytes.get(i) == Some(&b'.') {
            float = true;
            i += 1;
            digits(&mut i);
        }
        if matches!(self.bytes.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(self.bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if self.bytes.get(j).is_some_and(u8::is_ascii_digit) {
                float = true;
                i = j;
                digits(&mut i);
            }
        }
        if self
            .bytes
            .get(i)
            .is_some_and(|c| *c == b'_' || c.is_ascii_alphabetic())
        {
            return Err(self.err(start, "malformed number"));
        }
        let s = &self.text[start..i];
        self.at = i;
        let lit = if float {
            Literal::Float(
                s.parse()
                    .map_err(|_| self.err(start, format!("malformed number {s:?}")))?,
            )
        } else {
            match (s.parse::<i128>(), s.parse::<u128>()) {
                (Ok(v), _) => Literal::Int(v),
                (_, Ok(v)) if v == 1 << 127 => return Ok((Tok::Pow127, start)),
                // Past i128: a float.
                _ => Literal::Float(
                    s.parse()
                        .map_err(|_| self.err(start, format!("malformed number {s:?}")))?,
                ),
            }
        };
        Ok((Tok::Lit(lit), start))
    }

    fn string(&mut self, start: usize, bytes: bool) -> Result<(Tok, usize)> {
        let q = self.bytes[self.at];
        let mut i = self.at + 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.bytes.get(i) else {
                return Err(self.err(start, "unterminated string"));
            };
            if c == q {
                self.at = i + 1;
                return Ok((Tok::Lit(Literal::Str(out)), start));
            }
            if c == b'\\' {
                let e = self
                    .bytes
                    .get(i + 1)
                    .copied()
                    .ok_or_else(|| self.err(i, "unterminated string"))?;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'0' => out.push(0),
                    b'\\' | b'\'' | b'"' => out.push(e),
                    b'x' => {
                        let h = self
                            .text
                            .get(i + 2..i + 4)
                            .and_then(|h| u8::from_str_radix(h, 16).ok())
                            .ok_or_else(|| self.err(i, "\\x needs two hex digits"))?;
                        if bytes || h < 0x80 {
                            out.push(h);
                        } else {
                            out.extend(char::from(h).to_string().bytes());
                        }
                        i += 4;
                        continue;
                    }
                    _ => return Err(self.err(i, format!("unknown escape \\{}", e as char))),
                }
                i += 2;
                continue;
            }
            if bytes && c >= 0x80 {
                return Err(self.err(i, "a byte string holds ASCII characters only"));
            }
            out.push(c);
            i += 1;
        }
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    pos: usize,
    /// Unary operators open around the token (the parser recurses on them).
    depth: usize,
    /// Parentheses open around the token.
    parens: usize,
    /// Nodes made so far.
    nodes: usize,
}

/// The most levels an expression may have: nested unary operators, and the height of its
/// tree (a chain of `n` binary operators, `a + b + ... `,
/// is `n` levels deep, since `+` and `-` are evaluated from the left; chains of `&` or `|`
/// are balanced, `log2(n)` levels). Every walk of the tree (type checking, evaluation, the
/// statistics' proof, printing, dropping) recurses once per level, so this bound keeps each
/// within a small thread stack (tested on 256 KiB).
pub const MAX_DEPTH: usize = 128;

/// The most parentheses an expression may nest (the parser recurses through each level of
/// precedence at each, so a level costs it about 3 KiB of stack).
pub const MAX_PARENS: usize = 64;

/// The most nodes (names, literals and operators) an expression may have.
pub const MAX_NODES: usize = 10_000;

/// The longest text, in bytes, of an expression.
pub const MAX_LEN: usize = 1 << 20;

/// A parsed subtree and its height (levels).
struct Sub {
    e: Expr,
    h: usize,
}

impl Sub {
    fn leaf(e: Expr) -> Sub {
        Sub { e, h: 1 }
    }
}

impl<'a> Parser<'a> {
    fn bump(&mut self) -> Result<()> {
        let (t, p) = self.lex.next()?;
        self.tok = t;
        self.pos = p;
        Ok(())
    }

    fn err(&self, pos: usize, reason: impl Into<String>) -> Error {
        error(self.lex.text, pos, reason)
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(&self.tok, Tok::Op(o) if *o == op)
    }

    fn too_deep(&self, pos: usize) -> Error {
        self.err(
            pos,
            format!(
                "expression too deep (limit {MAX_DEPTH} levels of operators, in a chain or nested)"
            ),
        )
    }

    /// Counts a new node; refuses one past [`MAX_NODES`].
    fn count(&mut self, pos: usize) -> Result<()> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.err(
                pos,
                format!("expression too long (limit {MAX_NODES} names, literals and operators)"),
            ));
        }
        Ok(())
    }

    /// Node `op` over `left` and `right`, refused past [`MAX_DEPTH`] levels.
    fn bin(&mut self, op: BinOp, left: Sub, right: Sub, pos: usize) -> Result<Sub> {
        let h = 1 + left.h.max(right.h);
        if h > MAX_DEPTH {
            return Err(self.too_deep(pos));
        }
        self.count(pos)?;
        Ok(Sub {
            e: Expr::Bin {
                op,
                left: Box::new(left.e),
                right: Box::new(right.e),
                pos,
            },
            h,
        })
    }

    fn expr(&mut self) -> Result<Sub> {
        let left = self.or()?;
        let ops = [
            ("<", BinOp::Lt),
            ("<=", BinOp::Le),
            (">", BinOp::Gt),
            (">=", BinOp::Ge),
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
        ];
        Ok(
            if let Some(&(_, op)) = ops.iter().find(|(s, _)| self.is_op(s)) {
                let pos = self.pos;
                self.bump()?;
                let right = self.or()?;
                if ops.iter().any(|(s, _)| self.is_op(s)) {
                    return Err(self.err(self.pos, "chained comparison: write `(a < b) & (b < c)`"));
                }
                self.bin(op, left, right, pos)?
            } else {
                left
            },
        )
    }

    /// A chain of `ops` over operands `next` parses, from the left.
    fn binary(&mut self, ops: &[(&str, BinOp)], next: fn(&mut Self) -> Result<Sub>) -> Result<Sub> {
        let mut left = next(self)?;
        while let Some(&(_, op)) = ops.iter().find(|(s, _)| self.is_op(s)) {
            let pos = self.pos;
            self.bump()?;
            let right = next(self)?;
            left = self.bin(op, left, right, pos)?;
        }
        Ok(left)
    }

    /// A chain of `op` (`&` or `|`, associative) over operands `next` parses, as a balanced
    /// tree: a query of a thousand alternatives is ten levels deep, not a thousand.
    fn logical(&mut self, sym: &str, op: BinOp, next: fn(&mut Self) -> Result<Sub>) -> Result<Sub> {
        let mut items = vec![next(self)?];
        let mut at = Vec::new();
        while self.is_op(sym) {
            at.push(self.pos);
            self.bump()?;
            items.push(next(self)?);
        }
        if items.len() == 1 {
            return Ok(items.remove(0));
        }
        let mut items: Vec<Option<Sub>> = items.into_iter().map(Some).collect();
        self.balance(op, &mut items, &at, 0)
    }

    /// The balanced tree of `op` over `items` (whose first is `items[0]`, the `k`-th
    /// operator between items `k` and `k + 1` at `at[first + k]`).
    fn balance(
        &mut self,
        op: BinOp,
        items: &mut [Option<Sub>],
        at: &[usize],
        first: usize,
    ) -> Result<Sub> {
        if items.len() == 1 {
            // Each operand is taken once.
            let pos = at.get(first).copied().unwrap_or(0);
            return items
                .first_mut()
                .and_then(Option::take)
                .ok_or_else(|| self.err(pos, "operand missing"));
        }
        let mid = items.len() / 2;
        let (l, r) = items.split_at_mut(mid);
        let left = self.balance(op, l, at, first)?;
        let right = self.balance(op, r, at, first + mid)?;
        self.bin(op, left, right, at[first + mid - 1])
    }

    fn or(&mut self) -> Result<Sub> {
        self.logical("|", BinOp::Or, Self::and)
    }

    fn and(&mut self) -> Result<Sub> {
        self.logical("&", BinOp::And, Self::sum)
    }

    fn sum(&mut self) -> Result<Sub> {
        self.binary(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::product)
    }

    fn product(&mut self) -> Result<Sub> {
        self.binary(
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Sub> {
        let pos = self.pos;
        if self.is_op("-") || self.is_op("~") {
            let neg = self.is_op("-");
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(self.too_deep(pos));
            }
            self.bump()?;
            if neg && self.tok == Tok::Pow127 {
                self.depth -= 1;
                self.count(pos)?;
                self.bump()?;
                return Ok(Sub::leaf(Expr::Lit {
                    value: Literal::Int(i128::MIN),
                    pos,
                }));
            }
            let arg = self.unary()?;
            self.depth -= 1;
            // `-5` is the literal -5 (Python's int, exact).
            if let (true, Expr::Lit { value, .. }) = (neg, &arg.e) {
                let folded = match value {
                    Literal::Int(i) => i.checked_neg().map(Literal::Int),
                    Literal::Float(f) => Some(Literal::Float(-f)),
                    _ => None,
                };
                if let Some(value) = folded {
                    return Ok(Sub::leaf(Expr::Lit { value, pos }));
                }
            }
            if arg.h + 1 > MAX_DEPTH {
                return Err(self.too_deep(pos));
            }
            self.count(pos)?;
            let (h, arg) = (arg.h + 1, Box::new(arg.e));
            return Ok(Sub {
                e: if neg {
                    Expr::Neg { arg, pos }
                } else {
                    Expr::Not { arg, pos }
                },
                h,
            });
        }
        if self.is_op("+") {
            return Err(self.err(pos, "unary `+` is not supported"));
        }
        self.atom()
    }

    /// `isnull(column)` / `notnull(column)`, the function's name read.
    fn null_test(&mut self, pos: usize, negated: bool) -> Result<Sub> {
        self.bump()?;
        if self.tok != Tok::LParen {
            return Err(self.err(self.pos, "expected `(` after isnull / notnull"));
        }
        self.bump()?;
        let at = self.pos;
        let Tok::Name(name) = std::mem::replace(&mut self.tok, Tok::End) else {
            return Err(self.err(at, "isnull / notnull take a column"));
        };
        if !self.lex.names.iter().any(|n| *n == name) {
            return Err(self.err(
                at,
                format!(
                    "unknown name {name:?} (columns: {})",
                    self.lex.names.join(", ")
                ),
            ));
        }
        self.bump()?;
        if self.tok != Tok::RParen {
            return Err(self.err(self.pos, "expected `)`: isnull / notnull take one column"));
        }
        self.count(pos)?;
        self.bump()?;
        Ok(Sub::leaf(Expr::IsNull { name, negated, pos }))
    }

    /// `datetime64('text'[, 'unit'])` or `timedelta64([-]n, 'unit')` (`n` may be
    /// `'NaT'`), the function's name read: a literal.
    fn time_literal(&mut self, pos: usize, delta: bool) -> Result<Sub> {
        let what = if delta { "timedelta64" } else { "datetime64" };
        self.bump()?;
        if self.tok != Tok::LParen {
            return Err(self.err(self.pos, format!("expected `(` after {what}")));
        }
        self.bump()?;
        let at = self.pos;
        // The value: a string, or (timedelta64) an integer with its sign.
        let neg = self.is_op("-");
        if neg {
            self.bump()?;
        }
        let first = std::mem::replace(&mut self.tok, Tok::End);
        self.bump()?;
        let unit = if self.is_op(",") {
            self.bump()?;
            let upos = self.pos;
            let Tok::Lit(Literal::Str(code)) = std::mem::replace(&mut self.tok, Tok::End) else {
                return Err(self.err(upos, "expected a unit in quotes, e.g. 'D' or 'ms'"));
            };
            let code = String::from_utf8_lossy(&code).into_owned();
            let unit = TimeUnit::from_code(&code).ok_or_else(|| {
                self.err(
                    upos,
                    format!("unknown unit {code:?} (Y M W D h m s ms us ns ps fs as)"),
                )
            })?;
            self.bump()?;
            Some(unit)
        } else {
            None
        };
        if self.tok != Tok::RParen {
            return Err(self.err(self.pos, format!("expected `)` to close {what}(...)")));
        }
        let value = match (delta, first, unit) {
            (false, Tok::Lit(Literal::Str(s)), unit) if !neg => {
                let text = String::from_utf8_lossy(&s).into_owned();
                let unit = unit.unwrap_or_else(|| datetime::natural_unit(&text));
                let v = datetime::parse_datetime(&text, unit)
                    .map_err(|e| self.err(at, e.to_string()))?;
                (unit, v)
            }
            (false, ..) => {
                return Err(self.err(at, "datetime64 takes a date in quotes, e.g. '2020-01-31'"))
            }
            (true, _, None) => {
                return Err(self.err(
                    self.pos,
                    "timedelta64 needs its unit, e.g. timedelta64(3, 'D')",
                ))
            }
            (true, Tok::Lit(Literal::Str(s)), Some(unit))
                if !neg && s.eq_ignore_ascii_case(b"nat") =>
            {
                (unit, NAT)
            }
            (true, Tok::Lit(Literal::Int(n)), Some(unit)) => {
                let n = if neg { -n } else { n };
                match i64::try_from(n) {
                    Ok(v) if v != NAT => (unit, v),
                    _ => {
                        return Err(self.err(
                            at,
                            format!("{n} {} is out of timedelta64's range", unit.code()),
                        ))
                    }
                }
            }
            (true, ..) => {
                return Err(self.err(
                    at,
                    "timedelta64 takes an integer count (or 'NaT') and a unit",
                ))
            }
        };
        self.count(pos)?;
        self.bump()?;
        Ok(Sub::leaf(Expr::Lit {
            value: Literal::Time {
                delta,
                unit: value.0,
                value: value.1,
            },
            pos,
        }))
    }

    fn atom(&mut self) -> Result<Sub> {
        let pos = self.pos;
        match std::mem::replace(&mut self.tok, Tok::End) {
            Tok::Name(name)
                if (name == "isnull" || name == "notnull")
                    && !self.lex.names.iter().any(|n| *n == name) =>
            {
                self.null_test(pos, name == "notnull")
            }
            Tok::Name(name)
                if (name == "datetime64" || name == "timedelta64")
                    && !self.lex.names.iter().any(|n| *n == name) =>
            {
                self.time_literal(pos, name == "timedelta64")
            }
            Tok::Name(name) => {
                if !self.lex.names.iter().any(|n| *n == name) {
                    return Err(self.err(
                        pos,
                        format!(
                            "unknown name {name:?} (columns: {})",
                            self.lex.names.join(", ")
                        ),
                    ));
                }
                self.count(pos)?;
                self.bump()?;
                Ok(Sub::leaf(Expr::Column { name, pos }))
            }
            Tok::Lit(value) => {
                self.count(pos)?;
                self.bump()?;
                Ok(Sub::leaf(Expr::Lit { value, pos }))
            }
            Tok::Pow127 => {
                self.count(pos)?;
                self.bump()?;
                Ok(Sub::leaf(Expr::Lit {
                    value: Literal::Float(2f64.powi(127)),
                    pos,
                }))
            }
            Tok::LParen => {
                self.parens += 1;
                if self.parens > MAX_PARENS {
                    return Err(self.err(
                        pos,
                        format!("expression too deep (limit {MAX_PARENS} nested parentheses)"),
                    ));
                }
                self.bump()?;
                let e = self.expr()?;
                self.parens -= 1;
                if self.tok != Tok::RParen {
                    return Err(self.err(self.pos, "expected `)`"));
                }
                self.bump()?;
                Ok(e)
            }
            Tok::RParen => Err(self.err(pos, "unexpected `)`")),
            Tok::End => Err(self.err(pos, "unexpected end of expression")),
            Tok::Op(o) => Err(self.err(pos, format!("unexpected `{o}`"))),
        }
    }
}

/// Parses `text`, whose names must be among `names` (column paths).
///
/// # Errors
/// [`Error::InvalidExpression`] with the byte position of the fault; for a text longer than
/// [`MAX_LEN`] bytes, more than [`MAX_NODES`] nodes or more than [`MAX_DEPTH`] levels.
pub fn parse(text: &str, names: &[&str]) -> Result<Expr> {
    if text.len() > MAX_LEN {
        return Err(error(
            text,
            0,
            format!(
                "expression too long ({} bytes, limit {MAX_LEN})",
                text.len()
            ),
        ));
    }
    let mut p = Parser {
        lex: Lexer {
            text,
            bytes: text.as_bytes(),
            at: 0,
            names,
        },
        tok: Tok::End,
        pos: 0,
        depth: 0,
        parens: 0,
        nodes: 0,
    };
    p.bump()?;
    let e = p.expr()?.e;
    match &p.tok {
        Tok::End => Ok(e),
        Tok::RParen => Err(p.err(p.pos, "unbalanced `)`")),
        _ => Err(p.err(p.pos, "expected an operator or the end of the expression")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos_of(text: &str, names: &[&str]) -> (usize, String) {
        match parse(text, names) {
            Err(Error::InvalidExpression {
                position, reason, ..
            }) => (position, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn precedence_follows_python() {
        let names = ["a", "b", "p/x"];
        let e = parse("(a > 1) & (b < 2) | ~(p/x == 3)", &names).unwrap();
        assert_eq!(e.to_string(), "(((`a` > 1) & (`b` < 2)) | (~(`p/x` == 3)))");
        let e = parse("a + b * 2 - -3 % b", &names).unwrap();
        assert_eq!(e.to_string(), "((`a` + (`b` * 2)) - (-3 % `b`))");
        // Not a column: `a / b`.
        assert_eq!(parse("a/b", &names).unwrap().to_string(), "(`a` / `b`)");
        assert_eq!(e.columns(), vec!["a", "b"]);
        assert_eq!(
            parse("b'x\\'y' == \"z\"", &names).unwrap().to_string(),
            "(b'x\\'y' == b'z')"
        );
        assert_eq!(
            parse("-9223372036854775807 < a", &names)
                .unwrap()
                .to_string(),
            "(-9223372036854775807 < `a`)"
        );
    }

    #[test]
    fn errors_point_at_the_fault() {
        let names = ["a", "b"];
        assert_eq!(pos_of("a > 1 & c", &names).0, 8);
        assert_eq!(pos_of("a = 1", &names).0, 2);
        assert_eq!(pos_of("(a > 1", &names).0, 6);
        assert_eq!(pos_of("a < b < 3", &names).0, 6);
        assert_eq!(pos_of("a > 'x", &names).0, 4);
        assert_eq!(pos_of("a > 1)", &names).0, 5);
        assert_eq!(pos_of("a $ 1", &names).0, 2);
        assert_eq!(pos_of("", &names).0, 0);
        assert_eq!(pos_of("1.2.3", &names).0, 3);
        let deep = "(".repeat(1000) + "a" + &")".repeat(1000);
        assert!(parse(&deep, &names).is_err());
    }

    /// Runs `f` on a thread of 256 KiB of stack: a walk that recursed once per operator of
    /// a long chain would overflow it (and abort the test binary).
    fn on_a_small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    /// Every walk of a tree at the limit: parsing, type checking, the statistics' proof,
    /// evaluation, the column list, printing, cloning, comparing and dropping.
    fn walk_all(e: &Expr) {
        use crate::query::eval::{check, eval_mask, Frame, Raw, Ty, IK};
        use crate::query::proof::abs_eval;
        use crate::stats::{ChunkStats, StatValue};
        let ty = check("", e, &|_| Some(Ty::Int(IK::I64))).unwrap();
        assert_eq!(ty, Ty::Bool);
        let stats = ChunkStats {
            min: Some(StatValue::Int(1)),
            max: Some(StatValue::Int(2)),
            nan_count: 0,
            sum: None,
        };
        abs_eval(e, &|_| Some((stats, Ty::Int(IK::I64))));
        let frame = Frame {
            n: 3,
            cols: [("x".to_string(), Raw::I64(vec![0, 1, 2]))].into(),
            valid: Default::default(),
        };
        eval_mask(e, &frame);
        assert_eq!(e.columns(), vec!["x"]);
        assert!(e.to_string().len() > 100);
        let copy = e.clone();
        assert_eq!(&copy, e);
        drop(copy);
    }

    fn too(text: &str) -> String {
        match parse(text, &["x"]) {
            Err(Error::InvalidExpression { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn chains_at_the_limit_walk_on_a_small_stack() {
        on_a_small_stack(|| {
            // A chain of MAX_DEPTH - 2 `+`: the sum is MAX_DEPTH - 1 levels, the comparison
            // MAX_DEPTH.
            let sum = "x".to_string() + &" + x".repeat(MAX_DEPTH - 2);
            let e = parse(&format!("{sum} > 1"), &["x"]).unwrap();
            walk_all(&e);
            // Unary minus and parentheses nested as deep as allowed.
            let neg = "-".repeat(MAX_DEPTH - 2) + "x";
            walk_all(&parse(&format!("{neg} > 1"), &["x"]).unwrap());
            let paren = "(".repeat(MAX_PARENS) + "x > 1" + &")".repeat(MAX_PARENS);
            parse(&paren, &["x"]).unwrap();
            // Parentheses nested around a chain.
            let nested = (0..MAX_PARENS).fold("x".to_string(), |e, _| format!("({e} + x)"));
            walk_all(&parse(&format!("{nested} > 1"), &["x"]).unwrap());
            let not = "~".repeat(MAX_DEPTH - 2) + "(x > 1)";
            walk_all(&parse(&not, &["x"]).unwrap());
            // A long chain of `|` is balanced: 2,000 alternatives are a dozen levels.
            let alts: Vec<String> = (0..2000).map(|i| format!("(x == {i})")).collect();
            walk_all(&parse(&alts.join(" | "), &["x"]).unwrap());
            let all: Vec<String> = (0..2000).map(|i| format!("(x != {i})")).collect();
            walk_all(&parse(&all.join(" & "), &["x"]).unwrap());
        });
    }

    #[test]
    fn chains_past_the_limit_are_refused_on_a_small_stack() {
        on_a_small_stack(|| {
            let sum = "x".to_string() + &" + x".repeat(MAX_DEPTH - 1);
            assert!(too(&format!("{sum} > 1")).contains("too deep"));
            // The issue's 60 KB chain, and longer ones of each operator.
            for op in [" + ", " - ", " * ", " / ", " % "] {
                let long = "x".to_string() + &format!("{op}x").repeat(15_000);
                assert!(too(&format!("{long} > 1")).contains("too deep"), "{op}");
            }
            let neg = "-".repeat(MAX_DEPTH - 1) + "x";
            assert!(too(&format!("{neg} > 1")).contains("too deep"));
            let not = "~".repeat(MAX_DEPTH - 1) + "(x > 1)";
            assert!(too(&not).contains("too deep"));
            let paren = "(".repeat(MAX_PARENS + 1) + "x > 1" + &")".repeat(MAX_PARENS + 1);
            assert!(too(&paren).contains("too deep"));
            let paren = "(".repeat(100_000) + "x > 1" + &")".repeat(100_000);
            assert!(too(&paren).contains("too deep"));
            // 20,000 alternatives: 60,000 nodes.
            let alts: Vec<String> = (0..20_000).map(|i| format!("(x == {i})")).collect();
            let reason = too(&alts.join(" | "));
            assert!(
                reason.contains("too long") && reason.contains("10000"),
                "{reason}"
            );
            let ors = "x > 1".to_string() + &" | x > 1".repeat(20_000);
            assert!(too(&ors).contains("chained comparison"));
            let ors = "(x > 1)".to_string() + &" | (x > 1)".repeat(20_000);
            assert!(too(&ors).contains("too long"));
            let ands = "(x > 1)".to_string() + &" & (x > 1)".repeat(20_000);
            assert!(too(&ands).contains("too long"));
            let text = format!("x > {}", "1".repeat(MAX_LEN));
            assert!(too(&text).contains("too long"));
        });
    }

    #[test]
    fn integers_are_exact_within_i128() {
        let lit = |t: &str| match parse(&format!("x == {t}"), &["x"]).unwrap() {
            Expr::Bin { right, .. } => match *right {
                Expr::Lit { value, .. } => value,
                e => panic!("{e:?}"),
            },
            e => panic!("{e:?}"),
        };
        assert_eq!(lit("18446744073709551615"), Literal::Int(u64::MAX.into()));
        assert_eq!(lit("-9223372036854775808"), Literal::Int(i64::MIN.into()));
        assert_eq!(lit("18446744073709551616"), Literal::Int(1 << 64));
        assert_eq!(lit("-9223372036854775809"), Literal::Int(-(1 << 63) - 1));
        assert_eq!(
            lit("170141183460469231731687303715884105727"),
            Literal::Int(i128::MAX)
        );
        assert_eq!(
            lit("-170141183460469231731687303715884105728"),
            Literal::Int(i128::MIN)
        );
        // Past i128: floats.
        assert_eq!(
            lit("170141183460469231731687303715884105728"),
            Literal::Float(2f64.powi(127))
        );
        assert_eq!(
            lit("-170141183460469231731687303715884105729"),
            Literal::Float(-(2f64.powi(127)))
        );
        let e = parse("x == 18446744073709551616", &["x"]).unwrap();
        assert_eq!(e.to_string(), "(`x` == 18446744073709551616)");
    }
}
