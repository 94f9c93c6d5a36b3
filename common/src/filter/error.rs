//! Errors of the SQL92 filter: [`FilterError`] when an expression does not compile, [`EvalError`]
//! when evaluating a compiled one against a message fails the way Java's evaluation throws.
//!
//! Every compile error names the byte offset (0-based, into the expression text) where it was found,
//! so a consumer's subscription error points at the culprit. Evaluation errors carry at most
//! [`VALUE_SHOWN_MAX_CHARS`] characters of the offending property value: they end up in logs and the
//! value came from a producer.

use thiserror::Error;

/// Characters of a property value an [`EvalError`] keeps.
const VALUE_SHOWN_MAX_CHARS: usize = 64;

/// Why an expression did not compile (Java: `MQFilterException("Invalid MessageSelector. ")`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    /// The text is longer than the limit.
    #[error("expression is {len} bytes, more than the {max} allowed")]
    TooLong { len: usize, max: usize },
    /// A character no token starts with.
    #[error("unexpected character {found:?} at byte {at}")]
    UnexpectedChar { found: char, at: usize },
    /// A `'` without its closing `'`.
    #[error("unterminated string literal starting at byte {at}")]
    UnterminatedString { at: usize },
    /// A `/*` without its `*/`.
    #[error("unterminated comment starting at byte {at}")]
    UnterminatedComment { at: usize },
    /// The grammar wanted something else here.
    #[error("unexpected {found} at byte {at}, expected {expected}")]
    UnexpectedToken { found: String, expected: &'static str, at: usize },
    /// Parentheses, prefix operators or operator chains nested deeper than the limit.
    #[error("expression nested deeper than {max} levels at byte {at}")]
    TooDeep { max: usize, at: usize },
    /// An `IN (...)` list longer than the limit.
    #[error("IN list longer than {max} values at byte {at}")]
    InListTooLong { max: usize, at: usize },
    /// A numeric literal Java cannot hold (`Long` overflow, a double that is infinite or below
    /// `Double.MIN_VALUE`, which includes `0.0`).
    #[error("numeric literal {literal:?} at byte {at} {reason}")]
    InvalidNumber { literal: String, reason: &'static str, at: usize },
    /// Where a boolean is required (the whole expression, `AND`/`OR`/`NOT` operands), a value that
    /// is neither a boolean expression nor a property.
    #[error("expression at byte {at} does not result in a boolean value")]
    NotBoolean { at: usize },
    /// An operand of `>`, `>=`, `<`, `<=` or `BETWEEN` that is a string, boolean or `NULL` literal or
    /// a boolean expression: only numbers and properties compare.
    #[error("operand of the comparison at byte {at} cannot be compared with an ordering operator")]
    NotOrderable { at: usize },
    /// `= NULL` or `<> NULL`: Java requires `IS NULL` / `IS NOT NULL`.
    #[error("NULL cannot be compared with '=' or '<>' (use IS NULL / IS NOT NULL) at byte {at}")]
    NullEquality { at: usize },
    /// `TRUE = 1`: a boolean literal on the left of `=` needs a boolean on the right.
    #[error("boolean literal cannot be compared with a non-boolean literal at byte {at}")]
    IncompatibleEquality { at: usize },
    /// `IN` / `NOT IN` after something other than a property.
    #[error("IN at byte {at} needs a property on its left")]
    InNeedsProperty { at: usize },
    /// `BETWEEN NULL AND ...` or `BETWEEN ... AND NULL`.
    #[error("BETWEEN bounds cannot be NULL at byte {at}")]
    BetweenNull { at: usize },
    /// `BETWEEN 10 AND 0`: the lower literal bound above the upper one.
    #[error("BETWEEN at byte {at}: the left bound must be less than or equal to the right bound")]
    BetweenInverted { at: usize },
}

/// Why evaluating a compiled expression failed; Java throws in the same places and
/// `ExpressionMessageFilter` then treats the message as not matching.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvalError {
    /// A property value compared with a number that Java's `Integer`/`Long`/`Double.valueOf` rejects.
    #[error("value {value:?} is not a Java {target}")]
    NotANumber { value: String, target: &'static str },
    /// A boolean on the left of `=` and a string on the right (a `ClassCastException` in Java).
    #[error("a boolean cannot be compared with the string {value:?}")]
    BooleanWithString { value: String },
    /// A logical operator met a non-boolean operand; the parser never builds such a tree.
    #[error("logical operand is not a boolean")]
    NotBoolean,
}

impl EvalError {
    pub(crate) fn not_a_number(value: &str, target: &'static str) -> Self {
        EvalError::NotANumber { value: shown(value), target }
    }

    pub(crate) fn boolean_with_string(value: &str) -> Self {
        EvalError::BooleanWithString { value: shown(value) }
    }
}

fn shown(value: &str) -> String {
    value.chars().take(VALUE_SHOWN_MAX_CHARS).collect()
}
