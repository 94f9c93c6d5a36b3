//! Tests of the SQL92 filter as a whole: the cases of RocketMQ 4.9's `ParserTest` and
//! `ExpressionTest` (filter module), the semantics read from its expression classes, the bounds,
//! and two seeded property checks (compile never panics; `NOT e` is the negation of `e`).

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest::test_runner::RngAlgorithm;
use proptest::test_runner::TestRng;
use proptest::test_runner::TestRunner;

use super::*;
use crate::limits::SQL_FILTER_EXPRESSION_MAX_BYTES;
use crate::limits::SQL_FILTER_IN_LIST_MAX_COUNT;
use crate::limits::SQL_FILTER_NESTING_MAX_LEVELS;

/// Expected outcome of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    True,
    False,
    Unknown,
    Error,
}

use Want::*;

/// An expression, the message properties and the expected outcome.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Want);
/// Recognises the expected compile error.
type ErrorCheck = Box<dyn Fn(&FilterError) -> bool>;

fn outcome(result: Result<Option<bool>, EvalError>) -> Want {
    match result {
        Ok(Some(true)) => True,
        Ok(Some(false)) => False,
        Ok(None) => Unknown,
        Err(_) => Error,
    }
}

fn compile(text: &str) -> SqlFilter {
    SqlFilter::compile(text).unwrap_or_else(|e| panic!("{text:?} should compile: {e}"))
}

fn eval(filter: &SqlFilter, props: &[(&str, &str)]) -> Want {
    let lookup = |name: &str| props.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let want = outcome(filter.evaluate(lookup));
    assert_eq!(filter.matches(lookup), want == True, "matches agrees with evaluate");
    want
}

// ---- ParserTest ----

const AND_EXPRESSION: &str = "a=3 and b<>4 And c>5 AND d<=4";
const AND_EXPRESSION_HAS_BLANK: &str = "a=3  and    b<>4 And c>5 AND d<=4";
const OR_EXPRESSION: &str = "a=3 or b<>4 Or c>5 OR d<=4";

#[test]
fn parser_test_valid_expressions() {
    for text in [
        AND_EXPRESSION,
        OR_EXPRESSION,
        "a in ('3', '4', '5')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a is null",
        "a is not null",
        // `now` is just a property name in the grammar.
        "a <= now",
    ] {
        compile(text);
    }
}

#[test]
fn parser_test_invalid_expressions() {
    let float_overflow = format!("a > 1{}.{}", "1".repeat(400), "1".repeat(10));
    for text in ["a and between 2 and 10", " a between 10 and 0", "a > 100000000000000000000000", &float_overflow] {
        assert!(SqlFilter::compile(text).is_err(), "{text:?} should not compile");
    }
    // ParserTest's float literal is 200 KiB long: over our length limit before anything else.
    let huge = format!("a > 1{}.{}", "1".repeat(2048 * 51), "1".repeat(2048 * 51));
    assert!(matches!(SqlFilter::compile(&huge), Err(FilterError::TooLong { .. })));
}

#[test]
fn parser_test_equals_ignores_spacing() {
    assert_eq!(compile(AND_EXPRESSION), compile(AND_EXPRESSION_HAS_BLANK));
    assert_ne!(compile(AND_EXPRESSION), compile(OR_EXPRESSION));
    assert_eq!(compile("A IN ('x') /* c */ and b is NOT null"), compile("A in ('x') AND b IS NOT NULL"));
}

// ---- compile errors ----

