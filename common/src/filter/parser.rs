//! Recursive-descent parser of the SQL92 filter: the productions of RocketMQ 4.9's
//! `SelectorParser.jj` and the checks its `ComparisonExpression.create*` / `asBooleanExpression`
//! make while building the tree.
//!
//! ```text
//! selector   := or EOF
//! or         := and ( OR and )*
//! and        := equality ( AND equality )*
//! equality   := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
//! comparison := unary ( ('>' | '>=' | '<' | '<=') unary
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN '(' string ( ',' string )* ')' )*
//! unary      := '+' unary | '-' unary | NOT unary | primary
//! primary    := string | decimal | float | TRUE | FALSE | NULL | identifier | '(' or ')'
//! ```
//!
//! Note what this grammar implies, kept as in Java: `NOT` binds tighter than comparisons
//! (`NOT a = 1` is `(NOT a) = 1`; write `NOT (a = 1)`), and `a <> b` is `NOT (a = b)`.
//!
//! Checks, each a [`FilterError`]: the whole expression and every `AND`/`OR`/`NOT` operand is a
//! boolean expression or a property (cast to boolean); operands of `> >= < <=` and `BETWEEN` are
//! not string/boolean/`NULL` literals nor boolean expressions; neither side of `=`/`<>` is the
//! `NULL` literal; a boolean literal left of `=` needs a boolean literal right when both are
//! literals; `IN` follows a property; literal `BETWEEN` bounds are non-null and ordered (bounds that
//! are expressions, such as `-5`, are not checked, as in Java); decimal literals fit a Java `long`;
//! float literals are finite and at least `Double.MIN_VALUE` (so `0.0` is rejected, as in Java).
//!
//! Deviation: Java's `JmsSelector` production stops after the expression and ignores what follows
//! (`a = 1 b = 2` selects on `a = 1`); here anything after the expression is an error.
//!
//! Bounds: text length, nesting of parentheses and prefix operators, depth of the built tree and
//! `IN` list length are limited ([`crate::limits`]), so hostile input costs bounded stack and time.

use super::error::FilterError;
use super::expression::CompareOp;
use super::expression::Constant;
use super::expression::Expr;
use super::lexer::Token;
use super::lexer::TokenKind;
use super::lexer::tokenize;
use super::value::Scalar;
use super::value::java_compare;
use crate::limits::SQL_FILTER_EXPRESSION_MAX_BYTES;
use crate::limits::SQL_FILTER_IN_LIST_MAX_COUNT;
use crate::limits::SQL_FILTER_NESTING_MAX_LEVELS;

/// Compiles `text` into a tree whose root is a boolean expression.
pub(crate) fn parse(text: &str) -> Result<Expr, FilterError> {
    if text.len() > SQL_FILTER_EXPRESSION_MAX_BYTES {
        return Err(FilterError::TooLong { len: text.len(), max: SQL_FILTER_EXPRESSION_MAX_BYTES });
    }
    let mut parser = Parser { tokens: tokenize(text)?, pos: 0, nesting: 0 };
    let root = parser.or_expression()?;
    parser.expect_end()?;
    let root = parser.as_boolean(root)?;
    debug_assert!(root.depth <= SQL_FILTER_NESTING_MAX_LEVELS && root.expr.is_boolean());
    Ok(root.expr)
}

/// A parsed subexpression, the depth of its tree and where its text starts.
struct Node {
    expr: Expr,
    depth: usize,
    at: usize,
}

struct Parser<'s> {
    /// Ends with the one [`TokenKind::Eof`]; `pos` never moves past it.
    tokens: Vec<Token<'s>>,
    pos: usize,
    /// Open parentheses and prefix operators around the current position.
    nesting: usize,
}

