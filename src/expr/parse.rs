//! The text of an array expression: numpy's operators with Python's precedence, function
//! calls, names bound to operands, and Python literals.
//!
//! ```text
//! expr    := bor [cmp_op bor]            (one comparison: `a < b < c` is refused)
//! bor     := band ('|' band)*
//! band    := sum ('&' sum)*
//! sum     := product (('+' | '-') product)*
//! product := unary (('*' | '/' | '//' | '%') unary)*
//! unary   := ('-' | '+' | '~') unary | power
//! power   := atom ['**' unary]           (right-associative, binds tighter than unary on its left)
//! atom    := number | True | False | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! An expression may nest at most [`MAX_DEPTH`] levels and hold at most [`MAX_LEN`] bytes.

use super::func::Func;
use crate::error::{Error, Result};

/// Deepest nesting of an expression's tree (each level is one recursion of every walk).
pub const MAX_DEPTH: usize = 100;
/// Longest expression text, in bytes.
pub const MAX_LEN: usize = 1 << 16;

/// A literal: Python's `bool`, `int` or `float`, "weak" in numpy 2's promotion (NEP 50).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lit {
    /// `True` / `False`.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A float.
    Float(f64),
}

/// A unary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `~x`: logical not of booleans, bitwise not of integers.
    Not,
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
    /// `/` (true division)
    Div,
    /// `//` (floor division)
    FloorDiv,
    /// `%` (the sign of the divisor, as numpy's `remainder`)
    Rem,
    /// `**`
    Pow,
    /// `&`
    And,
    /// `|`
    Or,
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
}

impl BinOp {
    /// Whether this is a comparison (its result is boolean).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }

    /// The operator as written.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Rem => "%",
            BinOp::Pow => "**",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
        }
    }
}

/// A parsed expression; `pos` is where each node starts in the text (a byte offset).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// An operand, by its index in the names the expression was parsed with.
    Var {
        /// Index into the names.
        index: usize,
        /// Where it is.
        pos: usize,
    },
    /// A literal.
    Lit {
        /// Its value.
        value: Lit,
        /// Where it is.
        pos: usize,
    },
    /// A unary operator.
    Unary {
        /// The operator.
        op: UnOp,
        /// Its operand.
        arg: Box<Node>,
        /// Where the operator is.
        pos: usize,
    },
    /// A binary operator.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        left: Box<Node>,
        /// Right operand.
        right: Box<Node>,
        /// Where the operator is.
        pos: usize,
    },
    /// A function call.
    Call {
        /// The function.
        func: Func,
        /// Its arguments.
        args: Vec<Node>,
        /// Where the function's name is.
        pos: usize,
    },
}

impl Node {
    /// Where the node starts in the text.
    pub fn pos(&self) -> usize {
        match self {
            Node::Var { pos, .. }
            | Node::Lit { pos, .. }
            | Node::Unary { pos, .. }
            | Node::Binary { pos, .. }
            | Node::Call { pos, .. } => *pos,
        }
    }
}

/// An [`Error::InvalidExpression`] at `pos` of `text`.
pub(crate) fn error(text: &str, pos: usize, reason: impl Into<String>) -> Error {
    Error::InvalidExpression {
        expr: text.to_string(),
        position: pos,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Lit),
    Name(String),
    Op(&'static str),
    End,
}

/// Operators, longest first so that `**` is not read as `*`.
const OPS: [&str; 20] = [
    "**", "//", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "&", "|", "~", "<", ">", "(", ")",
    ",", "^",
];

struct Parser<'t> {
    text: &'t str,
    names: &'t [&'t str],
    at: usize,
    tok: Tok,
    tok_pos: usize,
    depth: usize,
}

impl<'t> Parser<'t> {
    fn err(&self, pos: usize, reason: impl Into<String>) -> Error {
        error(self.text, pos, reason)
    }

