//! The one way a test says it skipped: a line `SKIP <test>: <why>` written straight to the
//! process's standard error.
//!
//! Why not `eprintln!`: the Rust test harness captures `print!`/`eprint!` output and shows it only
//! for failing tests, so a test that skips (no root, no Docker, no Chromium, a client package that
//! cannot be installed) would pass without a word. Writes to `std::io::stderr()` itself are not
//! captured: the line shows in `cargo test`'s output next to the test's `ok`.

use std::io::Write as _;

/// Writes `SKIP <test>: <why>` to standard error, past the test harness's capture.
pub fn announce_skip(test: &str, why: &str) {
    let mut stderr = std::io::stderr().lock();
    // Nothing to do if standard error is gone; the test still passes as skipped.
    let _ = writeln!(stderr, "SKIP {test}: {why}");
}