#[test]
fn compile_errors_say_what_and_where() {
    use FilterError as E;
    let token = |at: usize| move |e: &E| matches!(e, E::UnexpectedToken { at: a, .. } if *a == at);
    let cases: Vec<(&str, ErrorCheck)> = vec![
        ("", Box::new(token(0))),
        ("   ", Box::new(token(3))),
        // Java would ignore the trailing `b = 2`.
        ("a = 1 b = 2", Box::new(token(6))),
        ("a = 1)", Box::new(token(5))),
        ("(a = 1", Box::new(token(6))),
        ("a == 1", Box::new(token(3))),
        ("a =", Box::new(token(3))),
        ("a IS 5", Box::new(token(5))),
        ("a IS NOT 5", Box::new(token(9))),
        ("a BETWEEN 1 OR 2", Box::new(token(12))),
        ("a IN ()", Box::new(token(6))),
        ("a IN (1)", Box::new(token(6))),
        ("a IN ('x',)", Box::new(token(10))),
        ("a IN ('x'", Box::new(token(9))),
        ("a IN 'x'", Box::new(token(5))),
        ("+", Box::new(token(1))),
        ("a NOT LIKE 'x'", Box::new(token(2))),
        ("5", Box::new(|e| *e == E::NotBoolean { at: 0 })),
        ("'abc'", Box::new(|e| *e == E::NotBoolean { at: 0 })),
        ("-a", Box::new(|e| *e == E::NotBoolean { at: 0 })),
        ("NOT 5", Box::new(|e| *e == E::NotBoolean { at: 4 })),
        ("a = 1 AND 5", Box::new(|e| *e == E::NotBoolean { at: 10 })),
        ("(5) OR a = 1", Box::new(|e| *e == E::NotBoolean { at: 1 })),
        ("a > 'x'", Box::new(|e| *e == E::NotOrderable { at: 2 })),
        ("a > TRUE", Box::new(|e| *e == E::NotOrderable { at: 2 })),
        ("a >= NULL", Box::new(|e| *e == E::NotOrderable { at: 2 })),
        ("(a = 1) < 2", Box::new(|e| *e == E::NotOrderable { at: 8 })),
        ("a > 1 > 2", Box::new(|e| *e == E::NotOrderable { at: 6 })),
        // `NOT` binds tighter than `>`: this is `(NOT a) > 5`.
        ("NOT a > 5", Box::new(|e| *e == E::NotOrderable { at: 6 })),
        ("a BETWEEN 'x' AND 'y'", Box::new(|e| *e == E::NotOrderable { at: 2 })),
        ("a = NULL", Box::new(|e| *e == E::NullEquality { at: 2 })),
        ("NULL = a", Box::new(|e| *e == E::NullEquality { at: 5 })),
        ("a <> NULL", Box::new(|e| *e == E::NullEquality { at: 2 })),
        ("TRUE = 1", Box::new(|e| *e == E::IncompatibleEquality { at: 5 })),
        ("FALSE <> 'x'", Box::new(|e| *e == E::IncompatibleEquality { at: 6 })),
        ("'x' IN ('a')", Box::new(|e| *e == E::InNeedsProperty { at: 4 })),
        ("5 NOT IN ('a')", Box::new(|e| *e == E::InNeedsProperty { at: 2 })),
        ("a BETWEEN NULL AND 5", Box::new(|e| *e == E::BetweenNull { at: 2 })),
        ("a BETWEEN 10 AND 0", Box::new(|e| *e == E::BetweenInverted { at: 2 })),
        ("a BETWEEN 10L AND 5.5", Box::new(|e| *e == E::BetweenInverted { at: 2 })),
        ("a > 0.0", Box::new(|e| matches!(e, E::InvalidNumber { at: 4, .. }))),
        ("a > 1e-400", Box::new(|e| matches!(e, E::InvalidNumber { at: 4, .. }))),
        ("a > 1e400", Box::new(|e| matches!(e, E::InvalidNumber { at: 4, .. }))),
        ("a > 9223372036854775808", Box::new(|e| matches!(e, E::InvalidNumber { at: 4, .. }))),
        // Java cannot write Long.MIN_VALUE either: the literal overflows before it is negated.
        ("a > -9223372036854775808", Box::new(|e| matches!(e, E::InvalidNumber { at: 5, .. }))),
        ("a = 'x", Box::new(|e| *e == E::UnterminatedString { at: 4 })),
        ("a = 1 /* x", Box::new(|e| *e == E::UnterminatedComment { at: 6 })),
        ("a != 1", Box::new(|e| *e == E::UnexpectedChar { found: '!', at: 2 })),
        ("a.b = 1", Box::new(|e| *e == E::UnexpectedChar { found: '.', at: 1 })),
    ];
    for (text, check) in cases {
        match SqlFilter::compile(text) {
            Ok(f) => panic!("{text:?} compiled to {f:?}"),
            Err(e) => assert!(check(&e), "{text:?}: unexpected error {e:?} ({e})"),
        }
    }
}

