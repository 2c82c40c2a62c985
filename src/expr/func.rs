//! The functions an expression may call: numpy's ufuncs by their numpy names (with the
//! aliases numexpr and Python use), and `where(cond, x, y)`.

/// A function of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    /// `sin`
    Sin,
    /// `cos`
    Cos,
    /// `tan`
    Tan,
    /// `arcsin` (`asin`)
    Arcsin,
    /// `arccos` (`acos`)
    Arccos,
    /// `arctan` (`atan`)
    Arctan,
    /// `sinh`
    Sinh,
    /// `cosh`
    Cosh,
    /// `tanh`
    Tanh,
    /// `arcsinh` (`asinh`)
    Arcsinh,
    /// `arccosh` (`acosh`)
    Arccosh,
    /// `arctanh` (`atanh`)
    Arctanh,
    /// `exp`
    Exp,
    /// `expm1`
    Expm1,
    /// `log`
    Log,
    /// `log10`
    Log10,
    /// `log2`
    Log2,
    /// `log1p`
    Log1p,
    /// `sqrt`
    Sqrt,
    /// `abs` (`absolute`)
    Abs,
    /// `floor`
    Floor,
    /// `ceil`
    Ceil,
    /// `trunc`
    Trunc,
    /// `negative`
    Negative,
    /// `square`
    Square,
    /// `isnan`
    Isnan,
    /// `isinf`
    Isinf,
    /// `isfinite`
    Isfinite,
    /// `arctan2` (`atan2`)
    Arctan2,
    /// `hypot`
    Hypot,
    /// `maximum` (NaN wins, as numpy)
    Maximum,
    /// `minimum` (NaN wins, as numpy)
    Minimum,
    /// `power` (`pow`), the same as `**`
    Power,
    /// `where(cond, x, y)`: `x` where `cond` is true, else `y`
    Where,
}

const NAMES: &[(&str, Func)] = &[
    ("sin", Func::Sin),
    ("cos", Func::Cos),
    ("tan", Func::Tan),
    ("arcsin", Func::Arcsin),
    ("asin", Func::Arcsin),
    ("arccos", Func::Arccos),
    ("acos", Func::Arccos),
    ("arctan", Func::Arctan),
    ("atan", Func::Arctan),
    ("sinh", Func::Sinh),
    ("cosh", Func::Cosh),
    ("tanh", Func::Tanh),
    ("arcsinh", Func::Arcsinh),
    ("asinh", Func::Arcsinh),
    ("arccosh", Func::Arccosh),
    ("acosh", Func::Arccosh),
    ("arctanh", Func::Arctanh),
    ("atanh", Func::Arctanh),
    ("exp", Func::Exp),
    ("expm1", Func::Expm1),
    ("log", Func::Log),
    ("log10", Func::Log10),
    ("log2", Func::Log2),
    ("log1p", Func::Log1p),
    ("sqrt", Func::Sqrt),
    ("abs", Func::Abs),
    ("absolute", Func::Abs),
    ("floor", Func::Floor),
    ("ceil", Func::Ceil),
    ("trunc", Func::Trunc),
    ("negative", Func::Negative),
    ("square", Func::Square),
    ("isnan", Func::Isnan),
    ("isinf", Func::Isinf),
    ("isfinite", Func::Isfinite),
    ("arctan2", Func::Arctan2),
    ("atan2", Func::Arctan2),
    ("hypot", Func::Hypot),
    ("maximum", Func::Maximum),
    ("minimum", Func::Minimum),
    ("power", Func::Power),
    ("pow", Func::Power),
    ("where", Func::Where),
];

impl Func {
    /// The function of a name, numpy's or an alias.
    pub fn from_name(name: &str) -> Option<Func> {
        NAMES.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
    }

    /// Its numpy name.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |&(n, _)| n)
    }

    /// The names an expression may call, for error messages.
    pub fn known() -> String {
        NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }

    /// How many arguments it takes.
    pub fn arity(self) -> std::ops::RangeInclusive<usize> {
        match self {
            Func::Where => 3..=3,
            Func::Arctan2 | Func::Hypot | Func::Maximum | Func::Minimum | Func::Power => 2..=2,
            _ => 1..=1,
        }
    }

    pub(crate) fn arity_text(self) -> String {
        let r = self.arity();
        r.start().to_string()
    }

    /// Whether the result is a float computed from floats (ints are converted first, as
    /// numpy's loops do: `sin(int32)` is float64).
    pub(crate) fn is_float_math(self) -> bool {
        !matches!(
            self,
            Func::Abs
                | Func::Floor
                | Func::Ceil
                | Func::Trunc
                | Func::Negative
                | Func::Square
                | Func::Isnan
                | Func::Isinf
                | Func::Isfinite
                | Func::Maximum
                | Func::Minimum
                | Func::Power
                | Func::Where
        )
    }

    /// The float function itself (for [`Func::is_float_math`] functions).
    pub(crate) fn float1(self) -> fn(f64) -> f64 {
        match self {
            Func::Sin => f64::sin,
            Func::Cos => f64::cos,
            Func::Tan => f64::tan,
            Func::Arcsin => f64::asin,
            Func::Arccos => f64::acos,
            Func::Arctan => f64::atan,
            Func::Sinh => f64::sinh,
            Func::Cosh => f64::cosh,
            Func::Tanh => f64::tanh,
            Func::Arcsinh => f64::asinh,
            Func::Arccosh => f64::acosh,
            Func::Arctanh => f64::atanh,
            Func::Exp => f64::exp,
            Func::Expm1 => f64::exp_m1,
            Func::Log => f64::ln,
            Func::Log10 => f64::log10,
            Func::Log2 => f64::log2,
            Func::Log1p => f64::ln_1p,
            Func::Sqrt => f64::sqrt,
            _ => f64::abs,
        }
    }

    /// The two-argument float function (for [`Func::is_float_math`] functions of two).
    pub(crate) fn float2(self) -> fn(f64, f64) -> f64 {
        match self {
            Func::Arctan2 => f64::atan2,
            _ => f64::hypot,
        }
    }
}
