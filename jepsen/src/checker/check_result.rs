//! [`CheckResult`]: one checker's verdict `{name, valid, counts, samples}`, the value every checker
//! builds and the report collects.
//!
//! Invariant: samples are bounded ([`SAMPLES_MAX_COUNT`]); the counts hold the totals.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

/// Samples kept per checker; the counts hold the totals.
pub const SAMPLES_MAX_COUNT: usize = 20;

/// One checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The checker (`lost`, `unexpected`, ...).
    pub name: String,
    /// True when the property held.
    pub valid: bool,
    /// Named totals (`acked`, `lost`, ...).
    pub counts: BTreeMap<String, u64>,
    /// A few examples of what went wrong (or notable), at most [`SAMPLES_MAX_COUNT`].
    pub samples: Vec<String>,
}

impl CheckResult {
    /// A valid result with no counts.
    pub fn new(name: &str) -> Self {
        CheckResult { name: name.to_owned(), valid: true, counts: BTreeMap::new(), samples: Vec::new() }
    }

    /// Sets the count `key`.
    pub fn count(&mut self, key: &str, value: usize) {
        self.counts.insert(key.to_owned(), value as u64);
    }

    /// The count `key` (0 when absent).
    pub fn get(&self, key: &str) -> u64 {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Keeps `sample` if there is room.
    pub fn sample(&mut self, sample: impl Into<String>) {
        if self.samples.len() < SAMPLES_MAX_COUNT {
            self.samples.push(sample.into());
        }
    }

    /// Marks the result invalid and keeps `why` as a sample.
    pub fn fail(&mut self, why: impl Into<String>) {
        self.valid = false;
        self.sample(why);
    }
}
