//! A recursive-descent parser of the CEL grammar (cel-spec `doc/langdef.md`), with the node
//! positions cel-go's ANTLR parser gives: an operator's node sits at its operator token, a
//! call's at its `(`, a select's at its `.`, an index's at its `[`. Macros (`has`, `all`,
//! `exists`, `exists_one`, `map`, `filter`) become [`ExprKind::Comprehension`] or test-only
//! selects, as cel-go expands them.

use super::errors::{Issue, Source};

/// A parsed expression; `pos` is its offset in characters from the start of the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// Character offset of the node's token.
    pub pos: usize,
    /// What it is.
    pub kind: ExprKind,
}

/// The kinds of CEL expression.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// `null`.
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// An int literal.
    Int(i64),
    /// A uint literal (`1u`).
    Uint(u64),
    /// A double literal.
    Double(f64),
    /// A string literal.
    String(String),
    /// A bytes literal (`b'...'`).
    Bytes,
    /// A name.
    Ident(String),
    /// `operand.field`.
    Select {
        /// What the field is selected from.
        operand: Box<Expr>,
        /// The field.
        field: String,
        /// `has(operand.field)`.
        test_only: bool,
        /// `operand.?field`.
        optional: bool,
    },
    /// A function or operator call (`_+_`, `_[_]`, `size`, ...).
    Call {
        /// The receiver of `target.function(args)`.
        target: Option<Box<Expr>>,
        /// The function or operator.
        function: String,
        /// The arguments.
        args: Vec<Expr>,
    },
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{k: v}`.
    Map(Vec<(Expr, Expr)>),
    /// `Name{field: value}`.
    Struct {
        /// The message name.
        name: String,
        /// Its field initialisers.
        fields: Vec<(String, Expr)>,
    },
    /// A macro over a list or map: `range.all(x, pred)` and friends.
    Comprehension {
        /// The macro: `all`, `exists`, `exists_one`, `map`, `filter`, `transformList`, ...
        function: String,
        /// The list or map iterated.
        range: Box<Expr>,
        /// The (first) iteration variable.
        var: String,
        /// The rest: a second variable's name first in two-variable forms, then the bodies.
        args: Vec<Expr>,
    },
}

/// Words CEL reserves (cel-go's `reservedIds`).
pub(super) const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    Bytes,
    Punct(&'static str),
    Eof,
}

const PUNCTS: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", ".?", "[?", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",", "[",
    "]", "(", ")", "{", "}",
];

struct Lexer<'a> {
    chars: &'a [char],
    i: usize,
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn skip_space(&mut self) {
        loop {
            match self.peek(0) {
                Some(c) if c.is_whitespace() => self.i += 1,
                Some('/') if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn next(&mut self) -> Result<(usize, Tok), (usize, LexError)> {
        self.skip_space();
        let start = self.i;
        let Some(c) = self.peek(0) else { return Ok((start, Tok::Eof)) };
        if c.is_ascii_digit() || (c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit())) {
            return self.number(start).map(|t| (start, t));
        }
        if c.is_alphabetic() || c == '_' {
            let prefix: String = self.chars[self.i..].iter().take(3).collect::<String>().to_lowercase();
            let quoted = |n: usize| self.peek(n).is_some_and(|q| q == '"' || q == '\'');
            if (prefix.starts_with('r') || prefix.starts_with('b')) && quoted(1)
                || (prefix.starts_with("rb") || prefix.starts_with("br")) && quoted(2)
            {
                let skip = if quoted(1) { 1 } else { 2 };
                let raw = prefix[..skip].contains('r');
                let bytes = prefix[..skip].contains('b');
                self.i += skip;
                let s = self.string(raw)?;
                return Ok((start, if bytes { Tok::Bytes } else { Tok::Str(s) }));
            }
            while self.peek(0).is_some_and(|c| c.is_alphanumeric() || c == '_') {
                self.i += 1;
            }
            return Ok((start, Tok::Ident(self.chars[start..self.i].iter().collect())));
        }
        if c == '"' || c == '\'' {
            return self.string(false).map(|s| (start, Tok::Str(s)));
        }
        for p in PUNCTS {
            if p.chars().enumerate().all(|(k, pc)| self.peek(k) == Some(pc)) {
                self.i += p.len();
                return Ok((start, Tok::Punct(p)));
            }
        }
        Err((start, LexError::Unrecognized(c)))
    }

    fn number(&mut self, start: usize) -> Result<Tok, (usize, LexError)> {
        if self.peek(0) == Some('0') && matches!(self.peek(1), Some('x' | 'X')) {
            self.i += 2;
            let digits_start = self.i;
            while self.peek(0).is_some_and(|c| c.is_ascii_hexdigit()) {
                self.i += 1;
            }
            let digits: String = self.chars[digits_start..self.i].iter().collect();
            let value = u64::from_str_radix(&digits, 16).map_err(|_| (start, LexError::InvalidInt))?;
            return self.int_suffix(start, value);
        }
        let mut float = false;
        while let Some(c) = self.peek(0) {
            if c.is_ascii_digit() {
                self.i += 1;
            } else if c == '.' && !float && self.peek(1).is_some_and(|d| d.is_ascii_digit()) {
                float = true;
                self.i += 1;
            } else if matches!(c, 'e' | 'E') {
                float = true;
                self.i += 1;
                if matches!(self.peek(0), Some('+' | '-')) {
                    self.i += 1;
                }
            } else {
                break;
            }
        }
        let text: String = self.chars[start..self.i].iter().collect();
        if float {
            return text.parse().map(Tok::Double).map_err(|_| (start, LexError::InvalidDouble));
        }
        let value: u64 = text.parse().map_err(|_| (start, LexError::InvalidInt))?;
        self.int_suffix(start, value)
    }

    fn int_suffix(&mut self, start: usize, value: u64) -> Result<Tok, (usize, LexError)> {
        if matches!(self.peek(0), Some('u' | 'U')) {
            self.i += 1;
            return Ok(Tok::Uint(value));
        }
        i64::try_from(value).map(Tok::Int).map_err(|_| (start, LexError::InvalidInt))
    }

    fn string(&mut self, raw: bool) -> Result<String, (usize, LexError)> {
        let start = self.i;
        let quote = self.peek(0).unwrap_or('"');
        let triple = self.peek(1) == Some(quote) && self.peek(2) == Some(quote);
        self.i += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek(0) else {
                return Err((start, LexError::UnterminatedString));
            };
            if triple && c == quote && self.peek(1) == Some(quote) && self.peek(2) == Some(quote) {
                self.i += 3;
                return Ok(out);
            }
            if !triple && c == quote {
                self.i += 1;
                return Ok(out);
            }
            if !triple && c == '\n' {
                return Err((start, LexError::UnterminatedString));
            }
            self.i += 1;
            if c == '\\' && !raw {
                let e = self.peek(0).unwrap_or('\\');
                self.i += 1;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    other => other,
                });
            } else {
                out.push(c);
            }
        }
    }
}

/// A token the lexer cannot read, in cel-go's words (after `Syntax error: `).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum LexError {
    /// A character that starts no token.
    #[error("token recognition error at: '{0}'")]
    Unrecognized(char),
    /// A string without its closing quote (on its line, unless triple-quoted).
    #[error("token recognition error at: 'unterminated string'")]
    UnterminatedString,
    /// An integer literal beyond its type.
    #[error("invalid int literal")]
    InvalidInt,
    /// A floating-point literal that does not parse.
    #[error("invalid double literal")]
    InvalidDouble,
}

/// The parser: tokens with one token of look-ahead, and the macro-var counter.
struct Parser {
    toks: Vec<(usize, Tok)>,
    i: usize,
}

type PResult<T> = Result<T, Issue>;

fn expr(pos: usize, kind: ExprKind) -> Expr {
    Expr { pos, kind }
}

fn call(pos: usize, function: &str, args: Vec<Expr>) -> Expr {
    expr(pos, ExprKind::Call { target: None, function: function.into(), args })
}

/// Parses `source` into an expression, or the first syntax error.
pub fn parse(source: &Source) -> Result<Expr, Issue> {
    let chars: Vec<char> = source.text.chars().collect();
    let mut lexer = Lexer { chars: &chars, i: 0 };
    let mut toks = Vec::new();
    loop {
        let t = lexer.next().map_err(|(pos, message)| Issue { pos, message: format!("Syntax error: {message}") })?;
        let end = t.1 == Tok::Eof;
        toks.push(t);
        if end {
            break;
        }
    }
    let mut p = Parser { toks, i: 0 };
    let e = p.expr()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected());
    }
    Ok(e)
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].1
    }

    fn pos(&self) -> usize {
        self.toks[self.i].0
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        let hit = self.is(p);
        if hit {
            self.i += 1;
        }
        hit
    }

    fn expect(&mut self, p: &str) -> PResult<usize> {
        let pos = self.pos();
        if self.eat(p) { Ok(pos) } else { Err(self.unexpected()) }
    }

    fn unexpected(&self) -> Issue {
        let text = match self.peek() {
            Tok::Eof => "<EOF>".to_string(),
            Tok::Ident(s) => s.clone(),
            Tok::Punct(p) => p.to_string(),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Int(i) => i.to_string(),
            Tok::Uint(u) => format!("{u}u"),
            Tok::Double(d) => d.to_string(),
            Tok::Bytes => "bytes".into(),
        };
        Issue { pos: self.pos(), message: format!("Syntax error: mismatched input '{text}'") }
    }

    fn expr(&mut self) -> PResult<Expr> {
        let cond = self.or()?;
        if !self.is("?") {
            return Ok(cond);
        }
        let pos = self.expect("?")?;
        let yes = self.or()?;
        self.expect(":")?;
        let no = self.expr()?;
        Ok(call(pos, "_?_:_", vec![cond, yes, no]))
    }

    fn or(&mut self) -> PResult<Expr> {
        let mut left = self.and()?;
        while self.is("||") {
            let pos = self.expect("||")?;
            let right = self.and()?;
            left = call(pos, "_||_", vec![left, right]);
        }
        Ok(left)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut left = self.relation()?;
        while self.is("&&") {
            let pos = self.expect("&&")?;
            let right = self.relation()?;
            left = call(pos, "_&&_", vec![left, right]);
        }
        Ok(left)
    }

    fn relation(&mut self) -> PResult<Expr> {
        let mut left = self.additive()?;
        loop {
            let pos = self.pos();
            let op = match self.peek() {
                Tok::Punct("<") => "_<_",
                Tok::Punct("<=") => "_<=_",
                Tok::Punct(">") => "_>_",
                Tok::Punct(">=") => "_>=_",
                Tok::Punct("==") => "_==_",
                Tok::Punct("!=") => "_!=_",
                Tok::Ident(s) if s == "in" => "@in",
                _ => return Ok(left),
            };
            self.i += 1;
            let right = self.additive()?;
            left = call(pos, op, vec![left, right]);
        }
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut left = self.multiplicative()?;
        loop {
            let pos = self.pos();
            let op = match self.peek() {
                Tok::Punct("+") => "_+_",
                Tok::Punct("-") => "_-_",
                _ => return Ok(left),
            };
            self.i += 1;
            let right = self.multiplicative()?;
            left = call(pos, op, vec![left, right]);
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut left = self.unary()?;
        loop {
            let pos = self.pos();
            let op = match self.peek() {
                Tok::Punct("*") => "_*_",
                Tok::Punct("/") => "_/_",
                Tok::Punct("%") => "_%_",
                _ => return Ok(left),
            };
            self.i += 1;
            let right = self.unary()?;
            left = call(pos, op, vec![left, right]);
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        if self.is("!") {
            let mut count = 0;
            while self.eat("!") {
                count += 1;
            }
            let operand = self.member()?;
            return Ok(if count % 2 == 0 { operand } else { call(pos, "!_", vec![operand]) });
        }
        if self.is("-") {
            // A minus directly before a number literal is part of the literal (cel-go's grammar).
            if let Some((_, next @ (Tok::Int(_) | Tok::Double(_)))) = self.toks.get(self.i + 1) {
                let lit = match next.clone() {
                    Tok::Int(i) => expr(pos, ExprKind::Int(-i)),
                    Tok::Double(d) => expr(pos, ExprKind::Double(-d)),
                    _ => unreachable!("matched above"),
                };
                self.i += 2;
                return self.member_suffix(lit);
            }
            let mut count = 0;
            while self.eat("-") {
                count += 1;
            }
            let operand = self.member()?;
            return Ok(if count % 2 == 0 { operand } else { call(pos, "-_", vec![operand]) });
        }
        self.member()
    }

    fn member(&mut self) -> PResult<Expr> {
        let primary = self.primary()?;
        self.member_suffix(primary)
    }

    fn member_suffix(&mut self, mut e: Expr) -> PResult<Expr> {
        loop {
            if self.is(".") || self.is(".?") {
                let pos = self.pos();
                let optional = self.is(".?");
                self.i += 1;
                let Tok::Ident(name) = self.peek().clone() else { return Err(self.unexpected()) };
                self.i += 1;
                if !optional && self.is("(") {
                    let open = self.expect("(")?;
                    let args = self.args(")")?;
                    e = self.receiver_call_or_macro(open, name, e, args)?;
                } else {
                    e = expr(pos, ExprKind::Select { operand: Box::new(e), field: name, test_only: false, optional });
                }
            } else if self.is("[") || self.is("[?") {
                let pos = self.pos();
                let optional = self.is("[?");
                self.i += 1;
                let index = self.expr()?;
                self.expect("]")?;
                e = call(pos, if optional { "_[?_]" } else { "_[_]" }, vec![e, index]);
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok(args);
            }
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        let tok = self.peek().clone();
        self.i += 1;
        Ok(match tok {
            Tok::Int(i) => expr(pos, ExprKind::Int(i)),
            Tok::Uint(u) => expr(pos, ExprKind::Uint(u)),
            Tok::Double(d) => expr(pos, ExprKind::Double(d)),
            Tok::Str(s) => expr(pos, ExprKind::String(s)),
            Tok::Bytes => expr(pos, ExprKind::Bytes),
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Punct("[") => expr(pos, ExprKind::List(self.args("]")?)),
            Tok::Punct("{") => self.map(pos)?,
            Tok::Punct(".") => {
                let Tok::Ident(name) = self.peek().clone() else { return Err(self.unexpected()) };
                self.i += 1;
                self.ident_or_call(pos, format!(".{name}"))?
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => expr(pos, ExprKind::Bool(true)),
                "false" => expr(pos, ExprKind::Bool(false)),
                "null" => expr(pos, ExprKind::Null),
                _ => self.ident_or_call(pos, name)?,
            },
            _ => {
                self.i -= 1;
                return Err(self.unexpected());
            }
        })
    }

    fn map(&mut self, pos: usize) -> PResult<Expr> {
        let mut entries = Vec::new();
        while !self.eat("}") {
            let key = self.expr()?;
            self.expect(":")?;
            let value = self.expr()?;
            entries.push((key, value));
            if !self.eat(",") {
                self.expect("}")?;
                break;
            }
        }
        Ok(expr(pos, ExprKind::Map(entries)))
    }

    fn ident_or_call(&mut self, pos: usize, name: String) -> PResult<Expr> {
        if RESERVED.contains(&name.as_str()) {
            return Err(Issue { pos, message: format!("reserved identifier: {name}") });
        }
        if self.is("(") {
            let open = self.expect("(")?;
            let args = self.args(")")?;
            return global_call_or_macro(open, name, args);
        }
        // A qualified message name followed by `{`: `a.b.C{f: v}`.
        let mut qualified = name;
        let save = self.i;
        while self.is(".") {
            match self.toks.get(self.i + 1) {
                Some((_, Tok::Ident(part))) => {
                    qualified = format!("{qualified}.{part}");
                    self.i += 2;
                }
                _ => break,
            }
        }
        if self.is("{") {
            let open = self.expect("{")?;
            let mut fields = Vec::new();
            while !self.eat("}") {
                let Tok::Ident(field) = self.peek().clone() else { return Err(self.unexpected()) };
                self.i += 1;
                self.expect(":")?;
                fields.push((field, self.expr()?));
                if !self.eat(",") {
                    self.expect("}")?;
                    break;
                }
            }
            return Ok(expr(open, ExprKind::Struct { name: qualified, fields }));
        }
        self.i = save;
        let base = qualified.split('.').next().unwrap_or_default().to_string();
        Ok(expr(pos, ExprKind::Ident(base)))
    }

    fn receiver_call_or_macro(&mut self, pos: usize, name: String, target: Expr, args: Vec<Expr>) -> PResult<Expr> {
        let comprehension = matches!(
            (name.as_str(), args.len()),
            ("all" | "exists" | "exists_one" | "existsOne", 2 | 3)
                | ("filter", 2)
                | ("map", 2 | 3)
                | ("transformList" | "transformMap" | "transformMapEntry", 3 | 4)
        );
        if !comprehension {
            return Ok(expr(pos, ExprKind::Call { target: Some(Box::new(target)), function: name, args }));
        }
        let mut args = args.into_iter();
        let var = args.next().expect("checked arity");
        let ExprKind::Ident(var) = var.kind else {
            return Err(Issue { pos: var.pos, message: "argument must be a simple name".into() });
        };
        Ok(expr(pos, ExprKind::Comprehension { function: name, range: Box::new(target), var, args: args.collect() }))
    }
}

fn global_call_or_macro(pos: usize, name: String, mut args: Vec<Expr>) -> PResult<Expr> {
    if name == "has" && args.len() == 1 {
        let arg = args.pop().expect("one argument");
        return match arg.kind {
            ExprKind::Select { operand, field, optional: false, .. } => {
                Ok(expr(pos, ExprKind::Select { operand, field, test_only: true, optional: false }))
            }
            _ => Err(Issue { pos: arg.pos, message: "invalid argument to has() macro".into() }),
        };
    }
    Ok(call(pos, &name, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Expr {
        parse(&Source::new(text)).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    #[test]
    fn positions_follow_cel_go() {
        let e = p("object.spec.replicasss > 1");
        let ExprKind::Call { function, args, .. } = &e.kind else { panic!("{e:?}") };
        assert_eq!((function.as_str(), e.pos), ("_>_", 23));
        assert_eq!(args[0].pos, 11, "a select sits at its dot");
        let e = p("a.b(c)");
        assert_eq!(e.pos, 3, "a receiver call sits at its (");
    }

    #[test]
    fn macros_and_literals() {
        let e = p("has(object.spec) && object.items.all(i, i > -1) ? 'a' : \"b\"");
        assert!(matches!(e.kind, ExprKind::Call { ref function, .. } if function == "_?_:_"));
        assert!(matches!(p("[1, 2u, 3.0, b'x', r'\\d']").kind, ExprKind::List(ref l) if l.len() == 5));
        assert!(matches!(p("{'a': 1}").kind, ExprKind::Map(_)));
        assert!(matches!(p("x in [1]").kind, ExprKind::Call { ref function, .. } if function == "@in"));
        assert!(parse(&Source::new("1 +")).is_err());
        assert!(parse(&Source::new("has(x)")).is_err());
        assert!(parse(&Source::new("while")).is_err());
    }
}