#[test]
fn accepted_corner_cases() {
    for text in [
        "TRUE",
        "FALSE",
        "NULL",
        "a",
        "(a)",
        "NOT a",
        "1 = TRUE",
        "TRUE = FALSE",
        "TRUE = a",
        "a = b",
        "'x' = a",
        "(a) IN ('x')",
        "a BETWEEN 1 AND 1",
        // Negated bounds are expressions, not literals: Java does not check their order.
        "a BETWEEN -1 AND -5",
        "a > 9223372036854775807",
        "a > -2147483648",
        "a > 4.9E-324",
        "a > + 5",
        "a > - - 5",
        "a IS NULL IS NULL",
        "a = TRUE = FALSE",
        "a > 5 -- trailing comment",
        "a > 5 -- comment\n AND b < 3",
        "$x_1 = 'y' AND _z <> ''",
        "a IN ('x', 'x', 'y')",
    ] {
        compile(text);
    }
}

#[test]
fn bounds_are_errors_not_overflows() {
    let max = SQL_FILTER_NESTING_MAX_LEVELS;
    let parens = |n: usize| format!("{}a = 1{}", "(".repeat(n), ")".repeat(n));
    compile(&parens(max));
    assert!(matches!(SqlFilter::compile(&parens(max + 1)), Err(FilterError::TooDeep { .. })));
    assert!(matches!(SqlFilter::compile(&parens(20_000)), Err(FilterError::TooDeep { .. })));
    assert!(matches!(SqlFilter::compile(&"(".repeat(60_000)), Err(FilterError::TooDeep { .. })));
    for prefix in ["NOT ", "- ", "+ "] {
        let text = format!("{}a", prefix.repeat(10_000));
        assert!(matches!(SqlFilter::compile(&text), Err(FilterError::TooDeep { .. })), "{prefix}");
    }
    // Left-nested operator chains deepen the tree without nesting the text.
    let chain = format!("a = TRUE{}", " = TRUE".repeat(5_000));
    assert!(matches!(SqlFilter::compile(&chain), Err(FilterError::TooDeep { .. })));
    let chain = format!("a IS NULL{}", " IS NULL".repeat(5_000));
    assert!(matches!(SqlFilter::compile(&chain), Err(FilterError::TooDeep { .. })));
    // AND/OR chains are flat: long ones are fine.
    let conjunction = vec!["a = 1"; 5_000].join(" AND ");
    let filter = compile(&conjunction);
    assert_eq!(eval(&filter, &[("a", "1")]), True);

    let list = |n: usize| {
        let values: Vec<String> = (0..n).map(|i| format!("'{i}'")).collect();
        format!("a IN ({})", values.join(","))
    };
    let filter = compile(&list(SQL_FILTER_IN_LIST_MAX_COUNT));
    assert_eq!(eval(&filter, &[("a", "4095")]), True);
    assert_eq!(eval(&filter, &[("a", "4096")]), False);
    assert!(matches!(
        SqlFilter::compile(&list(SQL_FILTER_IN_LIST_MAX_COUNT + 1)),
        Err(FilterError::InListTooLong { .. })
    ));

    let long = format!("a = '{}'", "x".repeat(SQL_FILTER_EXPRESSION_MAX_BYTES));
    assert!(matches!(SqlFilter::compile(&long), Err(FilterError::TooLong { .. })));
}

// ---- ExpressionTest and the semantics of the expression classes ----

