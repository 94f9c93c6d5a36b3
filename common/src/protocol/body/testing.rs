//! Property checks shared by the body tests: deterministic runners and the round-trip and
//! no-panic properties every [`JsonBody`] must satisfy.

use std::fmt::Debug;

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest::test_runner::RngAlgorithm;
use proptest::test_runner::TestRng;
use proptest::test_runner::TestRunner;

use super::JsonBody;

/// Fixed so failures reproduce; printed by every runner.
pub(crate) const SEED: [u8; 32] = *b"raftmq-protocol-body-seed-000001";

/// A deterministic runner; the seed is printed so a failure names it.
pub(crate) fn runner(name: &str, cases: u32) -> TestRunner {
    println!("{name}: proptest seed {SEED:?} (ChaCha), {cases} cases");
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &SEED))
}

/// Strings with the characters JSON must escape as well as ordinary and non-ASCII text.
pub(crate) fn text() -> BoxedStrategy<String> {
    prop_oneof![".{0,12}", "[\\x00-\\x1f\"\\\\{}:,\\[\\] ]{0,6}", "[a-zA-Z0-9%_-]{1,16}"].boxed()
}

/// - `decode(encode(b)) == b`, and encoding again gives the same bytes;
/// - decoding the encoding with any single byte changed or cut short never panics;
/// - decoding arbitrary bytes never panics.
pub(crate) fn check_body<B: JsonBody + Debug + Clone + PartialEq>(strategy: BoxedStrategy<B>) {
    let name = std::any::type_name::<B>();
    let mut runner = runner(name, 256);
    let cases = (strategy, any::<usize>(), any::<u8>());
    let result = runner.run(&cases, |(body, at, byte)| {
        let bytes = body.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back =
            B::decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&bytes))))?;
        prop_assert_eq!(&back, &body);
        prop_assert_eq!(back.encode().map_err(|e| TestCaseError::fail(e.to_string()))?, bytes.clone());
        if !bytes.is_empty() {
            let mut mutated = bytes.clone();
            let at = at % mutated.len();
            mutated[at] = byte;
            // Success or error are both fine; not panicking is the property.
            let _ = B::decode(&mutated);
            let _ = B::decode(&bytes[..at]);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    let result = runner.run(&proptest::collection::vec(any::<u8>(), 0..128), |bytes| {
        // As above: any outcome but a panic.
        let _ = B::decode(&bytes);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}
