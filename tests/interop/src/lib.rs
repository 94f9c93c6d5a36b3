//! Test-only crate: everything lives in `tests/interop.rs`. This library is empty so that
//! `cargo test` has a package target; the interop tests need no shared code beyond their file.
