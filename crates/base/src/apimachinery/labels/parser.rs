//! The text form of label selectors: upstream's lexer and parser (`labels.Parse`), a
//! byte-for-byte port including its quirks and its error messages.

use std::collections::BTreeSet;

use super::{Operator, Requirement, SelectorError};
use crate::apimachinery::field;
use crate::apimachinery::validation::is_qualified_name;

// --- Lexer (a byte-for-byte port of upstream's, including its quirks) --------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Upstream's "found '…', expected: …" error.
fn unexpected(found: String, expected: &'static str) -> SelectorError {
    SelectorError::Unexpected { found, expected }
}

/// The binary operators as upstream lists them in "expected" errors.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// `string2token`: the literal tokens.
fn literal_token(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the input also reads as an end, as upstream).
    fn read(&mut self) -> u8 {
        match self.text.get(self.pos) {
            Some(&byte) => {
                self.pos += 1;
                byte
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// The next token and its literal.
    fn lex(&mut self) -> (Token, String) {
        let mut byte = self.read();
        while is_whitespace(byte) {
            byte = self.read();
        }
        if byte == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(byte) { self.scan_special_symbol() } else { self.scan_identifier_or_keyword() }
    }

    fn scan_identifier_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let byte = self.read();
            if byte == 0 {
                break;
            }
            if is_special_symbol(byte) || is_whitespace(byte) {
                self.unread();
                break;
            }
            buffer.push(byte);
        }
        let token = literal_token(&buffer).unwrap_or(Token::Identifier);
        (token, String::from_utf8_lossy(&buffer).into_owned())
    }

    /// The longest run of operator characters that still forms a token (`!=` but `!` + `(`).
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            let byte = self.read();
            if byte == 0 {
                break;
            }
            if !is_special_symbol(byte) {
                self.unread();
                break;
            }
            buffer.push(byte);
            match literal_token(&buffer) {
                Some(token) => last = Some((token, buffer.len())),
                None if last.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        match last {
            Some((token, len)) => (token, String::from_utf8_lossy(&buffer[..len]).into_owned()),
            None => (Token::Error, format!("error expected: keyword found '{}'", String::from_utf8_lossy(&buffer))),
        }
    }
}

// --- Parser -------------------------------------------------------------------------------------

/// Whether `in`/`notin` are keywords (after a key) or plain identifiers (keys and values).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

pub(super) struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    /// Lexes the whole text up front, as upstream's `scan`.
    pub(super) fn new(text: &str) -> Parser {
        let mut lexer = Lexer { text: text.as_bytes(), pos: 0 };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let done = item.0 == Token::EndOfString;
            items.push(item);
            if done {
                return Parser { items, position: 0 };
            }
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self.items.get(self.position).cloned().unwrap_or((Token::EndOfString, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    pub(super) fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement =
                        self.parse_requirement().map_err(|e| SelectorError::Requirement { source: Box::new(e) })?;
                    requirements.push(requirement);
                    if self.parse_separator()? {
                        return Ok(requirements);
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => return Err(unexpected(literal, "!, identifier, or 'end of string'")),
            }
        }
    }

    /// After a requirement: the end (true) or a comma followed by another requirement (false).
    fn parse_separator(&mut self) -> Result<bool, SelectorError> {
        let (token, literal) = self.consume(Context::Values);
        match token {
            Token::EndOfString => Ok(true),
            Token::Comma => match self.lookahead(Context::Values) {
                (Token::Identifier | Token::DoesNotExist, _) => Ok(false),
                (_, next) => Err(unexpected(next, "identifier after ','")),
            },
            _ => Err(unexpected(literal, "',' or 'end of string'")),
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, unary) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = unary {
            return Requirement::new(&key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, operator, values)
    }

    /// The key, and the operator when it is unary: `!key` (whatever follows) or a bare `key`.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), SelectorError> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(unexpected(literal, "identifier"));
        }
        let key_errors = is_qualified_name(&literal);
        if !key_errors.is_empty() {
            return Err(SelectorError::InvalidKey(field::Error::invalid_str(
                "<nil>",
                &literal,
                &key_errors.join("; "),
            )));
        }
        let (next, _) = self.lookahead(Context::Values);
        if operator.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(unexpected(literal, BINARY_OPERATORS)),
        })
    }

    /// `(a,b,...)`: a set, so sorted and deduplicated; `()` is the one empty value.
    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(SelectorError::ExpectedOpenParenthesis { found: literal });
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(unexpected(literal, "')'"));
                }
                Ok(values.into_iter().collect())
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(unexpected(literal, "',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers, up to (not including) `)`.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    match self.lookahead(Context::Values) {
                        (Token::Comma, _) => continue,
                        (Token::ClosedPar, _) => return Ok(values),
                        (_, next) => return Err(unexpected(next, "',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(unexpected(literal, "',', or identifier")),
            }
        }
    }

    /// The single value of `=`, `==`, `!=`, `>`, `<`; missing means the empty value.
    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        if matches!(self.lookahead(Context::Values).0, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, literal) => Ok(vec![literal]),
            (_, literal) => Err(unexpected(literal, "identifier")),
        }
    }
}