impl<'s> Parser<'s> {
    fn peek(&self, ahead: usize) -> &TokenKind<'s> {
        self.tokens.get(self.pos + ahead).map_or(&TokenKind::Eof, |t| &t.kind)
    }

    /// Where the current token starts (the text's end at `Eof`).
    fn at(&self) -> usize {
        self.tokens.get(self.pos).or(self.tokens.last()).map_or(0, |t| t.at)
    }

    /// Takes the current token and moves on (stays at `Eof`).
    fn advance(&mut self) -> TokenKind<'s> {
        match self.tokens.get_mut(self.pos) {
            Some(token) if token.kind != TokenKind::Eof => {
                self.pos += 1;
                std::mem::replace(&mut token.kind, TokenKind::Eof)
            }
            _ => TokenKind::Eof,
        }
    }

    fn unexpected(&self, expected: &'static str) -> FilterError {
        FilterError::UnexpectedToken { found: self.peek(0).describe(), expected, at: self.at() }
    }

    fn expect(&mut self, kind: TokenKind<'static>, expected: &'static str) -> Result<(), FilterError> {
        if *self.peek(0) != kind {
            return Err(self.unexpected(expected));
        }
        self.advance();
        Ok(())
    }

    fn expect_end(&self) -> Result<(), FilterError> {
        match self.peek(0) {
            TokenKind::Eof => Ok(()),
            _ => Err(self.unexpected("an operator or the end of the expression")),
        }
    }

    /// Enters a parenthesis or prefix operator at `at`.
    fn enter(&mut self, at: usize) -> Result<(), FilterError> {
        self.nesting += 1;
        if self.nesting > SQL_FILTER_NESTING_MAX_LEVELS {
            return Err(FilterError::TooDeep { max: SQL_FILTER_NESTING_MAX_LEVELS, at });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    /// A new node over children of at most `child_depth`.
    fn node(expr: Expr, child_depth: usize, at: usize) -> Result<Node, FilterError> {
        let depth = child_depth + 1;
        if depth > SQL_FILTER_NESTING_MAX_LEVELS {
            return Err(FilterError::TooDeep { max: SQL_FILTER_NESTING_MAX_LEVELS, at });
        }
        Ok(Node { expr, depth, at })
    }

    /// `asBooleanExpression`: boolean expressions pass, a property is cast, anything else fails.
    fn as_boolean(&self, node: Node) -> Result<Node, FilterError> {
        match node.expr {
            Expr::Property(_) => Self::node(Expr::BooleanCast(Box::new(node.expr)), node.depth, node.at),
            ref e if e.is_boolean() => Ok(node),
            _ => Err(FilterError::NotBoolean { at: node.at }),
        }
    }

    fn or_expression(&mut self) -> Result<Node, FilterError> {
        self.logic_chain(TokenKind::Or)
    }

    fn and_expression(&mut self) -> Result<Node, FilterError> {
        self.logic_chain(TokenKind::And)
    }

    /// `operand ( op operand )*` flattened into one `Or`/`And` node (see `expression.rs` on why
    /// that is the same function as Java's left-nested tree).
    fn logic_chain(&mut self, op: TokenKind<'static>) -> Result<Node, FilterError> {
        let or = op == TokenKind::Or;
        let first = if or { self.and_expression()? } else { self.equality_expression()? };
        if *self.peek(0) != op {
            return Ok(first);
        }
        let at = first.at;
        let mut depth = first.depth;
        let mut operands = vec![self.as_boolean(first)?.expr];
        while *self.peek(0) == op {
            self.advance();
            let next = if or { self.and_expression()? } else { self.equality_expression()? };
            let next = self.as_boolean(next)?;
            depth = depth.max(next.depth);
            operands.push(next.expr);
        }
        Self::node(if or { Expr::Or(operands) } else { Expr::And(operands) }, depth, at)
    }

    fn equality_expression(&mut self) -> Result<Node, FilterError> {
        let mut left = self.comparison_expression()?;
        loop {
            let op_at = self.at();
            left = match self.peek(0) {
                TokenKind::Eq => {
                    self.advance();
                    let right = self.comparison_expression()?;
                    equal(left, right, op_at)?
                }
                TokenKind::Ne => {
                    self.advance();
                    let right = self.comparison_expression()?;
                    not(equal(left, right, op_at)?)?
                }
                TokenKind::Is => {
                    self.advance();
                    let negated = *self.peek(0) == TokenKind::Not;
                    if negated {
                        self.advance();
                    }
                    self.expect(TokenKind::Null, if negated { "NULL" } else { "NULL or NOT NULL" })?;
                    let null = Node { expr: Expr::Constant(Constant::Null), depth: 1, at: op_at };
                    let is_null = raw_equal(left, null)?;
                    if negated { not(is_null)? } else { is_null }
                }
                _ => return Ok(left),
            };
        }
    }

    fn comparison_expression(&mut self) -> Result<Node, FilterError> {
        let mut left = self.unary_expression()?;
        loop {
            let op_at = self.at();
            let op = match self.peek(0) {
                TokenKind::Gt => Some(CompareOp::Gt),
                TokenKind::Ge => Some(CompareOp::Ge),
                TokenKind::Lt => Some(CompareOp::Lt),
                TokenKind::Le => Some(CompareOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                self.advance();
                let right = self.unary_expression()?;
                left = compare(left, op, right, op_at)?;
                continue;
            }
            // `NOT` here only as `NOT BETWEEN` / `NOT IN` (the grammar's LOOKAHEAD(2)).
            let negated = *self.peek(0) == TokenKind::Not;
            match self.peek(usize::from(negated)) {
                TokenKind::Between => {
                    self.pos += usize::from(negated);
                    self.advance();
                    left = self.between(left, negated, op_at)?;
                }
                TokenKind::In => {
                    self.pos += usize::from(negated);
                    self.advance();
                    left = self.in_list(left, negated, op_at)?;
                }
                _ => return Ok(left),
            }
        }
    }

    /// After `[NOT] BETWEEN`: `low AND high`.
    fn between(&mut self, value: Node, negated: bool, at: usize) -> Result<Node, FilterError> {
        let low = self.unary_expression()?;
        self.expect(TokenKind::And, "AND")?;
        let high = self.unary_expression()?;
        if negated {
            let below = compare(clone_node(&value), CompareOp::Lt, low, at)?;
            let above = compare(value, CompareOp::Gt, high, at)?;
            let depth = below.depth.max(above.depth);
            return Self::node(Expr::Or(vec![below.expr, above.expr]), depth, at);
        }
        if let (Expr::Constant(l), Expr::Constant(h)) = (&low.expr, &high.expr) {
            let (Some(l), Some(h)) = (constant_scalar(l), constant_scalar(h)) else {
                return Err(FilterError::BetweenNull { at });
            };
            match java_compare(h, l) {
                Ok(order) if order.is_lt() => return Err(FilterError::BetweenInverted { at }),
                Ok(_) => {}
                Err(_) => return Err(FilterError::NotOrderable { at }),
            }
        }
        let from = compare(clone_node(&value), CompareOp::Ge, low, at)?;
        let to = compare(value, CompareOp::Le, high, at)?;
        let depth = from.depth.max(to.depth);
        Self::node(Expr::And(vec![from.expr, to.expr]), depth, at)
    }

    /// After `[NOT] IN`: `( 'a', 'b', ... )`.
    fn in_list(&mut self, left: Node, negated: bool, at: usize) -> Result<Node, FilterError> {
        self.expect(TokenKind::LParen, "'('")?;
        let mut values: Vec<Box<str>> = Vec::new();
        loop {
            let TokenKind::Str(_) = self.peek(0) else {
                return Err(self.unexpected("a string literal"));
            };
            if values.len() == SQL_FILTER_IN_LIST_MAX_COUNT {
                return Err(FilterError::InListTooLong { max: SQL_FILTER_IN_LIST_MAX_COUNT, at: self.at() });
            }
            if let TokenKind::Str(s) = self.advance() {
                values.push(s.into_boxed_str());
            }
            match self.peek(0) {
                TokenKind::Comma => {
                    self.advance();
                }
                TokenKind::RParen => {
                    self.advance();
                    break;
                }
                _ => return Err(self.unexpected("',' or ')'")),
            }
        }
        let Expr::Property(property) = left.expr else {
            return Err(FilterError::InNeedsProperty { at });
        };
        values.sort_unstable();
        values.dedup();
        Self::node(Expr::In { property, values, negated }, left.depth, left.at)
    }

    fn unary_expression(&mut self) -> Result<Node, FilterError> {
        enum Prefix {
            Plus,
            Minus,
            Not,
        }
        let at = self.at();
        let prefix = match self.peek(0) {
            TokenKind::Plus => Prefix::Plus,
            TokenKind::Minus => Prefix::Minus,
            TokenKind::Not => Prefix::Not,
            _ => return self.primary_expression(),
        };
        self.enter(at)?;
        self.advance();
        let inner = self.unary_expression()?;
        self.leave();
        match prefix {
            // Unary `+` is the identity.
            Prefix::Plus => Ok(Node { at, ..inner }),
            Prefix::Minus => Self::node(Expr::Negate(Box::new(inner.expr)), inner.depth, at),
            Prefix::Not => not(self.as_boolean(inner)?).map(|n| Node { at, ..n }),
        }
    }

    fn primary_expression(&mut self) -> Result<Node, FilterError> {
        let at = self.at();
        let constant = match self.peek(0) {
            TokenKind::Id(_) | TokenKind::Str(_) | TokenKind::Decimal(_) | TokenKind::Float(_) => None,
            TokenKind::True => Some(Constant::Bool(true)),
            TokenKind::False => Some(Constant::Bool(false)),
            TokenKind::Null => Some(Constant::Null),
            TokenKind::LParen => {
                self.enter(at)?;
                self.advance();
                let inner = self.or_expression()?;
                self.expect(TokenKind::RParen, "')'")?;
                self.leave();
                return Ok(inner);
            }
            _ => return Err(self.unexpected("a literal, a property or '('")),
        };
        let expr = match (constant, self.advance()) {
            (Some(c), _) => Expr::Constant(c),
            (None, TokenKind::Id(name)) => Expr::Property(name.into()),
            (None, TokenKind::Str(s)) => Expr::Constant(Constant::Str(s.into_boxed_str())),
            (None, TokenKind::Decimal(text)) => Expr::Constant(decimal_literal(text, at)?),
            (None, TokenKind::Float(text)) => Expr::Constant(float_literal(text, at)?),
            // Unreachable: the token was peeked above.
            (None, _) => {
                return Err(FilterError::UnexpectedToken { found: "a token".into(), expected: "a literal", at });
            }
        };
        Ok(Node { expr, depth: 1, at })
    }
}

fn clone_node(node: &Node) -> Node {
    Node { expr: node.expr.clone(), depth: node.depth, at: node.at }
}

fn not(inner: Node) -> Result<Node, FilterError> {
    Parser::node(Expr::Not(Box::new(inner.expr)), inner.depth, inner.at)
}

/// `createEqual`: `=` with its operand checks.
fn equal(left: Node, right: Node, at: usize) -> Result<Node, FilterError> {
    for side in [&left, &right] {
        if side.expr == Expr::Constant(Constant::Null) {
            return Err(FilterError::NullEquality { at });
        }
    }
    if let (Expr::Constant(l), Expr::Constant(r)) = (&left.expr, &right.expr)
        && matches!(l, Constant::Bool(_))
        && !matches!(r, Constant::Bool(_) | Constant::Null)
    {
        return Err(FilterError::IncompatibleEquality { at });
    }
    raw_equal(left, right)
}

/// `doCreateEqual`: `=` without checks (also `IS NULL`).
fn raw_equal(left: Node, right: Node) -> Result<Node, FilterError> {
    let depth = left.depth.max(right.depth);
    Parser::node(Expr::Equal(Box::new(left.expr), Box::new(right.expr)), depth, left.at)
}

/// `createGreaterThan` and friends: an ordering comparison with `checkLessThanOperand` on both sides.
fn compare(left: Node, op: CompareOp, right: Node, at: usize) -> Result<Node, FilterError> {
    for side in [&left, &right] {
        let orderable = match &side.expr {
            Expr::Constant(c) => matches!(c, Constant::Int(_) | Constant::Long(_) | Constant::Double(_)),
            e => !e.is_boolean(),
        };
        if !orderable {
            return Err(FilterError::NotOrderable { at });
        }
    }
    let depth = left.depth.max(right.depth);
    Parser::node(Expr::Compare(Box::new(left.expr), op, Box::new(right.expr)), depth, left.at)
}

fn constant_scalar(c: &Constant) -> Option<Scalar<'_>> {
    Some(match c {
        Constant::Null => return None,
        Constant::Bool(b) => Scalar::Bool(*b),
        Constant::Int(i) => Scalar::Int(*i),
        Constant::Long(l) => Scalar::Long(*l),
        Constant::Double(d) => Scalar::Double(*d),
        Constant::Str(s) => Scalar::Str(s),
    })
}

/// `ConstantExpression.createFromDecimal`: a `long`, narrowed to `int` when it fits.
fn decimal_literal(text: &str, at: usize) -> Result<Constant, FilterError> {
    let digits = text.trim_end_matches(['l', 'L']);
    let value = digits.parse::<i64>().map_err(|_| FilterError::InvalidNumber {
        literal: text.chars().take(64).collect(),
        reason: "does not fit a Java long",
        at,
    })?;
    Ok(i32::try_from(value).map_or(Constant::Long(value), Constant::Int))
}

/// `ConstantExpression.createFloat`: a finite double of at least `Double.MIN_VALUE`.
fn float_literal(text: &str, at: usize) -> Result<Constant, FilterError> {
    let invalid = |reason| FilterError::InvalidNumber { literal: text.chars().take(64).collect(), reason, at };
    let value = text.parse::<f64>().map_err(|_| invalid("is not a number"))?;
    if value > f64::MAX {
        return Err(invalid("is greater than Double.MAX_VALUE"));
    }
    // Java compares with `Double.MIN_VALUE`, the smallest positive subnormal: zero fails too.
    if value < f64::from_bits(1) {
        return Err(invalid("is less than Double.MIN_VALUE"));
    }
    Ok(Constant::Double(value))
}
