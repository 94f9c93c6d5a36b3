//! The seam through which the broker patches payload bytes at append time on every replica:
//! RocketMQ records carry their own physical offset (PHYSICALOFFSET, record byte 28), which is
//! only known once the log store has placed the entry. DLedger's `AppendHook` does the same
//! with `pos + 48`; here the payload starts at `pos + HEADER_SIZE`.
//!
//! Contract: `patch` runs under the store's append lock, after the payload was copied into the
//! mapped segment and before the payload CRC is computed; it must be deterministic (same bytes
//! and position ⇒ same result on every replica), idempotent (followers receive bytes the leader
//! already patched), fast, and must not change the payload length.

/// Patches a normal entry's payload in place.
pub trait PayloadPatcher: Send + Sync + 'static {
    /// `payload_pos` is the physical CommitLog offset of `payload[0]`, i.e. `pos + HEADER_SIZE`;
    /// a record at `offset_in_payload` has physical offset `payload_pos + offset_in_payload`.
    fn patch(&self, app_tag: u8, payload_pos: u64, payload: &mut [u8]);
}

/// The default patcher: leaves payloads untouched.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPatch;

impl PayloadPatcher for NoPatch {
    fn patch(&self, _app_tag: u8, _payload_pos: u64, _payload: &mut [u8]) {}
}
