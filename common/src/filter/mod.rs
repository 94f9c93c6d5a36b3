//! SQL92 message filter: RocketMQ 4.9's `org.apache.rocketmq.filter` (`SqlFilter`, grammar
//! `SelectorParser.jj`, derived from ActiveMQ's JMS selector) as a pure function of a message's
//! properties. The broker compiles a consumer's SQL92 subscription once with
//! [`SqlFilter::compile`] and asks [`SqlFilter::matches`] per message, as
//! `ExpressionMessageFilter.isMatchedByCommitLog` does.
//!
//! # Grammar (details in `parser.rs` and `lexer.rs`)
//!
//! - literals: strings `'it''s'`, integers `10` / `10L` (a Java `int` when it fits, else `long`),
//!   floats `1.5`, `.5`, `1.`, `3.1E10` (no hex, no octal, no sign: `-` is an operator),
//!   `TRUE`, `FALSE`, `NULL`;
//! - properties: `[A-Za-z_$][A-Za-z0-9_$]*`, case-sensitive (`TAGS` is the message's tag, `KEYS`
//!   its keys, like any other property);
//! - operators by precedence, loosest first: `OR`; `AND`; `=`, `<>`, `IS [NOT] NULL`; `>`, `>=`,
//!   `<`, `<=`, `[NOT] BETWEEN x AND y`, `[NOT] IN ('a', ...)`; prefix `+`, `-`, `NOT`;
//!   parentheses. Keywords are case-insensitive. `--` line and `/* */` block comments.
//! - there is no `LIKE`, no arithmetic, no `!=`; `CONTAINS`/`STARTSWITH`/`ENDSWITH` came in 5.x and
//!   are not part of 4.9's grammar.
//!
//! # Semantics
//!
//! Property values are strings. Java's three-valued logic: a comparison involving a missing
//! property is unknown (`null`), `NOT unknown` is unknown, `AND`/`OR` follow SQL's tables, and a
//! message matches only when the whole expression is TRUE. Comparing a property with a number
//! converts the property to the number's Java type (`Integer`/`Long`/`Double.valueOf`); two
//! properties under `>`/`<` compare as doubles; `=` between strings is exact. A conversion that
//! fails makes the evaluation fail ([`SqlFilter::evaluate`] returns the error) and the message
//! does not match — in Java the exception escapes the whole expression, so `a > 1 OR b = 'x'` does
//! not match a message whose `a` is `"abc"`. See `expression.rs` and `value.rs` for every case.
//!
//! # Deviations from Java
//!
//! - Tokens after a complete expression are an error (Java ignores them: `a = 1 b = 2` is `a = 1`).
//! - A `--` comment may end at the end of the text without a newline.
//! - Limits on length, nesting and `IN` lists ([`crate::limits`]); Java has none.
//! - `Double.valueOf` of a hexadecimal float string and `Integer.valueOf` of non-ASCII digits fail
//!   here; Java accepts them.
//!
//! Nothing here panics on any input: the text comes from consumers over the network and the
//! property values from producers.

mod error;
mod expression;
mod lexer;
mod parser;
mod value;

use std::fmt;

pub use error::EvalError;
pub use error::FilterError;
use expression::Expr;
use expression::truth;

use crate::message::properties::Properties;

/// `ExpressionType.SQL92`: the `expressionType` of a subscription filtered by a [`SqlFilter`].
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// A compiled SQL92 filter expression.
#[derive(Clone, Debug)]
pub struct SqlFilter {
    expression: Box<str>,
    root: Expr,
}

impl SqlFilter {
    /// Compiles `expression`; the error says what is wrong and at which byte.
    pub fn compile(expression: &str) -> Result<SqlFilter, FilterError> {
        let root = parser::parse(expression)?;
        Ok(SqlFilter { expression: expression.into(), root })
    }

    /// The text this filter was compiled from.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The expression's truth value for a message whose property `name` is `property(name)`:
    /// `Some(true)`, `Some(false)`, `None` (unknown), or the error Java would have thrown.
    pub fn evaluate<'p>(&self, property: impl Fn(&str) -> Option<&'p str>) -> Result<Option<bool>, EvalError> {
        truth(self.root.evaluate(&property)?)
    }

    /// Whether a message whose property `name` is `property(name)` passes: the expression is TRUE
    /// (unknown and evaluation errors do not pass).
    pub fn matches<'p>(&self, property: impl Fn(&str) -> Option<&'p str>) -> bool {
        matches!(self.evaluate(property), Ok(Some(true)))
    }

    /// [`SqlFilter::matches`] over a message's properties.
    pub fn matches_properties(&self, properties: &Properties) -> bool {
        self.matches(|name| properties.get(name))
    }
}

/// Equal when the compiled trees are, whatever the spacing, comments or keyword case of the text
/// (as Java's `Expression.equals`).
impl PartialEq for SqlFilter {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl fmt::Display for SqlFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}

#[cfg(test)]
mod tests;
