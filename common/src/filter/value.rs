//! Runtime values of the SQL92 filter and Java's comparison between them
//! (`ComparisonExpression.__compare` of RocketMQ 4.9 with `convertStringExpressions` on, which
//! `SelectorParser.parse` always sets).
//!
//! A value is `None` (Java `null`: a missing property, `NULL`, an unknown truth value) or a
//! [`Scalar`]. Only the Java types the filter can produce exist: `Integer`, `Long`, `Double` from
//! literals and negation, `String` from properties and string literals, `Boolean` from literals
//! and boolean expressions. `Byte`, `Short` and `Float` never occur.
//!
//! Comparison rules (see [`java_compare`]):
//! - same type: `compareTo` (strings by UTF-16 code units; doubles by `Double.compare`, where
//!   `-0.0 < 0.0` and NaN is above everything and equal to itself);
//! - number vs number: the narrower one widens (`Integer` → `Long` → `Double`);
//! - string vs number: the **string** is converted to the number's type with `Integer.valueOf`,
//!   `Long.valueOf` or `Double.valueOf`; a failure is an error (Java throws), so `'3.0'` vs `3`
//!   fails while `'3'` vs `3.0` is equal, and `'3000000000'` vs `5` fails (not an `int`);
//! - string vs boolean: `Boolean.valueOf(string)` (`"true"` in any case is true, anything else
//!   false); boolean vs string is a `ClassCastException` in Java, an error here;
//! - boolean vs number and number vs boolean: "less" (Java's `return -1` fallback).

use std::cmp::Ordering;

use super::error::EvalError;

/// A non-null value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar<'a> {
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

/// A value or Java `null`.
pub(crate) type Value<'a> = Option<Scalar<'a>>;

