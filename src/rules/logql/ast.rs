//! The syntax tree of a LogQL metric query, each node with the span of
//! source text it came from: what the parser builds and the translator
//! reads.

use std::fmt;

/// A parse error: where and what.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// Byte offset in the expression.
    pub at: usize,
    /// What was expected or found.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.at + 1, self.message)
    }
}

/// A byte range of the expression.
pub type Span = (usize, usize);

/// A metric expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number.
    Num(f64),
    /// `count_over_time({…} |= "x" [5m])` and the other range functions.
    Range(RangeAgg),
    /// `sum by (l) (…)` and the other vector aggregations.
    Agg(Agg),
    /// `a > 5`, `a / on() group_left b`, `a and b`.
    Bin(Box<Bin>),
    /// A function the translator has no counterpart for (`vector`,
    /// `label_replace`, a recorded series' name).
    Other(String, Span),
}

/// A range aggregation over a log query.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeAgg {
    /// Function name (`count_over_time`, `rate`, …).
    pub func: String,
    /// The log query.
    pub log: LogExpr,
    /// The range, in nanoseconds.
    pub range_ns: i64,
    /// `offset …`, as written.
    pub offset: Option<String>,
    /// A leading parameter (`quantile_over_time(0.99, …)`).
    pub param: Option<f64>,
    /// A grouping written on the range function itself (unwrapped ranges).
    pub grouping: Option<Grouping>,
    /// Where it stands.
    pub span: Span,
}

/// A vector aggregation.
#[derive(Debug, Clone, PartialEq)]
pub struct Agg {
    /// `sum`, `count`, `max`, …
    pub op: String,
    /// `by (…)` / `without (…)`.
    pub grouping: Option<Grouping>,
    /// `topk(5, …)`'s parameter.
    pub param: Option<f64>,
    /// The aggregated expression.
    pub inner: Box<Expr>,
    /// Where it stands.
    pub span: Span,
}

/// `by (a, b)` or `without (a)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    /// `without` rather than `by`.
    pub without: bool,
    /// The labels.
    pub labels: Vec<String>,
}

/// A binary operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    /// The operator.
    pub op: BinOp,
    /// Left side.
    pub lhs: Expr,
    /// Right side.
    pub rhs: Expr,
    /// The `bool` modifier of a comparison.
    pub bool_mod: bool,
    /// `on (…)` / `ignoring (…)` and `group_left` / `group_right`.
    pub matching: Option<Matching>,
    /// Where it stands.
    pub span: Span,
}

/// Vector matching of a binary operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Matching {
    /// `on` rather than `ignoring`.
    pub on: bool,
    /// Its labels.
    pub labels: Vec<String>,
    /// `group_left` (true) or `group_right` (false), if written.
    pub group_left: Option<bool>,
}

/// Binary operators, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `or`
    Or,
    /// `and`
    And,
    /// `unless`
    Unless,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `^`
    Pow,
}

impl BinOp {
    /// Binding strength: higher binds tighter.
    pub fn prec(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And | BinOp::Unless => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div | BinOp::Mod => 5,
            BinOp::Pow => 6,
        }
    }

    /// Whether it compares.
    pub fn is_comparison(self) -> bool {
        self.prec() == 3
    }
}

/// A log query: stream selector and pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct LogExpr {
    /// The stream selector's matchers.
    pub selector: Vec<LabelMatcher>,
    /// The pipeline stages in order.
    pub stages: Vec<Stage>,
    /// Where it stands.
    pub span: Span,
}

/// `name op "value"` in a stream selector.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelMatcher {
    /// Label name.
    pub name: String,
    /// Operator.
    pub op: MatchOp,
    /// Value (a regex for `=~` / `!~`).
    pub value: String,
}

/// Operators of selectors and string label filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `=~`
    Re,
    /// `!~`
    NotRe,
}

/// A pipeline stage.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// A line filter; several values are joined by `or`.
    Line {
        /// The operator.
        op: LineOp,
        /// The values (`ip("…")` values are [`LineValue::Ip`]).
        values: Vec<LineValue>,
        /// Where it stands.
        span: Span,
    },
    /// `| json`, `| logfmt`, `| unpack` (with `name="path"` parameters) and
    /// `| regexp "…"`, `| pattern "…"` (with their expression).
    Parser {
        /// Parser name.
        kind: String,
        /// `name="path"` parameters, or a bare name (path = name).
        params: Vec<(String, String)>,
        /// The regexp or pattern.
        arg: Option<String>,
        /// Where it stands.
        span: Span,
    },
    /// A label filter expression.
    Labels(LabelExpr, Span),
    /// A stage the translator does not carry, by name.
    Other(String, Span),
}

/// Line filter operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOp {
    /// `|=`
    Contains,
    /// `!=`
    NotContains,
    /// `|~`
    Regex,
    /// `!~`
    NotRegex,
    /// `|>`
    Pattern,
    /// `!>`
    NotPattern,
}

/// A line filter value.
#[derive(Debug, Clone, PartialEq)]
pub enum LineValue {
    /// A string.
    Text(String),
    /// `ip("…")`.
    Ip(String),
}

/// A label filter expression.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelExpr {
    /// Both.
    And(Box<LabelExpr>, Box<LabelExpr>),
    /// Either.
    Or(Box<LabelExpr>, Box<LabelExpr>),
    /// One comparison.
    Cmp {
        /// Label name.
        name: String,
        /// Operator.
        op: CmpOp,
        /// Value.
        value: LabelValue,
    },
}

/// Label filter comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=` or `==`
    Eq,
    /// `!=`
    Ne,
    /// `=~`
    Re,
    /// `!~`
    NotRe,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

/// A label filter's value.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelValue {
    /// A string.
    Str(String),
    /// A number.
    Num(f64),
    /// A duration or byte size (`10s`, `20MB`) or `ip("…")`, as written.
    Unit(String),
}