    fn bump(&mut self) -> Result<()> {
        let b = self.text.as_bytes();
        while self.at < b.len() && b[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
        self.tok_pos = self.at;
        if self.at >= b.len() {
            self.tok = Tok::End;
            return Ok(());
        }
        let c = b[self.at];
        if c.is_ascii_digit() || (c == b'.' && b.get(self.at + 1).is_some_and(u8::is_ascii_digit)) {
            return self.number();
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = self.at;
            while self.at < b.len() && (b[self.at].is_ascii_alphanumeric() || b[self.at] == b'_') {
                self.at += 1;
            }
            self.tok = Tok::Name(self.text[start..self.at].to_string());
            return Ok(());
        }
        for op in OPS {
            if self.text[self.at..].starts_with(op) {
                if op == "^" {
                    return Err(self.err(self.at, "`^` (exclusive or) is not supported"));
                }
                self.at += op.len();
                self.tok = Tok::Op(op);
                return Ok(());
            }
        }
        let ch = self.text[self.at..].chars().next().unwrap_or('?');
        Err(self.err(self.at, format!("unexpected character {ch:?}")))
    }

    fn number(&mut self) -> Result<()> {
        let b = self.text.as_bytes();
        let start = self.at;
        let mut float = false;
        while self.at < b.len() {
            let c = b[self.at];
            if c.is_ascii_digit() || c == b'_' {
                self.at += 1;
            } else if c == b'.' {
                float = true;
                self.at += 1;
            } else if (c == b'e' || c == b'E')
                && b.get(self.at + 1).is_some_and(|d| {
                    d.is_ascii_digit()
                        || ((*d == b'+' || *d == b'-')
                            && b.get(self.at + 2).is_some_and(u8::is_ascii_digit))
                })
            {
                float = true;
                self.at += 2;
            } else {
                break;
            }
        }
        let s: String = self.text[start..self.at]
            .chars()
            .filter(|&c| c != '_')
            .collect();
        let lit = if float {
            s.parse::<f64>()
                .map(Lit::Float)
                .map_err(|_| self.err(start, format!("bad number {s:?}")))?
        } else {
            match s.parse::<i128>() {
                Ok(i) => Lit::Int(i),
                Err(_) => return Err(self.err(start, format!("integer {s} is too large"))),
            }
        };
        self.tok = Tok::Num(lit);
        Ok(())
    }

    fn is(&self, op: &str) -> bool {
        matches!(&self.tok, Tok::Op(o) if *o == op)
    }

    fn deeper(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(
                self.tok_pos,
                format!("expression too deep (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Node> {
        self.deeper()?;
        let left = self.bor()?;
        let cmp = [
            ("<", BinOp::Lt),
            ("<=", BinOp::Le),
            (">", BinOp::Gt),
            (">=", BinOp::Ge),
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
        ];
        let out = match cmp.iter().find(|(s, _)| self.is(s)) {
            Some(&(_, op)) => {
                let pos = self.tok_pos;
                self.bump()?;
                let right = self.bor()?;
                if cmp.iter().any(|(s, _)| self.is(s)) {
                    return Err(self.err(
                        self.tok_pos,
                        "chained comparisons are not supported: write `(a < b) & (b < c)`",
                    ));
                }
                Node::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                    pos,
                }
            }
            None => left,
        };
        self.depth -= 1;
        Ok(out)
    }

    fn left_assoc(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Self) -> Result<Node>,
    ) -> Result<Node> {
        let mut left = next(self)?;
        let mut levels = 0;
        while let Some(&(_, op)) = ops.iter().find(|(s, _)| self.is(s)) {
            let pos = self.tok_pos;
            self.bump()?;
            let right = next(self)?;
            levels += 1;
            if levels + self.depth > MAX_DEPTH {
                return Err(self.err(
                    pos,
                    format!("expression too deep (more than {MAX_DEPTH} levels)"),
                ));
            }
            left = Node::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
                pos,
            };
        }
        Ok(left)
    }

