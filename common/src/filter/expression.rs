//! The compiled form of a SQL92 filter and its evaluation with Java's three-valued logic
//! (`LogicExpression`, `UnaryExpression`, `ComparisonExpression`, `UnaryInExpression` of RocketMQ
//! 4.9).
//!
//! The tree is built only by `parser.rs`, which guarantees: logical operands (`And`, `Or`, `Not`)
//! are boolean expressions or a `BooleanCast` of a property; `In` is on a property; the depth is
//! bounded by `SQL_FILTER_NESTING_MAX_LEVELS`, so evaluation and drop recurse a bounded amount.
//!
//! Semantics (`None` is Java `null`, "unknown"):
//! - `And`/`Or` evaluate operands left to right and stop at the first FALSE/TRUE; otherwise the
//!   result is unknown if any operand was. Java nests `a AND b AND c` to the left; evaluating the
//!   flattened list in order is the same function and keeps the tree shallow.
//! - `Not` of unknown is unknown.
//! - `Equal` (`=`, `IS NULL`): both null → TRUE; left null → unknown; right null → FALSE (Java's
//!   asymmetry: `a = 'x'` is unknown for a missing `a`, `'x' = a` is FALSE); else [`java_compare`]
//!   is equal.
//! - `Compare` (`> >= < <=`): a null side → unknown (the right side is not evaluated when the left
//!   is null); two strings are both converted with `Double.valueOf`; else [`java_compare`].
//! - `In`: a missing property → unknown; else membership (xor `NOT`).
//! - `Negate` of a non-number (a property is a string) is null; `BooleanCast` of a non-boolean is
//!   FALSE, so a bare property never matches.
//! - Any [`EvalError`] aborts the whole evaluation, as Java's exception does.

use super::error::EvalError;
use super::value::Scalar;
use super::value::Value;
use super::value::java_compare;
use super::value::java_double_compare;
use super::value::java_double_value_of;

/// A literal (`ConstantExpression` / `BooleanConstantExpression`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Constant {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Box<str>),
}

/// The ordering operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Gt,
    Ge,
    Lt,
    Le,
}

/// A node of a compiled expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Constant(Constant),
    Property(Box<str>),
    /// Unary `-`.
    Negate(Box<Expr>),
    /// A property used where a boolean is required.
    BooleanCast(Box<Expr>),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `=`; also `IS NULL` as `Equal(x, Constant::Null)`.
    Equal(Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, CompareOp, Box<Expr>),
    /// `IN` / `NOT IN` on a property; `values` sorted and deduplicated.
    In {
        property: Box<str>,
        values: Vec<Box<str>>,
        negated: bool,
    },
}

impl Expr {
    /// Java `BooleanExpression`: what may stand where a truth value is required without a cast.
    pub(crate) fn is_boolean(&self) -> bool {
        match self {
            Expr::Constant(c) => matches!(c, Constant::Null | Constant::Bool(_)),
            Expr::Property(_) | Expr::Negate(_) => false,
            Expr::BooleanCast(_)
            | Expr::Not(_)
            | Expr::And(_)
            | Expr::Or(_)
            | Expr::Equal(..)
            | Expr::Compare(..)
            | Expr::In { .. } => true,
        }
    }

    /// The value of this node for one message.
    pub(crate) fn evaluate<'a, 'p: 'a>(
        &'a self,
        lookup: &dyn Fn(&str) -> Option<&'p str>,
    ) -> Result<Value<'a>, EvalError> {
        Ok(match self {
            Expr::Constant(c) => constant_value(c),
            Expr::Property(name) => lookup(name).map(Scalar::Str),
            Expr::Negate(inner) => match inner.evaluate(lookup)? {
                Some(Scalar::Int(i)) => Some(Scalar::Int(i.wrapping_neg())),
                Some(Scalar::Long(l)) => Some(Scalar::Long(l.wrapping_neg())),
                Some(Scalar::Double(d)) => Some(Scalar::Double(-d)),
                _ => None,
            },
            Expr::BooleanCast(inner) => match inner.evaluate(lookup)? {
                None => None,
                Some(Scalar::Bool(b)) => Some(Scalar::Bool(b)),
                Some(_) => Some(Scalar::Bool(false)),
            },
            Expr::Not(inner) => truth(inner.evaluate(lookup)?)?.map(|b| Scalar::Bool(!b)),
            Expr::And(operands) => logic(operands, false, lookup)?,
            Expr::Or(operands) => logic(operands, true, lookup)?,
            Expr::Equal(left, right) => {
                let l = left.evaluate(lookup)?;
                let r = right.evaluate(lookup)?;
                match (l, r) {
                    (None, None) => Some(Scalar::Bool(true)),
                    (None, Some(_)) => None,
                    (Some(_), None) => Some(Scalar::Bool(false)),
                    (Some(l), Some(r)) => Some(Scalar::Bool(java_compare(l, r)?.is_eq())),
                }
            }
            Expr::Compare(left, op, right) => {
                let Some(l) = left.evaluate(lookup)? else { return Ok(None) };
                let Some(r) = right.evaluate(lookup)? else { return Ok(None) };
                let order = match (l, r) {
                    (Scalar::Str(l), Scalar::Str(r)) => {
                        java_double_compare(java_double_value_of(l)?, java_double_value_of(r)?)
                    }
                    (l, r) => java_compare(l, r)?,
                };
                Some(Scalar::Bool(match op {
                    CompareOp::Gt => order.is_gt(),
                    CompareOp::Ge => order.is_ge(),
                    CompareOp::Lt => order.is_lt(),
                    CompareOp::Le => order.is_le(),
                }))
            }
            Expr::In { property, values, negated } => lookup(property).map(|v| {
                let found = values.binary_search_by(|probe| (**probe).cmp(v)).is_ok();
                Scalar::Bool(found ^ negated)
            }),
        })
    }
}

fn constant_value(c: &Constant) -> Value<'_> {
    match c {
        Constant::Null => None,
        Constant::Bool(b) => Some(Scalar::Bool(*b)),
        Constant::Int(i) => Some(Scalar::Int(*i)),
        Constant::Long(l) => Some(Scalar::Long(*l)),
        Constant::Double(d) => Some(Scalar::Double(*d)),
        Constant::Str(s) => Some(Scalar::Str(s)),
    }
}

/// A logical operand as a truth value (Java's `(Boolean)` cast).
pub(crate) fn truth(value: Value<'_>) -> Result<Option<bool>, EvalError> {
    match value {
        None => Ok(None),
        Some(Scalar::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(EvalError::NotBoolean),
    }
}

/// `AND` (`decisive` false) or `OR` (`decisive` true) over `operands` in order.
fn logic<'a, 'p: 'a>(
    operands: &'a [Expr],
    decisive: bool,
    lookup: &dyn Fn(&str) -> Option<&'p str>,
) -> Result<Value<'a>, EvalError> {
    let mut unknown = false;
    for operand in operands {
        match truth(operand.evaluate(lookup)?)? {
            Some(b) if b == decisive => return Ok(Some(Scalar::Bool(decisive))),
            Some(_) => {}
            None => unknown = true,
        }
    }
    Ok(if unknown { None } else { Some(Scalar::Bool(!decisive)) })
}
