//! Configuration: the broker's static settings and the ones it changes while running.

pub mod broker_config;
pub mod live_config;
