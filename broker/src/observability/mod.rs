//! What the broker reports about itself: Prometheus metrics and per-minute pull statistics.

pub mod metrics;
pub mod stats;