/// `__compare(lv, rv)`: how `left` orders against `right`, converting as Java does.
pub(crate) fn java_compare(left: Scalar<'_>, right: Scalar<'_>) -> Result<Ordering, EvalError> {
    use Scalar::*;
    Ok(match (left, right) {
        (Bool(l), Bool(r)) => l.cmp(&r),
        (Int(l), Int(r)) => l.cmp(&r),
        (Long(l), Long(r)) => l.cmp(&r),
        (Double(l), Double(r)) => java_double_compare(l, r),
        (Str(l), Str(r)) => l.encode_utf16().cmp(r.encode_utf16()),

        (Int(l), Long(r)) => i64::from(l).cmp(&r),
        (Int(l), Double(r)) => java_double_compare(f64::from(l), r),
        (Long(l), Int(r)) => l.cmp(&i64::from(r)),
        // `(double) long`, lossy above 2^53 exactly as in Java.
        (Long(l), Double(r)) => java_double_compare(l as f64, r),
        (Double(l), Int(r)) => java_double_compare(l, f64::from(r)),
        (Double(l), Long(r)) => java_double_compare(l, r as f64),

        (Int(l), Str(r)) => l.cmp(&java_integer_value_of(r)?),
        (Long(l), Str(r)) => l.cmp(&java_long_value_of(r)?),
        (Double(l), Str(r)) => java_double_compare(l, java_double_value_of(r)?),
        (Str(l), Int(r)) => java_integer_value_of(l)?.cmp(&r),
        (Str(l), Long(r)) => java_long_value_of(l)?.cmp(&r),
        (Str(l), Double(r)) => java_double_compare(java_double_value_of(l)?, r),
        (Str(l), Bool(r)) => java_boolean_value_of(l).cmp(&r),
        // Java casts the Boolean on the left to String here and throws.
        (Bool(_), Str(r)) => return Err(EvalError::boolean_with_string(r)),

        (Bool(_), Int(_) | Long(_) | Double(_)) | (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
    })
}

/// `Double.compare`: a total order where `-0.0 < 0.0` and every NaN equals every NaN and is above
/// `+Infinity`.
pub(crate) fn java_double_compare(l: f64, r: f64) -> Ordering {
    if l < r {
        return Ordering::Less;
    }
    if l > r {
        return Ordering::Greater;
    }
    // `doubleToLongBits` folds every NaN into one pattern; compared as signed longs.
    let bits = |d: f64| if d.is_nan() { 0x7ff8_0000_0000_0000_i64 } else { d.to_bits() as i64 };
    bits(l).cmp(&bits(r))
}

/// `Integer.valueOf(String)`: an optional sign and ASCII digits, no spaces.
pub(crate) fn java_integer_value_of(s: &str) -> Result<i32, EvalError> {
    s.parse::<i32>().map_err(|_| EvalError::not_a_number(s, "int"))
}

/// `Long.valueOf(String)`.
pub(crate) fn java_long_value_of(s: &str) -> Result<i64, EvalError> {
    s.parse::<i64>().map_err(|_| EvalError::not_a_number(s, "long"))
}

/// `Boolean.valueOf(String)`: true only for `"true"` in any case; never fails.
pub(crate) fn java_boolean_value_of(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// `Double.valueOf(String)` (`FloatingDecimal.readJavaFormatString`): surrounding characters up to
/// U+0020 are trimmed; then an optional sign and `NaN`, `Infinity`, or digits with at most one `.`
/// and an optional `e`/`E` exponent, optionally followed by one of `fFdD`. Hexadecimal
/// floating-point strings (`0x1p3`) are rejected here although Java accepts them.
pub(crate) fn java_double_value_of(s: &str) -> Result<f64, EvalError> {
    parse_java_double(s).ok_or_else(|| EvalError::not_a_number(s, "double"))
}

fn parse_java_double(s: &str) -> Option<f64> {
    let trimmed = s.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let bytes = body.as_bytes();
    let number = match bytes.last() {
        Some(b'f' | b'F' | b'd' | b'D') => &body[..body.len() - 1],
        _ => body,
    };
    if !is_java_decimal(number.as_bytes()) {
        return None;
    }
    // Validated as `digits [. digits] [e [sign] digits]`, a form Rust's parser reads identically.
    number.parse::<f64>().ok().map(|v| sign * v)
}

/// `[0-9]* ('.' [0-9]*)? ([eE] [+-]? [0-9]+)?` with at least one mantissa digit.
fn is_java_decimal(b: &[u8]) -> bool {
    let mut i = 0;
    let mut mantissa_digits = 0;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
        mantissa_digits += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
            mantissa_digits += 1;
        }
    }
    if mantissa_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exponent_start {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::Scalar::*;
    use super::*;

    #[test]
    fn double_value_of_matches_java() {
        // Results of java.lang.Double.valueOf on OpenJDK.
        let ok = [
            ("2.75", 2.75),
            ("  2.75\t", 2.75),
            ("+1", 1.0),
            ("-1.5e3", -1500.0),
            ("1.", 1.0),
            (".5", 0.5),
            ("1e-2", 0.01),
            ("2f", 2.0),
            ("2.5D", 2.5),
            ("1e400", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("0003", 3.0),
        ];
        for (s, want) in ok {
            assert_eq!(java_double_value_of(s), Ok(want), "{s:?}");
        }
        assert!(java_double_value_of("NaN").is_ok_and(f64::is_nan));
        for bad in ["", " ", ".", "e5", "1e", "1e+", "abc", "nan", "inf", "1.2.3", "1 2", "1ff", "--1", "0x10", "١"] {
            assert!(java_double_value_of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn integer_value_of_matches_java() {
        assert_eq!(java_integer_value_of("+42"), Ok(42));
        assert_eq!(java_integer_value_of("-2147483648"), Ok(i32::MIN));
        for bad in ["2147483648", " 1", "1.0", "", "-", "0x1"] {
            assert!(java_integer_value_of(bad).is_err(), "{bad:?}");
        }
        assert_eq!(java_long_value_of("3000000000"), Ok(3_000_000_000));
    }

    #[test]
    fn double_compare_is_javas_total_order() {
        assert_eq!(java_double_compare(-0.0, 0.0), Ordering::Less);
        assert_eq!(java_double_compare(f64::NAN, f64::NAN), Ordering::Equal);
        assert_eq!(java_double_compare(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(java_double_compare(1.0, 2.0), Ordering::Less);
    }

    #[test]
    fn compare_converts_like_java() {
        let cases: [(Scalar<'_>, Scalar<'_>, Result<Ordering, ()>); 14] = [
            (Int(3), Long(3), Ok(Ordering::Equal)),
            (Long(3), Double(3.5), Ok(Ordering::Less)),
            (Str("3"), Int(3), Ok(Ordering::Equal)),
            (Str("3"), Double(3.0), Ok(Ordering::Equal)),
            (Str("3.0"), Int(3), Err(())),
            (Str("3000000000"), Int(5), Err(())),
            (Str("3000000000"), Long(5), Ok(Ordering::Greater)),
            (Int(5), Str("abc"), Err(())),
            (Str("TRUE"), Bool(true), Ok(Ordering::Equal)),
            (Str("yes"), Bool(false), Ok(Ordering::Equal)),
            (Bool(true), Str("true"), Err(())),
            (Bool(true), Int(1), Ok(Ordering::Less)),
            (Int(1), Bool(true), Ok(Ordering::Less)),
            (Str("b"), Str("a"), Ok(Ordering::Greater)),
        ];
        for (l, r, want) in cases {
            assert_eq!(java_compare(l, r).map_err(|_| ()), want, "{l:?} vs {r:?}");
        }
    }
}