#[test]
fn expression_test_cases() {
    let cases: &[Case<'_>] = &[
        // testEvaluate_stringHasString
        ("TAGS is not null and TAGS='''''tag'''''", &[("TAGS", "''tag''")], True),
        // testEvaluate_stringCompare: every statement after the first throws in Java.
        ("a between up and low", &[("a", "3.14")], Unknown),
        ("a between up and low", &[("a", "3.14"), ("up", "up"), ("low", "low")], Error),
        ("key is not null and key between 0 and 100", &[("key", "con")], Error),
        ("a between 0 and 100", &[("a", "abc")], Error),
        ("a=b", &[("a", "3.14"), ("b", "3.14")], True),
        ("a<>b", &[("a", "3.14"), ("b", "3.14")], False),
        ("a<>b", &[("a", "3.14"), ("b", "3.141")], True),
        // testEvaluate_exponent: String.valueOf(3.1415 * 10^10)
        ("a > 3.1E10", &[("a", "3.1415E10")], True),
        ("a > 3.14", &[("a", "3.1415")], True),
        ("a > b", &[("a", "10"), ("b", "20")], False),
        ("a > b", &[("a", "20"), ("b", "10")], True),
        // testEvaluate_nullOr
        ("a is null OR a='hello'", &[], True),
        ("a is null OR a='hello'", &[("a", "hello")], True),
        ("a is null OR a='hello'", &[("a", "abc")], False),
        // testEvaluate_boolean
        ("a=TRUE OR b=FALSE", &[("a", "true"), ("b", "false")], True),
        ("a=TRUE OR b=FALSE", &[("a", "false"), ("b", "true")], False),
        // testEvaluate_equal
        ("a is not null and a='hello'", &[("a", "hello")], True),
        ("a is not null and a='hello'", &[], False),
        // testEvaluate_andTrue / andFalse (string properties)
        (AND_EXPRESSION, &[("a", "3"), ("b", "5"), ("c", "6"), ("d", "1")], True),
        (AND_EXPRESSION, &[("a", "4"), ("b", "5"), ("c", "6"), ("d", "1")], False),
        // testEvaluate_orTrue / orFalse
        (OR_EXPRESSION, &[("a", "3")], True),
        (OR_EXPRESSION, &[("a", "4"), ("b", "5")], True),
        (OR_EXPRESSION, &[("a", "4"), ("b", "4"), ("c", "6")], True),
        (OR_EXPRESSION, &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "2")], True),
        (OR_EXPRESSION, &[("a", "4"), ("b", "4"), ("c", "3"), ("d", "10")], False),
        // testEvaluate_in* / notIn*
        ("a in ('3', '4', '5')", &[("a", "3")], True),
        ("a in ('3', '4', '5')", &[("a", "5")], True),
        ("a in ('3', '4', '5')", &[("a", "8")], False),
        ("a not in ('3', '4', '5')", &[("a", "8")], True),
        ("a not in ('3', '4', '5')", &[("a", "4")], False),
        // testEvaluate_between* / notBetween*
        ("a between 2 and 10", &[("a", "2")], True),
        ("a between 2 and 10", &[("a", "10")], True),
        ("a between 2 and 10", &[("a", "3")], True),
        ("a between 2 and 10", &[("a", "1")], False),
        ("a between 2 and 10", &[("a", "11")], False),
        ("a not between 2 and 10", &[("a", "1")], True),
        ("a not between 2 and 10", &[("a", "11")], True),
        ("a not between 2 and 10", &[("a", "2")], False),
        ("a not between 2 and 10", &[("a", "3")], False),
        // testEvaluate_isNull* / isNotNull*
        ("a is null", &[("abc", "2")], True),
        ("a is null", &[("a", "2")], False),
        ("a is not null", &[("a", "2")], True),
        ("a is not null", &[("abc", "2")], False),
    ];
    check_cases(cases);
}

