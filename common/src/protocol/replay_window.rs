//! [`ReplayWindow`]: which cluster-signed requests a receiver has accepted, so each is accepted
//! once. Pure: the caller passes the time in.
//!
//! Per signer session (a random number per signing process) it keeps the highest sequence number
//! seen and a bitmap of the [`CLUSTER_AUTH_REPLAY_WINDOW_COUNT`] numbers below it (IPsec's
//! anti-replay window): pipelined requests that overtake each other are all accepted, a number
//! seen before or below the window is refused. A session idle for
//! [`CLUSTER_AUTH_SESSION_IDLE_MAX_MS`] is forgotten: any request it could still replay is older
//! than the clock-skew limit by then, which the verifier refuses first.
//!
//! Invariant: at most [`CLUSTER_AUTH_SESSIONS_MAX_COUNT`] sessions are held; a new one past it is
//! refused (only requests whose signature checked reach the window, so only members fill it).

use std::collections::HashMap;

use crate::limits::CLUSTER_AUTH_REPLAY_WINDOW_COUNT;
use crate::limits::CLUSTER_AUTH_SESSION_IDLE_MAX_MS;
use crate::limits::CLUSTER_AUTH_SESSIONS_MAX_COUNT;

const WORDS: usize = (CLUSTER_AUTH_REPLAY_WINDOW_COUNT / 64) as usize;
const _: () = assert!(CLUSTER_AUTH_REPLAY_WINDOW_COUNT.is_multiple_of(64) && WORDS > 0);

/// Why a request was refused as a replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// This (session, seq) was accepted before.
    #[error("replayed request: session {session} seq {seq} was seen before")]
    Seen {
        /// The session.
        session: u64,
        /// The sequence number.
        seq: u64,
    },
    /// Too far below the session's highest number to tell.
    #[error("replayed or late request: session {session} seq {seq} is below the replay window (highest {top})")]
    BelowWindow {
        /// The session.
        session: u64,
        /// The sequence number.
        seq: u64,
        /// The session's highest number.
        top: u64,
    },
    /// The receiver holds as many sessions as it may.
    #[error("too many signer sessions ({max}); a new one is refused until idle ones expire")]
    TooManySessions {
        /// [`CLUSTER_AUTH_SESSIONS_MAX_COUNT`].
        max: usize,
    },
}

#[derive(Debug)]
struct Session {
    top: u64,
    /// Bit `i` (word `i / 64`, bit `i % 64`): `top - i` was seen.
    seen: [u64; WORDS],
    last_ms: u64,
}

impl Session {
    fn new(seq: u64, now_ms: u64) -> Self {
        let mut seen = [0; WORDS];
        seen[0] = 1;
        Session { top: seq, seen, last_ms: now_ms }
    }

    fn bit(&self, below: u64) -> bool {
        self.seen[(below / 64) as usize] & (1 << (below % 64)) != 0
    }

    fn set(&mut self, below: u64) {
        self.seen[(below / 64) as usize] |= 1 << (below % 64);
    }

