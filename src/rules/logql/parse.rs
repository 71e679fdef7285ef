//! A LogQL parser: the metric queries of Loki's ruler (range aggregations
//! over log queries, vector aggregations, binary operators with vector
//! matching) into a syntax tree, each node keeping the span of source text
//! it came from, so a rule that cannot be translated can say which part.
//! Stages the translator does not carry (`line_format`, `unwrap`, …) are
//! parsed and kept as [`Stage::Other`], not rejected here: the translator
//! names them in its reason.

use super::ast::*;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    /// A number with a unit: `5m`, `1h30m`, `20MB`.
    Unit(String),
    P(&'static str),
}

const PUNCT: &[&str] = &[
    "|=", "|~", "|>", "!=", "!~", "!>", "=~", "==", ">=", "<=", "{", "}", "(", ")", "[", "]", ",",
    "|", "=", ">", "<", "+", "-", "*", "/", "%", "^",
];

fn lex(src: &str) -> Result<Vec<(Tok, Span)>, ParseError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |at: usize, m: &str| ParseError {
        at,
        message: m.to_string(),
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        if c == b'"' || c == b'\'' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&d) = b.get(i) else {
                    return Err(err(start, "unterminated string"));
                };
                if d == c {
                    i += 1;
                    break;
                }
                if d == b'\\' {
                    let Some(e) = src.get(i + 1..).and_then(|r| r.chars().next()) else {
                        return Err(err(i, "unterminated escape"));
                    };
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                    i += 1 + e.len_utf8();
                    continue;
                }
                let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                s.push(ch);
                i += ch.len_utf8();
            }
            out.push((Tok::Str(s), (start, i)));
            continue;
        }
        if c == b'`' {
            let Some(end) = src[i + 1..].find('`') else {
                return Err(err(start, "unterminated raw string"));
            };
            out.push((
                Tok::Str(src[i + 1..i + 1 + end].to_string()),
                (start, i + end + 2),
            ));
            i += end + 2;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len()
                && (b[i] == b'e' || b[i] == b'E')
                && b.get(i + 1)
                    .is_some_and(|d| d.is_ascii_digit() || *d == b'-' || *d == b'+')
                && !src[start..i].contains('e')
            {
                i += 2;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && b[i].is_ascii_alphabetic() {
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                out.push((Tok::Unit(src[start..i].to_string()), (start, i)));
            } else {
                let n = src[start..i]
                    .parse::<f64>()
                    .map_err(|_| err(start, "not a number"))?;
                out.push((Tok::Num(n), (start, i)));
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            out.push((Tok::Ident(src[start..i].to_string()), (start, i)));
            continue;
        }
        let Some(p) = PUNCT.iter().find(|p| src[i..].starts_with(**p)) else {
            return Err(err(i, &format!("unexpected {:?}", c as char)));
        };
        i += p.len();
        out.push((Tok::P(p), (start, i)));
    }
    Ok(out)
}

/// Parses a LogQL metric expression.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let toks = lex(src)?;
    let mut p = Parser { src, toks, pos: 0 };
    let e = p.expr(1)?;
    if p.pos < p.toks.len() {
        return Err(p.err("unexpected text after the expression"));
    }
    Ok(e)
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<(Tok, Span)>,
    pos: usize,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "sort",
    "sort_desc",
    "approx_topk",
];