#[test]
fn three_valued_logic_and_null_semantics() {
    let cases: &[Case<'_>] = &[
        ("a = 'x'", &[], Unknown),
        ("NOT (a = 'x')", &[], Unknown),
        ("a <> 'x'", &[], Unknown),
        // doCreateEqual: a null right side is FALSE, a null left side unknown.
        ("'x' = a", &[], False),
        ("'x' <> a", &[], True),
        ("a = b", &[], True),
        ("a = b", &[("a", "1")], False),
        ("a > 5", &[], Unknown),
        ("5 < a", &[], Unknown),
        ("a IN ('x')", &[], Unknown),
        ("a NOT IN ('x')", &[], Unknown),
        ("a NOT BETWEEN 1 AND 2", &[], Unknown),
        ("a = 'x' AND b = 'y'", &[("a", "x")], Unknown),
        ("a = 'x' AND b = 'y'", &[("a", "z")], False),
        ("b = 'y' AND a = 'x'", &[("a", "z")], False),
        ("a = 'x' OR b = 'y'", &[("a", "z")], Unknown),
        ("b = 'y' OR a = 'x'", &[("a", "x")], True),
        ("TRUE", &[], True),
        ("FALSE", &[], False),
        ("NULL", &[], Unknown),
        ("NOT NULL", &[], Unknown),
        ("NULL OR TRUE", &[], True),
        ("NULL AND FALSE", &[], False),
        ("NULL AND TRUE", &[], Unknown),
        // A bare property is cast to boolean: a string is never TRUE.
        ("a", &[("a", "true")], False),
        ("a", &[], Unknown),
        ("NOT a", &[("a", "x")], True),
        // `(NOT a) = 1`: a boolean never equals a number.
        ("NOT a = 1", &[("a", "1")], False),
        ("NOT a = 1", &[], Unknown),
        ("NOT (a = 1)", &[("a", "1")], False),
        ("a IS NULL IS NULL", &[], False),
        ("(a = 1) = TRUE", &[("a", "1")], True),
        ("(a = 1) = FALSE", &[("a", "1")], False),
        ("TRUE = a", &[("a", "true")], Error),
        ("a = TRUE", &[("a", "TRUE")], True),
        ("a = TRUE", &[("a", "yes")], False),
        ("a = FALSE", &[("a", "yes")], True),
        ("1 = TRUE", &[], False),
    ];
    check_cases(cases);
}

#[test]
fn numeric_and_string_comparison() {
    let cases: &[Case<'_>] = &[
        ("a = 'x'", &[("a", "X")], False),
        ("a = 'x'", &[("a", "x")], True),
        ("a = '中文'", &[("a", "中文")], True),
        // A string property compared with an int literal goes through Integer.valueOf.
        ("a = 3", &[("a", "3")], True),
        ("a = 3", &[("a", "+3")], True),
        ("a = 3", &[("a", "3.0")], Error),
        ("a = 3", &[("a", " 3")], Error),
        ("a = 3", &[("a", "3000000000")], Error),
        ("a = 3000000000", &[("a", "3000000000")], True),
        ("a > 2147483648", &[("a", "3000000000")], True),
        ("a > 2147483647", &[("a", "3000000000")], Error),
        ("a = 3.0", &[("a", "3")], True),
        ("a = 3.0", &[("a", " 3 ")], True),
        ("a > 4.5", &[("a", "5f")], True),
        ("a > 5", &[("a", "abc")], Error),
        ("a > 5 OR b = 'x'", &[("a", "abc"), ("b", "x")], Error),
        ("b = 'x' OR a > 5", &[("a", "abc"), ("b", "x")], True),
        ("a = 5 OR b = 'x'", &[("a", "abc"), ("b", "x")], Error),
        // Two properties under an ordering operator compare as doubles.
        ("a > b", &[("a", "1e3"), ("b", "999")], True),
        ("a > b", &[("a", " 5 "), ("b", "4")], True),
        ("a > b", &[("a", "abc"), ("b", "1")], Error),
        ("a >= b", &[("a", "2"), ("b", "2.0")], True),
        ("a < b", &[("a", "-Infinity"), ("b", "1")], True),
        // Double.compare puts NaN above everything.
        ("a > 1.5", &[("a", "NaN")], True),
        ("a > -5", &[("a", "-3")], True),
        ("a < -5", &[("a", "-3")], False),
        ("a > - -5", &[("a", "6")], True),
        ("a BETWEEN -5 AND -1", &[("a", "-3")], True),
        ("a BETWEEN -1 AND -5", &[("a", "-3")], False),
        ("a BETWEEN 1.5 AND 2.5", &[("a", "2")], True),
        ("a BETWEEN 1 AND 2", &[("a", "1.5")], Error),
        ("a BETWEEN 1 AND 2.0", &[("a", "1.5")], Error),
        ("a BETWEEN 1.0 AND 2.0", &[("a", "1.5")], True),
        ("a >= 10L", &[("a", "10")], True),
        // Negating a property (a string) gives null.
        ("-a > 5", &[("a", "10")], Unknown),
        ("a > -b", &[("a", "10"), ("b", "1")], Unknown),
        ("a IN ('x', 'y')", &[("a", "y")], True),
        ("a IN ('1')", &[("a", "1.0")], False),
        ("a NOT IN ('x', 'y')", &[("a", "z")], True),
        ("a IN ('it''s')", &[("a", "it's")], True),
    ];
    check_cases(cases);
}