    /// Moves the top up by `by`: every bit moves `by` places further below.
    fn shift(&mut self, by: u64) {
        if by >= CLUSTER_AUTH_REPLAY_WINDOW_COUNT {
            self.seen = [0; WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..WORDS).rev() {
            let hi = if i >= words { self.seen[i - words] } else { 0 };
            let lo = if bits > 0 && i > words { self.seen[i - words - 1] >> (64 - bits) } else { 0 };
            self.seen[i] = if bits > 0 { (hi << bits) | lo } else { hi };
        }
    }
}

/// Accepted (session, seq) pairs, per session a sliding window.
#[derive(Debug, Default)]
pub struct ReplayWindow {
    sessions: HashMap<u64, Session>,
}

impl ReplayWindow {
    /// Accepts `seq` of `session` at `now_ms` if it was not seen and is not below the window;
    /// records it.
    pub fn accept(&mut self, session: u64, seq: u64, now_ms: u64) -> Result<(), ReplayError> {
        let Some(s) = self.sessions.get_mut(&session) else {
            if self.sessions.len() >= CLUSTER_AUTH_SESSIONS_MAX_COUNT {
                self.sessions.retain(|_, s| now_ms.saturating_sub(s.last_ms) <= CLUSTER_AUTH_SESSION_IDLE_MAX_MS);
            }
            if self.sessions.len() >= CLUSTER_AUTH_SESSIONS_MAX_COUNT {
                return Err(ReplayError::TooManySessions { max: CLUSTER_AUTH_SESSIONS_MAX_COUNT });
            }
            self.sessions.insert(session, Session::new(seq, now_ms));
            return Ok(());
        };
        if seq > s.top {
            s.shift(seq - s.top);
            s.top = seq;
            s.set(0);
        } else {
            let below = s.top - seq;
            if below >= CLUSTER_AUTH_REPLAY_WINDOW_COUNT {
                return Err(ReplayError::BelowWindow { session, seq, top: s.top });
            }
            if s.bit(below) {
                return Err(ReplayError::Seen { session, seq });
            }
            s.set(below);
        }
        s.last_ms = s.last_ms.max(now_ms);
        Ok(())
    }

    /// Sessions held.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_once_in_any_order_within_the_window() {
        let mut w = ReplayWindow::default();
        // Seeded shuffle of 0..3000 within blocks of 500 (pipelined requests overtaking each other).
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        eprintln!("seed {seed:#x}");
        let mut order: Vec<u64> = (0..3000).collect();
        for block in order.chunks_mut(500) {
            for i in (1..block.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                block.swap(i, (seed % (i as u64 + 1)) as usize);
            }
        }
        for &seq in &order {
            assert_eq!(w.accept(1, seq, 0), Ok(()), "seq {seq}");
        }
        for &seq in order.iter().rev().take(CLUSTER_AUTH_REPLAY_WINDOW_COUNT as usize) {
            assert!(w.accept(1, seq, 0).is_err(), "seq {seq} accepted twice");
        }
        assert!(matches!(w.accept(1, 0, 0), Err(ReplayError::BelowWindow { .. })));
        assert_eq!(w.accept(2, 0, 0), Ok(()), "another session has its own numbers");
    }

    #[test]
    fn shifts_keep_bits_across_words() {
        let mut w = ReplayWindow::default();
        for seq in [0, 63, 64, 65, 130, 1000, 1023] {
            w.accept(9, seq, 0).expect("new");
        }
        w.accept(9, 1100, 0).expect("new");
        for seq in [130, 1000, 1023, 1100] {
            assert_eq!(w.accept(9, seq, 0), Err(ReplayError::Seen { session: 9, seq }));
        }
        assert_eq!(w.accept(9, 131, 0), Ok(()), "an unseen number inside the window");
        w.accept(9, 1100 + CLUSTER_AUTH_REPLAY_WINDOW_COUNT, 0).expect("new");
        assert!(matches!(w.accept(9, 1100, 0), Err(ReplayError::BelowWindow { .. })));
    }

    #[test]
    fn sessions_are_bounded_and_idle_ones_forgotten() {
        let mut w = ReplayWindow::default();
        for s in 0..CLUSTER_AUTH_SESSIONS_MAX_COUNT as u64 {
            w.accept(s, 0, 0).expect("room");
        }
        assert!(matches!(w.accept(u64::MAX, 0, 1), Err(ReplayError::TooManySessions { .. })));
        w.accept(0, 1, CLUSTER_AUTH_SESSION_IDLE_MAX_MS + 10).expect("a live session goes on");
        w.accept(u64::MAX, 0, CLUSTER_AUTH_SESSION_IDLE_MAX_MS + 10).expect("idle sessions forgotten");
        assert_eq!(w.sessions(), 2);
    }
}