const RANGE_FUNCS: &[&str] = &[
    "count_over_time",
    "rate",
    "bytes_over_time",
    "bytes_rate",
    "absent_over_time",
    "sum_over_time",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "quantile_over_time",
    "first_over_time",
    "last_over_time",
    "rate_counter",
];

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn at(&self) -> usize {
        self.toks
            .get(self.pos)
            .map(|t| t.1 .0)
            .unwrap_or(self.src.len())
    }

    fn end_of_prev(&self) -> usize {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map(|t| t.1 .1)
            .unwrap_or(0)
    }

    fn err(&self, m: &str) -> ParseError {
        let found = match self.peek() {
            None => "the end".to_string(),
            Some(Tok::Ident(s)) | Some(Tok::Unit(s)) => format!("{s:?}"),
            Some(Tok::Str(s)) => format!("string {s:?}"),
            Some(Tok::Num(n)) => n.to_string(),
            Some(Tok::P(p)) => format!("{p:?}"),
        };
        ParseError {
            at: self.at(),
            message: format!("{m} (found {found})"),
        }
    }

    fn is_p(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::P(q)) if *q == p)
    }

    fn is_ident(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(s)) if s == w)
    }

    fn eat_p(&mut self, p: &str) -> bool {
        let yes = self.is_p(p);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn want_p(&mut self, p: &str) -> Result<(), ParseError> {
        if self.eat_p(p) {
            Ok(())
        } else {
            Err(self.err(&format!("expected {p:?}")))
        }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.err("expected a name")),
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.err("expected a string")),
        }
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match self.peek()? {
            Tok::Ident(s) if s == "or" => BinOp::Or,
            Tok::Ident(s) if s == "and" => BinOp::And,
            Tok::Ident(s) if s == "unless" => BinOp::Unless,
            Tok::P("==") => BinOp::Eq,
            Tok::P("!=") => BinOp::Ne,
            Tok::P(">") => BinOp::Gt,
            Tok::P(">=") => BinOp::Ge,
            Tok::P("<") => BinOp::Lt,
            Tok::P("<=") => BinOp::Le,
            Tok::P("+") => BinOp::Add,
            Tok::P("-") => BinOp::Sub,
            Tok::P("*") => BinOp::Mul,
            Tok::P("/") => BinOp::Div,
            Tok::P("%") => BinOp::Mod,
            Tok::P("^") => BinOp::Pow,
            _ => return None,
        })
    }

    fn expr(&mut self, min: u8) -> Result<Expr, ParseError> {
        let start = self.at();
        let mut lhs = self.unary()?;
        while let Some(op) = self.binop() {
            if op.prec() < min {
                break;
            }
            self.pos += 1;
            let bool_mod = self.is_ident("bool") && {
                self.pos += 1;
                true
            };
            let matching = self.matching()?;
            let next = if op == BinOp::Pow {
                op.prec()
            } else {
                op.prec() + 1
            };
            let rhs = self.expr(next)?;
            lhs = Expr::Bin(Box::new(Bin {
                op,
                lhs,
                rhs,
                bool_mod,
                matching,
                span: (start, self.end_of_prev()),
            }));
        }
        Ok(lhs)
    }

    fn label_list(&mut self) -> Result<Vec<String>, ParseError> {
        self.want_p("(")?;
        let mut out = Vec::new();
        while !self.eat_p(")") {
            out.push(self.ident()?);
            if !self.eat_p(",") {
                self.want_p(")")?;
                break;
            }
        }
        Ok(out)
    }

    fn matching(&mut self) -> Result<Option<Matching>, ParseError> {
        let on = if self.is_ident("on") {
            true
        } else if self.is_ident("ignoring") {
            false
        } else {
            return Ok(None);
        };
        self.pos += 1;
        let labels = self.label_list()?;
        let group_left = if self.is_ident("group_left") {
            Some(true)
        } else if self.is_ident("group_right") {
            Some(false)
        } else {
            None
        };
        if group_left.is_some() {
            self.pos += 1;
            if self.is_p("(") {
                self.label_list()?;
            }
        }
        Ok(Some(Matching {
            on,
            labels,
            group_left,
        }))
    }

    fn grouping(&mut self) -> Result<Option<Grouping>, ParseError> {
        let without = if self.is_ident("by") {
            false
        } else if self.is_ident("without") {
            true
        } else {
            return Ok(None);
        };
        self.pos += 1;
        Ok(Some(Grouping {
            without,
            labels: self.label_list()?,
        }))
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let start = self.at();
        match self.peek().cloned() {
            Some(Tok::P("(")) => {
                self.pos += 1;
                let e = self.expr(1)?;
                self.want_p(")")?;
                Ok(e)
            }
            Some(Tok::P("-")) => {
                self.pos += 1;
                match self.unary()? {
                    Expr::Num(n) => Ok(Expr::Num(-n)),
                    _ => Ok(Expr::Other("unary minus".into(), (start, self.end_of_prev()))),
                }
            }
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Some(Tok::P("{")) => Err(self.err(
                "a log query is not a metric: an alerting rule needs count_over_time, rate or another range function around it",
            )),
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if AGGREGATIONS.contains(&name.as_str()) {
                    let mut grouping = self.grouping()?;
                    self.want_p("(")?;
                    let param = match self.peek() {
                        Some(Tok::Num(n)) if self.toks.get(self.pos + 1).is_some_and(|t| t.0 == Tok::P(",")) => {
                            let n = *n;
                            self.pos += 2;
                            Some(n)
                        }
                        _ => None,
                    };
                    let inner = self.expr(1)?;
                    self.want_p(")")?;
                    if grouping.is_none() {
                        grouping = self.grouping()?;
                    }
                    return Ok(Expr::Agg(Agg {
                        op: name,
                        grouping,
                        param,
                        inner: Box::new(inner),
                        span: (start, self.end_of_prev()),
                    }));
                }
                if RANGE_FUNCS.contains(&name.as_str()) {
                    self.want_p("(")?;
                    let param = match self.peek() {
                        Some(Tok::Num(n)) => {
                            let n = *n;
                            self.pos += 1;
                            self.want_p(",")?;
                            Some(n)
                        }
                        _ => None,
                    };
                    let log = self.log_expr()?;
                    self.want_p("[")?;
                    let range_ns = self.duration()?;
                    self.want_p("]")?;
                    let offset = if self.is_ident("offset") {
                        self.pos += 1;
                        let s = self.at();
                        self.duration()?;
                        Some(self.src[s..self.end_of_prev()].to_string())
                    } else {
                        None
                    };
                    self.want_p(")")?;
                    let grouping = self.grouping()?;
                    return Ok(Expr::Range(RangeAgg {
                        func: name,
                        log,
                        range_ns,
                        offset,
                        param,
                        grouping,
                        span: (start, self.end_of_prev()),
                    }));
                }
                // Another function (vector, label_replace, …) or a
                // recorded series' name: kept whole, for the reason.
                if self.is_p("(") {
                    let mut depth = 0usize;
                    while let Some(t) = self.peek() {
                        match t {
                            Tok::P("(") => depth += 1,
                            Tok::P(")") => {
                                depth -= 1;
                                if depth == 0 {
                                    self.pos += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        self.pos += 1;
                    }
                } else if self.is_p("{") {
                    while !self.eat_p("}") && self.peek().is_some() {
                        self.pos += 1;
                    }
                }
                let span = (start, self.end_of_prev());
                Ok(Expr::Other(self.src[span.0..span.1].to_string(), span))
            }
            _ => Err(self.err("expected an expression")),
        }
    }

    fn duration(&mut self) -> Result<i64, ParseError> {
        match self.peek() {
            Some(Tok::Unit(s)) => {
                let ns = crate::duration::Dur::parse(s)
                    .map_err(|m| self.err(&format!("bad duration: {m}")))?
                    .ns();
                self.pos += 1;
                Ok(ns)
            }
            _ => Err(self.err("expected a duration such as 5m")),
        }
    }

    fn log_expr(&mut self) -> Result<LogExpr, ParseError> {
        let start = self.at();
        if self.eat_p("(") {
            let e = self.log_expr()?;
            self.want_p(")")?;
            return Ok(e);
        }
        self.want_p("{")?;
        let mut selector = Vec::new();
        while !self.eat_p("}") {
            let name = self.ident()?;
            let op = match self.peek() {
                Some(Tok::P("=")) => MatchOp::Eq,
                Some(Tok::P("!=")) => MatchOp::Ne,
                Some(Tok::P("=~")) => MatchOp::Re,
                Some(Tok::P("!~")) => MatchOp::NotRe,
                _ => return Err(self.err("expected =, !=, =~ or !~")),
            };
            self.pos += 1;
            let value = self.string()?;
            selector.push(LabelMatcher { name, op, value });
            if !self.eat_p(",") {
                self.want_p("}")?;
                break;
            }
        }
        let mut stages = Vec::new();
        loop {
            let s = self.at();
            let op = match self.peek() {
                Some(Tok::P("|=")) => Some(LineOp::Contains),
                Some(Tok::P("!=")) => Some(LineOp::NotContains),
                Some(Tok::P("|~")) => Some(LineOp::Regex),
                Some(Tok::P("!~")) => Some(LineOp::NotRegex),
                Some(Tok::P("|>")) => Some(LineOp::Pattern),
                Some(Tok::P("!>")) => Some(LineOp::NotPattern),
                Some(Tok::P("|")) => None,
                _ => break,
            };
            self.pos += 1;
            if let Some(op) = op {
                let mut values = vec![self.line_value()?];
                while self.is_ident("or") {
                    self.pos += 1;
                    values.push(self.line_value()?);
                }
                stages.push(Stage::Line {
                    op,
                    values,
                    span: (s, self.end_of_prev()),
                });
                continue;
            }
            stages.push(self.stage(s)?);
        }
        Ok(LogExpr {
            selector,
            stages,
            span: (start, self.end_of_prev()),
        })
    }

    fn line_value(&mut self) -> Result<LineValue, ParseError> {
        if self.is_ident("ip") {
            self.pos += 1;
            self.want_p("(")?;
            let v = self.string()?;
            self.want_p(")")?;
            return Ok(LineValue::Ip(v));
        }
        Ok(LineValue::Text(self.string()?))
    }

    /// One `| …` stage (the pipe already read).
    fn stage(&mut self, start: usize) -> Result<Stage, ParseError> {
        let name = match self.peek() {
            Some(Tok::Ident(n)) => n.clone(),
            Some(Tok::P("(")) => {
                let e = self.label_expr()?;
                return Ok(Stage::Labels(e, (start, self.end_of_prev())));
            }
            _ => return Err(self.err("expected a stage after |")),
        };
        let next_is_op = matches!(
            self.toks.get(self.pos + 1).map(|t| &t.0),
            Some(Tok::P(
                "=" | "==" | "!=" | "=~" | "!~" | ">" | ">=" | "<" | "<="
            ))
        );
        match name.as_str() {
            "json" | "logfmt" | "unpack" if !next_is_op => {
                self.pos += 1;
                let mut params = Vec::new();
                loop {
                    // logfmt's flags: --strict, --keep-empty.
                    if self.is_p("-") {
                        self.pos += 1;
                        self.want_p("-")?;
                        self.ident()?;
                        continue;
                    }
                    let Some(Tok::Ident(label)) = self.peek().cloned() else {
                        break;
                    };
                    if matches!(label.as_str(), "or" | "and") {
                        break;
                    }
                    self.pos += 1;
                    let path = if self.eat_p("=") {
                        self.string()?
                    } else {
                        label.clone()
                    };
                    params.push((label, path));
                    if !self.eat_p(",") {
                        break;
                    }
                }
                Ok(Stage::Parser {
                    kind: name,
                    params,
                    arg: None,
                    span: (start, self.end_of_prev()),
                })
            }
            "regexp" | "pattern" if !next_is_op => {
                self.pos += 1;
                let arg = Some(self.string()?);
                Ok(Stage::Parser {
                    kind: name,
                    params: Vec::new(),
                    arg,
                    span: (start, self.end_of_prev()),
                })
            }
            "line_format" | "label_format" | "unwrap" | "drop" | "keep" | "decolorize"
            | "distinct"
                if !next_is_op =>
            {
                // Skipped whole: up to the next stage or the range.
                self.pos += 1;
                let mut depth = 0usize;
                while let Some(t) = self.peek() {
                    match t {
                        Tok::P("(") => depth += 1,
                        Tok::P(")") if depth == 0 => break,
                        Tok::P(")") => depth -= 1,
                        Tok::P("|" | "|=" | "|~" | "|>" | "!=" | "!~" | "!>" | "[")
                            if depth == 0 =>
                        {
                            break
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
                Ok(Stage::Other(name, (start, self.end_of_prev())))
            }
            _ => {
                let e = self.label_expr()?;
                Ok(Stage::Labels(e, (start, self.end_of_prev())))
            }
        }
    }

    fn label_expr(&mut self) -> Result<LabelExpr, ParseError> {
        let mut lhs = self.label_and()?;
        while self.is_ident("or") {
            self.pos += 1;
            let rhs = self.label_and()?;
            lhs = LabelExpr::Or(Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn label_and(&mut self) -> Result<LabelExpr, ParseError> {
        let mut lhs = self.label_atom()?;
        loop {
            // `and`, a comma or a space join predicates alike.
            if self.is_ident("and") || self.is_p(",") {
                self.pos += 1;
            } else if !matches!(self.peek(), Some(Tok::Ident(s)) if s != "or") && !self.is_p("(") {
                break;
            }
            let rhs = self.label_atom()?;
            lhs = LabelExpr::And(Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn label_atom(&mut self) -> Result<LabelExpr, ParseError> {
        if self.eat_p("(") {
            let e = self.label_expr()?;
            self.want_p(")")?;
            return Ok(e);
        }
        let name = self.ident()?;
        let op = match self.peek() {
            Some(Tok::P("=" | "==")) => CmpOp::Eq,
            Some(Tok::P("!=")) => CmpOp::Ne,
            Some(Tok::P("=~")) => CmpOp::Re,
            Some(Tok::P("!~")) => CmpOp::NotRe,
            Some(Tok::P(">")) => CmpOp::Gt,
            Some(Tok::P(">=")) => CmpOp::Ge,
            Some(Tok::P("<")) => CmpOp::Lt,
            Some(Tok::P("<=")) => CmpOp::Le,
            _ => return Err(self.err("expected a label filter operator")),
        };
        self.pos += 1;
        let value = match self.peek().cloned() {
            Some(Tok::Str(s)) => LabelValue::Str(s),
            Some(Tok::Num(n)) => LabelValue::Num(n),
            Some(Tok::P("-")) => {
                self.pos += 1;
                match self.peek() {
                    Some(Tok::Num(n)) => LabelValue::Num(-n),
                    _ => return Err(self.err("expected a number")),
                }
            }
            Some(Tok::Unit(u)) => LabelValue::Unit(u),
            Some(Tok::Ident(f)) if f == "ip" => {
                let s = self.at();
                self.pos += 1;
                self.want_p("(")?;
                self.string()?;
                self.want_p(")")?;
                let v = LabelValue::Unit(self.src[s..self.end_of_prev()].to_string());
                return Ok(LabelExpr::Cmp { name, op, value: v });
            }
            _ => return Err(self.err("expected a value")),
        };
        self.pos += 1;
        Ok(LabelExpr::Cmp { name, op, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ruler_shapes() {
        let e = parse(
            r#"sum by (node_id) (count_over_time({app="livekit", env!="dev"} |= "failed to mark as draining" != "test" [5m])) > 0"#,
        )
        .unwrap();
        let Expr::Bin(b) = e else { panic!() };
        assert_eq!(b.op, BinOp::Gt);
        assert_eq!(b.rhs, Expr::Num(0.0));
        let Expr::Agg(a) = &b.lhs else { panic!() };
        assert_eq!(a.op, "sum");
        assert_eq!(a.grouping.as_ref().unwrap().labels, vec!["node_id"]);
        let Expr::Range(r) = &*a.inner else { panic!() };
        assert_eq!(r.func, "count_over_time");
        assert_eq!(r.range_ns, 300_000_000_000);
        assert_eq!(r.log.selector.len(), 2);
        assert_eq!(r.log.selector[1].op, MatchOp::Ne);
        assert_eq!(r.log.stages.len(), 2);
    }

    #[test]
    fn precedence_and_matching() {
        let e = parse(
            r#"sum by (n) (rate({a="b"}[1m])) / on() group_left sum(rate({a="b"}[1m])) > 0.8 and on() sum(count_over_time({a="b"}[1m])) >= 10"#,
        )
        .unwrap();
        let Expr::Bin(and) = e else { panic!() };
        assert_eq!(and.op, BinOp::And);
        let Expr::Bin(gt) = &and.lhs else { panic!() };
        assert_eq!(gt.op, BinOp::Gt);
        let Expr::Bin(div) = &gt.lhs else { panic!() };
        assert_eq!(div.op, BinOp::Div);
        assert!(div.matching.as_ref().unwrap().on);
        assert_eq!(div.matching.as_ref().unwrap().group_left, Some(true));
    }

    #[test]
    fn pipelines_parsers_and_label_filters() {
        let e = parse(
            r#"count_over_time({job="x"} | json lvl="level", code | lvl="error" and code >= 500, path=~"/api.*" or code == 404 |~ "a" or "b" | logfmt --strict | line_format "{{.msg}}" [10m] offset 1h)"#,
        )
        .unwrap();
        let Expr::Range(r) = e else { panic!() };
        assert_eq!(r.offset.as_deref(), Some("1h"));
        let kinds: Vec<&str> = r
            .log
            .stages
            .iter()
            .map(|s| match s {
                Stage::Line { .. } => "line",
                Stage::Parser { kind, .. } => kind.as_str(),
                Stage::Labels(..) => "labels",
                Stage::Other(n, _) => n.as_str(),
            })
            .collect();
        assert_eq!(kinds, ["json", "labels", "line", "logfmt", "line_format"]);
        let Stage::Parser { params, .. } = &r.log.stages[0] else {
            panic!()
        };
        assert_eq!(params[0], ("lvl".into(), "level".into()));
        assert_eq!(params[1], ("code".into(), "code".into()));
        let Stage::Line { values, .. } = &r.log.stages[2] else {
            panic!()
        };
        assert_eq!(values.len(), 2);
    }

    #[test]
    fn errors_say_where() {
        let e = parse(r#"count_over_time({app="x"} |= [5m])"#).unwrap_err();
        assert!(e.message.contains("expected a string"), "{e}");
        assert_eq!(e.at, 29);
        assert!(parse(r#"{app="x"} |= "y""#)
            .unwrap_err()
            .message
            .contains("not a metric"));
        assert!(parse(r#"count_over_time({app="x"}[5q])"#).is_err());
    }

    #[test]
    fn unknown_functions_and_series_are_kept_whole() {
        let e = parse("job:errors:rate5m > 1").unwrap();
        let Expr::Bin(b) = e else { panic!() };
        assert!(matches!(&b.lhs, Expr::Other(s, _) if s == "job:errors:rate5m"));
    }
}
