//! Tokens of the SQL92 filter: the `TOKEN`/`SKIP` section of RocketMQ 4.9's `SelectorParser.jj`.
//!
//! JavaCC takes the longest match and, on a tie, the first declared token, so keywords beat
//! identifiers of the same length (`in` is `IN`, `index` is an identifier). Rules kept from the
//! grammar:
//! - whitespace is `' '`, `\t`, `\n`, `\r`, `\f` only; `--` comments run to a line end and `/* */`
//!   comments do not nest. Deviation: a `--` comment may also end at the end of the text (JavaCC
//!   would lex `-`, `-` there, and then ignore them as trailing tokens, see `parser.rs`).
//! - keywords (`NOT AND OR BETWEEN IN TRUE FALSE NULL IS`) are case-insensitive; identifiers are
//!   `[A-Za-z_$][A-Za-z0-9_$]*` — no dots, dashes or non-ASCII letters.
//! - `DECIMAL_LITERAL` is `0` or `[1-9][0-9]*` with an optional `l`/`L` (so `007` is three tokens);
//!   `FLOATING_POINT_LITERAL` is `1.`, `1.5`, `.5`, `1e5`, `1.5E-3`; an exponent without digits is
//!   not part of the number. No signs (unary `-` is an operator), no hex, no octal.
//! - string literals are single-quoted, `''` stands for one quote, and may span lines.
//!
//! Offsets are byte offsets into the text; every slice is taken at ASCII boundaries, so no input
//! can make the lexer panic.

use super::error::FilterError;

/// One token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'s> {
    pub(crate) kind: TokenKind<'s>,
    pub(crate) at: usize,
}

/// Token kinds, named after the grammar's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind<'s> {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    /// Digits, with the `l`/`L` suffix if written.
    Decimal(&'s str),
    Float(&'s str),
    /// The decoded value (`''` already turned into `'`).
    Str(String),
    Id(&'s str),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
}

impl TokenKind<'_> {
    /// How an error message names the token.
    pub(crate) fn describe(&self) -> String {
        let fixed = match self {
            TokenKind::Not => "NOT",
            TokenKind::And => "AND",
            TokenKind::Or => "OR",
            TokenKind::Between => "BETWEEN",
            TokenKind::In => "IN",
            TokenKind::True => "TRUE",
            TokenKind::False => "FALSE",
            TokenKind::Null => "NULL",
            TokenKind::Is => "IS",
            TokenKind::Decimal(t) | TokenKind::Float(t) => return format!("number {t}"),
            TokenKind::Str(s) => return format!("string '{}'", s.replace('\'', "''")),
            TokenKind::Id(t) => return format!("identifier {t}"),
            TokenKind::Eq => "'='",
            TokenKind::Ne => "'<>'",
            TokenKind::Gt => "'>'",
            TokenKind::Ge => "'>='",
            TokenKind::Lt => "'<'",
            TokenKind::Le => "'<='",
            TokenKind::LParen => "'('",
            TokenKind::RParen => "')'",
            TokenKind::Comma => "','",
            TokenKind::Plus => "'+'",
            TokenKind::Minus => "'-'",
            TokenKind::Eof => "end of expression",
        };
        fixed.to_owned()
    }
}

/// Splits `text` into tokens, the last one always [`TokenKind::Eof`].
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token<'_>>, FilterError> {
    let mut lexer = Lexer { text, bytes: text.as_bytes(), pos: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let end = token.kind == TokenKind::Eof;
        tokens.push(token);
        if end {
            return Ok(tokens);
        }
    }
}

struct Lexer<'s> {
    text: &'s str,
    bytes: &'s [u8],
    pos: usize,
}

