//! [`StreamWindow`]: the in-flight bound of one pipelined replication stream, a plain value the
//! config computes and the pipeline enforces (one request is always allowed, so a window never
//! stalls a stream).

/// How much one replication stream may have in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamWindow {
    /// Requests awaiting replies (1 = no pipelining).
    pub count: usize,
    /// Encoded bytes awaiting replies (one request is always allowed).
    pub bytes: u64,
}