fn check_cases(cases: &[Case<'_>]) {
    for (text, props, want) in cases {
        let filter = compile(text);
        assert_eq!(eval(&filter, props), *want, "{text:?} with {props:?}");
    }
}

#[test]
fn matches_message_properties() {
    let mut props = Properties::new();
    props.insert("TAGS", "TagA");
    props.insert("region", "eu");
    props.insert("price", "12.5");
    let filter = compile("TAGS IN ('TagA', 'TagB') AND region = 'eu' AND price BETWEEN 10.0 AND 20.0");
    assert!(filter.matches_properties(&props));
    assert!(!compile("TAGS = 'TagB'").matches_properties(&props));
    assert!(!compile("missing = 'x'").matches_properties(&props));
    assert!(compile("missing IS NULL").matches_properties(&props));
    assert_eq!(filter.expression(), filter.to_string());
}

#[test]
fn filter_is_shareable() {
    fn assert_traits<T: Clone + fmt::Debug + Send + Sync + 'static>() {}
    assert_traits::<SqlFilter>();
    assert_traits::<FilterError>();
    assert_traits::<EvalError>();
}

// ---- property checks ----

const SEED: [u8; 32] = *b"raftmq-common-sql-filter-seed-01";

fn runner(name: &str, cases: u32) -> TestRunner {
    println!("{name}: proptest seed {SEED:?} (ChaCha), {cases} cases");
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &SEED))
}

/// Fragments that make the parser go deep into its productions when shuffled together.
fn token_soup() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a", "b", "TAGS", "NOT", "AND", "OR", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "IN", "=", "<>", ">", ">=",
        "<", "<=", "(", ")", ",", "+", "-", "1", "0", "2.5", ".5", "1e3", "10L", "0.0", "'x'", "'it''s'", "'", "--",
        "\n", "/*", "*/", " ", "é", "$",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