    fn bor(&mut self) -> Result<Node> {
        self.left_assoc(&[("|", BinOp::Or)], Self::band)
    }

    fn band(&mut self) -> Result<Node> {
        self.left_assoc(&[("&", BinOp::And)], Self::sum)
    }

    fn sum(&mut self) -> Result<Node> {
        self.left_assoc(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::product)
    }

    fn product(&mut self) -> Result<Node> {
        self.left_assoc(
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("/", BinOp::Div),
                ("%", BinOp::Rem),
            ],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Node> {
        let pos = self.tok_pos;
        let op = if self.is("-") {
            Some(Some(UnOp::Neg))
        } else if self.is("~") {
            Some(Some(UnOp::Not))
        } else if self.is("+") {
            Some(None)
        } else {
            None
        };
        match op {
            None => self.power(),
            Some(op) => {
                self.deeper()?;
                self.bump()?;
                let arg = self.unary()?;
                self.depth -= 1;
                Ok(match (op, arg) {
                    (None, arg) => arg,
                    // `-3` is the literal -3 (Python folds it too), so that `-128` is an int8.
                    (
                        Some(UnOp::Neg),
                        Node::Lit {
                            value: Lit::Int(i), ..
                        },
                    ) => Node::Lit {
                        value: Lit::Int(-i),
                        pos,
                    },
                    (
                        Some(UnOp::Neg),
                        Node::Lit {
                            value: Lit::Float(f),
                            ..
                        },
                    ) => Node::Lit {
                        value: Lit::Float(-f),
                        pos,
                    },
                    (Some(op), arg) => Node::Unary {
                        op,
                        arg: Box::new(arg),
                        pos,
                    },
                })
            }
        }
    }

    fn power(&mut self) -> Result<Node> {
        let base = self.atom()?;
        if self.is("**") {
            let pos = self.tok_pos;
            self.deeper()?;
            self.bump()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Binary {
                op: BinOp::Pow,
                left: Box::new(base),
                right: Box::new(exp),
                pos,
            });
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Node> {
        let pos = self.tok_pos;
        match self.tok.clone() {
            Tok::Num(value) => {
                self.bump()?;
                Ok(Node::Lit { value, pos })
            }
            Tok::Name(name) => {
                self.bump()?;
                if self.is("(") {
                    let func = Func::from_name(&name).ok_or_else(|| {
                        self.err(
                            pos,
                            format!("unknown function {name:?} (known: {})", Func::known()),
                        )
                    })?;
                    self.deeper()?;
                    self.bump()?;
                    let mut args = vec![self.expr()?];
                    while self.is(",") {
                        self.bump()?;
                        args.push(self.expr()?);
                    }
                    if !self.is(")") {
                        return Err(self.err(self.tok_pos, "expected `,` or `)`"));
                    }
                    self.bump()?;
                    self.depth -= 1;
                    if !func.arity().contains(&args.len()) {
                        return Err(self.err(
                            pos,
                            format!(
                                "{name} takes {} argument(s), {} given",
                                func.arity_text(),
                                args.len()
                            ),
                        ));
                    }
                    return Ok(Node::Call { func, args, pos });
                }
                match name.as_str() {
                    "True" => {
                        return Ok(Node::Lit {
                            value: Lit::Bool(true),
                            pos,
                        })
                    }
                    "False" => {
                        return Ok(Node::Lit {
                            value: Lit::Bool(false),
                            pos,
                        })
                    }
                    "inf" => {
                        return Ok(Node::Lit {
                            value: Lit::Float(f64::INFINITY),
                            pos,
                        })
                    }
                    "nan" => {
                        return Ok(Node::Lit {
                            value: Lit::Float(f64::NAN),
                            pos,
                        })
                    }
                    _ => {}
                }
                match self.names.iter().position(|n| *n == name) {
                    Some(index) => Ok(Node::Var { index, pos }),
                    None => Err(self.err(
                        pos,
                        format!(
                            "unknown name {name:?} (operands: {})",
                            if self.names.is_empty() {
                                "none".to_string()
                            } else {
                                self.names.join(", ")
                            }
                        ),
                    )),
                }
            }
            Tok::Op("(") => {
                self.deeper()?;
                self.bump()?;
                let e = self.expr()?;
                if !self.is(")") {
                    return Err(self.err(self.tok_pos, "expected `)`"));
                }
                self.bump()?;
                self.depth -= 1;
                Ok(e)
            }
            Tok::End => Err(self.err(pos, "unexpected end of expression")),
            Tok::Op(o) => Err(self.err(pos, format!("unexpected `{o}`"))),
        }
    }
}

/// Parses `text`, its names bound to the operands `names` (a name's index in `names` is its
/// [`Node::Var`] index).
///
/// # Errors
/// [`Error::InvalidExpression`] naming the position of the fault: bad syntax, an unknown
/// name or function, a wrong number of arguments, a tree deeper than [`MAX_DEPTH`] or a text
/// longer than [`MAX_LEN`].
pub fn parse(text: &str, names: &[&str]) -> Result<Node> {
    if text.len() > MAX_LEN {
        return Err(error(
            text,
            0,
            format!("expression too long (more than {MAX_LEN} bytes)"),
        ));
    }
    let mut p = Parser {
        text,
        names,
        at: 0,
        tok: Tok::End,
        tok_pos: 0,
        depth: 0,
    };
    p.bump()?;
    let e = p.expr()?;
    if p.tok != Tok::End {
        return Err(p.err(p.tok_pos, "unexpected text after the expression"));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(n: &Node, names: &[&str]) -> String {
        match n {
            Node::Var { index, .. } => names[*index].to_string(),
            Node::Lit { value, .. } => format!("{value:?}"),
            Node::Unary { op, arg, .. } => format!("({op:?} {})", show(arg, names)),
            Node::Binary {
                op, left, right, ..
            } => {
                format!(
                    "({} {} {})",
                    show(left, names),
                    op.symbol(),
                    show(right, names)
                )
            }
            Node::Call { func, args, .. } => format!(
                "{}({})",
                func.name(),
                args.iter()
                    .map(|a| show(a, names))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    #[test]
    fn precedence_follows_python() {
        let names = ["a", "b", "c"];
        let p = |t: &str| show(&parse(t, &names).unwrap(), &names);
        assert_eq!(p("a * b + sin(c)"), "((a * b) + sin(c))");
        assert_eq!(p("-a ** 2"), "(Neg (a ** Int(2)))");
        assert_eq!(p("a ** -b"), "(a ** (Neg b))");
        assert_eq!(p("a ** b ** c"), "(a ** (b ** c))");
        assert_eq!(p("a < b | c"), "(a < (b | c))");
        assert_eq!(p("a // b % c"), "((a // b) % c)");
        assert_eq!(p("where(a > 0, b, -1)"), "where((a > Int(0)), b, Int(-1))");
        assert_eq!(p("a - -2.5e1"), "(a - Float(-25.0))");
    }

    #[test]
    fn errors_name_the_fault() {
        let names = ["a"];
        let pos = |t: &str| match parse(t, &names) {
            Err(Error::InvalidExpression {
                position, reason, ..
            }) => (position, reason),
            other => panic!("{other:?}"),
        };
        assert_eq!(pos("a + b").0, 4);
        assert!(pos("a + b").1.contains("unknown name"));
        assert!(pos("foo(a)").1.contains("unknown function"));
        assert!(pos("sin(a, a)").1.contains("argument"));
        assert!(pos("a < a < a").1.contains("chained"));
        assert!(pos("(a").1.contains("`)`"));
        assert!(pos(&"(".repeat(500)).1.contains("too deep"));
        assert!(pos(&vec!["a"; 300].join("+")).1.contains("too deep"));
    }
}