impl<'s> Lexer<'s> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn next_token(&mut self) -> Result<Token<'s>, FilterError> {
        self.skip_blanks_and_comments()?;
        let at = self.pos;
        let Some(c) = self.peek(0) else {
            return Ok(Token { kind: TokenKind::Eof, at });
        };
        let kind = match c {
            b'0'..=b'9' => self.number(),
            b'.' if self.peek(1).is_some_and(|d| d.is_ascii_digit()) => self.number(),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => self.identifier_or_keyword(),
            b'\'' => self.string()?,
            _ => self.operator()?,
        };
        Ok(Token { kind, at })
    }

    fn skip_blanks_and_comments(&mut self) -> Result<(), FilterError> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c'), _) => self.pos += 1,
                (Some(b'-'), Some(b'-')) => {
                    // The line end (`\r`, `\n` or `\r\n`) belongs to the comment.
                    let rest = &self.bytes[self.pos..];
                    match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                        Some(eol) => {
                            self.pos += eol + 1;
                            if rest.get(eol) == Some(&b'\r') && self.peek(0) == Some(b'\n') {
                                self.pos += 1;
                            }
                        }
                        None => self.pos = self.bytes.len(),
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.pos;
                    let body = &self.bytes[start + 2..];
                    match body.windows(2).position(|w| w == b"*/") {
                        Some(end) => self.pos = start + 2 + end + 2,
                        None => return Err(FilterError::UnterminatedComment { at: start }),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn digits(&mut self) {
        while self.peek(0).is_some_and(|d| d.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// Consumes `E[+-]?[0-9]+` if it is all there; otherwise consumes nothing (longest match of
    /// the number ends before the `E`).
    fn exponent(&mut self) -> bool {
        if !matches!(self.peek(0), Some(b'e' | b'E')) {
            return false;
        }
        let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
        if !self.peek(1 + sign).is_some_and(|d| d.is_ascii_digit()) {
            return false;
        }
        self.pos += 1 + sign;
        self.digits();
        true
    }

    fn number(&mut self) -> TokenKind<'s> {
        let start = self.pos;
        self.digits();
        let int_len = self.pos - start;
        let mut float = false;
        if self.peek(0) == Some(b'.') {
            self.pos += 1;
            self.digits();
            float = true;
        }
        float |= self.exponent();
        if float {
            return TokenKind::Float(&self.text[start..self.pos]);
        }
        // `DECIMAL_LITERAL` cannot start with 0 unless it is the lone `0`.
        if self.bytes.get(start) == Some(&b'0') {
            self.pos = start + 1;
            return TokenKind::Decimal(&self.text[start..self.pos]);
        }
        debug_assert!(int_len > 0);
        if matches!(self.peek(0), Some(b'l' | b'L')) {
            self.pos += 1;
        }
        TokenKind::Decimal(&self.text[start..self.pos])
    }

    fn identifier_or_keyword(&mut self) -> TokenKind<'s> {
        let start = self.pos;
        while self.peek(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$') {
            self.pos += 1;
        }
        let word = &self.text[start..self.pos];
        const KEYWORDS: [(&str, TokenKind<'static>); 9] = [
            ("NOT", TokenKind::Not),
            ("AND", TokenKind::And),
            ("OR", TokenKind::Or),
            ("BETWEEN", TokenKind::Between),
            ("IN", TokenKind::In),
            ("TRUE", TokenKind::True),
            ("FALSE", TokenKind::False),
            ("NULL", TokenKind::Null),
            ("IS", TokenKind::Is),
        ];
        KEYWORDS
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(word))
            .map_or(TokenKind::Id(word), |(_, kind)| kind.clone())
    }

    fn string(&mut self) -> Result<TokenKind<'s>, FilterError> {
        let start = self.pos;
        let mut value = String::new();
        // Byte offsets of quotes are char boundaries (ASCII), so slicing between them is safe.
        let mut chunk = start + 1;
        let mut i = start + 1;
        loop {
            match self.bytes.get(i) {
                None => return Err(FilterError::UnterminatedString { at: start }),
                Some(b'\'') if self.bytes.get(i + 1) == Some(&b'\'') => {
                    value.push_str(&self.text[chunk..=i]);
                    i += 2;
                    chunk = i;
                }
                Some(b'\'') => {
                    value.push_str(&self.text[chunk..i]);
                    self.pos = i + 1;
                    return Ok(TokenKind::Str(value));
                }
                Some(_) => i += 1,
            }
        }
    }

    fn operator(&mut self) -> Result<TokenKind<'s>, FilterError> {
        let (kind, len) = match (self.peek(0), self.peek(1)) {
            (Some(b'<'), Some(b'>')) => (TokenKind::Ne, 2),
            (Some(b'<'), Some(b'=')) => (TokenKind::Le, 2),
            (Some(b'>'), Some(b'=')) => (TokenKind::Ge, 2),
            (Some(b'<'), _) => (TokenKind::Lt, 1),
            (Some(b'>'), _) => (TokenKind::Gt, 1),
            (Some(b'='), _) => (TokenKind::Eq, 1),
            (Some(b'('), _) => (TokenKind::LParen, 1),
            (Some(b')'), _) => (TokenKind::RParen, 1),
            (Some(b','), _) => (TokenKind::Comma, 1),
            (Some(b'+'), _) => (TokenKind::Plus, 1),
            (Some(b'-'), _) => (TokenKind::Minus, 1),
            _ => {
                let found = self.text.get(self.pos..).and_then(|rest| rest.chars().next()).unwrap_or('\u{fffd}');
                return Err(FilterError::UnexpectedChar { found, at: self.pos });
            }
        };
        self.pos += len;
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::TokenKind as K;
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind<'_>> {
        tokenize(text).expect("lexes").into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn tokens_follow_the_grammar() {
        let cases: Vec<(&str, Vec<TokenKind<'_>>)> = vec![
            ("a", vec![K::Id("a"), K::Eof]),
            ("$a_1 _B", vec![K::Id("$a_1"), K::Id("_B"), K::Eof]),
            ("not And oR between In tRUE false NULL is", {
                let mut v = vec![K::Not, K::And, K::Or, K::Between, K::In, K::True, K::False, K::Null, K::Is];
                v.push(K::Eof);
                v
            }),
            ("index notx", vec![K::Id("index"), K::Id("notx"), K::Eof]),
            ("0 10 10L 10l", vec![K::Decimal("0"), K::Decimal("10"), K::Decimal("10L"), K::Decimal("10l"), K::Eof]),
            ("007", vec![K::Decimal("0"), K::Decimal("0"), K::Decimal("7"), K::Eof]),
            ("0L", vec![K::Decimal("0"), K::Id("L"), K::Eof]),
            ("1. 1.5 .5 1e5 1.5E-3 01.5", {
                let v = ["1.", "1.5", ".5", "1e5", "1.5E-3", "01.5"];
                v.into_iter().map(K::Float).chain([K::Eof]).collect()
            }),
            ("5e", vec![K::Decimal("5"), K::Id("e"), K::Eof]),
            ("5e+", vec![K::Decimal("5"), K::Id("e"), K::Plus, K::Eof]),
            ("1.2.3", vec![K::Float("1.2"), K::Float(".3"), K::Eof]),
            ("'it''s' ''", vec![K::Str("it's".into()), K::Str(String::new()), K::Eof]),
            ("'a\nb'", vec![K::Str("a\nb".into()), K::Eof]),
            ("'中文'", vec![K::Str("中文".into()), K::Eof]),
            ("= <> > >= < <= ( ) , + -", {
                let v = [K::Eq, K::Ne, K::Gt, K::Ge, K::Lt, K::Le, K::LParen, K::RParen, K::Comma, K::Plus, K::Minus];
                v.into_iter().chain([K::Eof]).collect()
            }),
            ("a -- comment\n= 1", vec![K::Id("a"), K::Eq, K::Decimal("1"), K::Eof]),
            ("a -- comment to the end", vec![K::Id("a"), K::Eof]),
            ("a /* x * / y */ = /**/ 1", vec![K::Id("a"), K::Eq, K::Decimal("1"), K::Eof]),
            ("- -1", vec![K::Minus, K::Minus, K::Decimal("1"), K::Eof]),
            (" \t\r\n\x0c", vec![K::Eof]),
        ];
        for (text, want) in cases {
            assert_eq!(kinds(text), want, "{text:?}");
        }
    }

    #[test]
    fn offsets_are_bytes() {
        let tokens = tokenize("'é' = b").expect("lexes");
        let at: Vec<usize> = tokens.iter().map(|t| t.at).collect();
        assert_eq!(at, vec![0, 5, 7, 8]);
    }

    #[test]
    fn lexical_errors() {
        let cases = [
            ("a = 'x", FilterError::UnterminatedString { at: 4 }),
            ("a /* x", FilterError::UnterminatedComment { at: 2 }),
            ("a # 1", FilterError::UnexpectedChar { found: '#', at: 2 }),
            ("a != 1", FilterError::UnexpectedChar { found: '!', at: 2 }),
            ("a.b", FilterError::UnexpectedChar { found: '.', at: 1 }),
            ("é", FilterError::UnexpectedChar { found: 'é', at: 0 }),
            ("a\u{a0}", FilterError::UnexpectedChar { found: '\u{a0}', at: 1 }),
            ("a / b", FilterError::UnexpectedChar { found: '/', at: 2 }),
        ];
        for (text, want) in cases {
            assert_eq!(tokenize(text), Err(want), "{text:?}");
        }
    }
}