#[test]
fn compile_never_panics() {
    let mut runner = runner("compile_never_panics", 4_000);
    let inputs = prop_oneof![any::<String>(), ".{0,64}", token_soup()];
    let result = runner.run(&inputs, |text| {
        if let Ok(filter) = SqlFilter::compile(&text) {
            // Whatever compiles evaluates without panicking too.
            let _ = filter.evaluate(|name| (name == "a").then_some("1"));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("compile_never_panics: {e}");
    }
}

/// Expressions over properties `a`, `b`, `c` built from the grammar, operands chosen so most pass
/// the parser's checks (those rejected are skipped by the property; `compile_never_panics` covers
/// the rest).
fn expression() -> impl Strategy<Value = String> {
    let orderable = prop::sample::select(vec!["a", "b", "c", "1", "-2", "2.5", "10L", "-a"]);
    let equatable = prop::sample::select(vec!["a", "b", "c", "1", "-2", "2.5", "10L", "'x'", "'1'", "TRUE"]);
    let ordering = (orderable.clone(), prop::sample::select(vec![">", ">=", "<", "<="]), orderable.clone())
        .prop_map(|(l, op, r)| format!("{l} {op} {r}"));
    let equality = (equatable.clone(), prop::sample::select(vec!["=", "<>"]), equatable.clone())
        .prop_map(|(l, op, r)| format!("{l} {op} {r}"));
    let between = (orderable.clone(), any::<bool>(), orderable.clone(), orderable)
        .prop_map(|(v, not, l, h)| format!("{v} {}BETWEEN {l} AND {h}", if not { "NOT " } else { "" }));
    let membership = (prop::sample::select(vec!["a", "b", "c"]), any::<bool>())
        .prop_map(|(p, not)| format!("{p} {}IN ('1', 'x')", if not { "NOT " } else { "" }));
    let null_test =
        (equatable, any::<bool>()).prop_map(|(p, not)| format!("{p} IS {}NULL", if not { "NOT " } else { "" }));
    let constant = prop::sample::select(vec!["a", "TRUE", "FALSE", "NULL"]).prop_map(str::to_owned);
    let leaf = prop_oneof![ordering, equality, between, membership, null_test, constant];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) AND ({r})")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) OR ({r})")),
            inner.prop_map(|e| format!("NOT ({e})")),
        ]
    })
}

fn properties() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
    let value = prop::sample::select(vec!["1", "-2", "2.5", "x", "true", "", " 7", "NaN", "3000000000"]);
    (prop::option::of(value.clone()), prop::option::of(value.clone()), prop::option::of(value)).prop_map(|(a, b, c)| {
        [("a", a), ("b", b), ("c", c)].into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
    })
}

#[test]
fn negation_and_conjunction_follow_three_valued_logic() {
    let mut runner = runner("negation_and_conjunction_follow_three_valued_logic", 2_000);
    let cases = (expression(), expression(), properties());
    let compiled = std::cell::Cell::new(0u32);
    let result = runner.run(&cases, |(left, right, props)| {
        let (Ok(l), Ok(r)) = (SqlFilter::compile(&left), SqlFilter::compile(&right)) else {
            return Ok(());
        };
        compiled.set(compiled.get() + 1);
        let lookup = |name: &str| props.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        let lv = l.evaluate(lookup);
        let rv = r.evaluate(lookup);

        let not = compile(&format!("NOT ({left})"));
        let nv = not.evaluate(lookup);
        prop_assert!(!(l.matches(lookup) && not.matches(lookup)), "{left} and its negation both match");
        match &lv {
            Ok(v) => prop_assert_eq!(&nv, &Ok(v.map(|b| !b)), "NOT ({})", left),
            Err(_) => prop_assert!(nv.is_err()),
        }

        // Java's AND: left first; FALSE decides; an error wherever it is evaluated escapes.
        let and = compile(&format!("({left}) AND ({right})")).evaluate(lookup);
        let expected = match (&lv, &rv) {
            (Err(_), _) => None,
            (Ok(Some(false)), _) => Some(Some(false)),
            (Ok(_), Err(_)) => None,
            (Ok(_), Ok(Some(false))) => Some(Some(false)),
            (Ok(Some(true)), Ok(Some(true))) => Some(Some(true)),
            (Ok(_), Ok(_)) => Some(None),
        };
        prop_assert_eq!(and.ok(), expected, "({}) AND ({}) with {:?}", left, right, props);
        Ok(())
    });
    if let Err(e) = result {
        panic!("negation_and_conjunction_follow_three_valued_logic: {e}");
    }
    // The generator must mostly produce expressions the checks accept, or the property says little.
    println!("{} of 2000 pairs compiled", compiled.get());
    assert!(compiled.get() >= 1_200, "only {} of 2000 pairs compiled", compiled.get());
}
