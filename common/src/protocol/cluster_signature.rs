//! Cluster signatures: the proof of membership a replica or broker puts on the requests only
//! members may send (Raft RPCs, NameServer writes), and its check. Pure: the caller passes the
//! wall-clock time in.
//!
//! A signed request carries five `extFields`: [`CLUSTER_SENDER`] (who signs: a node id or a broker
//! address), [`CLUSTER_TIME`] (ms since the epoch), [`CLUSTER_SESSION`] and [`CLUSTER_SEQ`] (a
//! random number per signer and a counter, together the nonce) and [`CLUSTER_SIGNATURE`]:
//! BLAKE3 in keyed mode (its MAC), keyed by `derive_key(KEY_CONTEXT, cluster secret)`, Base64 with
//! padding, over
//!
//! ```text
//! "raftmq-cluster-v2\n" code(i32 BE)
//!   for each extFields entry but the signature, in byte order of keys: len(u32 BE) key len(u32 BE) value
//!   len(u64 BE) body
//! ```
//!
//! so the header (every field, the request's own included) and the body are covered, and a field
//! cannot be moved into its neighbour. A Raft RPC adds [`CLUSTER_TARGET`] (the receiving node id),
//! so a request for one replica is refused by another.
//!
//! Invariants:
//! - The signature is compared in constant time (`blake3::Hash`'s equality), before anything else
//!   of the request is believed.
//! - BLAKE3, not HMAC-SHA256 (v1): every Raft RPC's whole body is authenticated, and with SHA-NI
//!   HMAC-SHA256 still took a tenth of a 3-node group's CPU at full rate; BLAKE3 runs several times
//!   faster on the same core (SIMD over the body's chunks). Members must run the same version.
//! - A request is accepted at most once: its time must be within [`CLUSTER_AUTH_CLOCK_SKEW_MAX_MS`]
//!   of the receiver's clock, and its (session, seq) must be new to the [`ReplayWindow`], which is
//!   only updated by requests whose signature checked.
//! - The secret never leaves [`ClusterKey`] except into the HMAC; `Debug` masks it.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use compact_str::ToCompactString as _;

use super::command::RemotingCommand;
use super::ext_fields::FieldStr;
use super::replay_window::ReplayError;
use super::replay_window::ReplayWindow;
use crate::limits::CLUSTER_AUTH_CLOCK_SKEW_MAX_MS;

/// `extFields` key: who signed (a Raft node id, a broker's address, `admin`).
pub const CLUSTER_SENDER: &str = "clusterSender";
/// `extFields` key: when it was signed, ms since the Unix epoch.
pub const CLUSTER_TIME: &str = "clusterTime";
/// `extFields` key: the signer's session, a random number per signer (decimal).
pub const CLUSTER_SESSION: &str = "clusterSession";
/// `extFields` key: the request's number in its session, from 0 (decimal).
pub const CLUSTER_SEQ: &str = "clusterSeq";
/// `extFields` key: the receiving Raft node id (Raft RPCs only).
pub const CLUSTER_TARGET: &str = "clusterTarget";
/// `extFields` key: the signature.
pub const CLUSTER_SIGNATURE: &str = "clusterSignature";

const DOMAIN: &[u8] = b"raftmq-cluster-v2\n";

/// BLAKE3's key derivation context for the MAC key (BLAKE3 asks for a unique, hard-coded string).
const KEY_CONTEXT: &str = "raftmq 2026-12-06 cluster secret to request MAC key v2";

/// The cluster secret as a BLAKE3 MAC key, derived once.
#[derive(Clone)]
pub struct ClusterKey {
    key: [u8; blake3::KEY_LEN],
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(***)")
    }
}

impl ClusterKey {
    /// The key of `secret` (its bytes as configured).
    pub fn new(secret: &[u8]) -> Self {
        // A secret of any length becomes the 32-byte key keyed BLAKE3 takes.
        ClusterKey { key: blake3::derive_key(KEY_CONTEXT, secret) }
    }

    fn mac_of(&self, request: &RemotingCommand) -> blake3::Hash {
        let mut mac = blake3::Hasher::new_keyed(&self.key);
        mac.update(DOMAIN);
        mac.update(&request.code.to_be_bytes());
        let mut fields: Vec<(&FieldStr, &FieldStr)> =
            request.ext_fields.iter().filter(|(k, _)| k.as_str() != CLUSTER_SIGNATURE).collect();
        fields.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (k, v) in fields {
            for part in [k.as_bytes(), v.as_bytes()] {
                // Header fields are far below 4 GiB (the frame limit is 16 MiB).
                mac.update(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
                mac.update(part);
            }
        }
        mac.update(&(request.body.len() as u64).to_be_bytes());
        mac.update(&request.body);
        mac.finalize()
    }
}

/// A signer: one session of one sender. Cheap to share (`Arc`); numbers its requests atomically.
#[derive(Debug)]
pub struct ClusterSigner {
    key: ClusterKey,
    sender: String,
    session: u64,
    seq: AtomicU64,
}

impl ClusterSigner {
    /// A signer for `sender` in a fresh session (a random number).
    pub fn new(key: ClusterKey, sender: impl Into<String>) -> Self {
        Self::with_session(key, sender, random_session())
    }

    /// A signer in a given session (tests replaying or forging requests).
    pub fn with_session(key: ClusterKey, sender: impl Into<String>, session: u64) -> Self {
        ClusterSigner { key, sender: sender.into(), session, seq: AtomicU64::new(0) }
    }

    /// Signs `request` at `now_ms`: adds the sender, time, session, the next sequence number and
    /// the signature (any earlier cluster fields are replaced).
    pub fn sign(&self, request: &mut RemotingCommand, now_ms: u64) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let fields = &mut request.ext_fields;
        fields.insert(CLUSTER_SENDER.into(), FieldStr::from(self.sender.as_str()));
        // Numbers formatted inline (at most 20 digits): every Raft RPC is signed.
        fields.insert(CLUSTER_TIME.into(), now_ms.to_compact_string());
        fields.insert(CLUSTER_SESSION.into(), self.session.to_compact_string());
        fields.insert(CLUSTER_SEQ.into(), seq.to_compact_string());
        fields.shift_remove(CLUSTER_SIGNATURE);
        let tag = self.key.mac_of(request);
        let signature = base64::engine::general_purpose::STANDARD.encode(tag.as_bytes());
        request.ext_fields.insert(CLUSTER_SIGNATURE.into(), FieldStr::from(signature));
    }

    /// The sender name this signer puts on requests.
    pub fn sender(&self) -> &str {
        &self.sender
    }
}

/// A random session number: `RandomState` is seeded from the OS's randomness per process, and
/// the time and a process-wide counter keep two signers of one process apart.
fn random_session() -> u64 {
    use std::hash::BuildHasher;
    use std::hash::Hasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.finish()
}

/// What a checked request proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// [`CLUSTER_SENDER`].
    pub sender: String,
    /// [`CLUSTER_TARGET`], when the request named one.
    pub target: Option<String>,
}

/// Why a request's cluster signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No signature: the sender is not configured with the cluster secret.
    #[error("not signed with the cluster secret (set clusterSecret or clusterSecretFile on every member)")]
    Unsigned,
    /// A cluster field is missing or not a number.
    #[error("malformed cluster signature field {0}")]
    Malformed(&'static str),
    /// The signature does not match: another secret, or the request was altered.
    #[error("bad cluster signature (the sender's clusterSecret differs, or the request was altered)")]
    BadSignature,
    /// The request's time is too far from ours.
    #[error("cluster signature time {time_ms} is {skew_ms} ms from this node's clock (at most {max_ms} ms)")]
    Stale {
        /// The request's time.
        time_ms: u64,
        /// How far from ours.
        skew_ms: u64,
        /// [`CLUSTER_AUTH_CLOCK_SKEW_MAX_MS`].
        max_ms: u64,
    },
    /// Seen before, or too old for its session's window.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Checks signed requests: the key and the window of what was accepted.
#[derive(Debug)]
pub struct ClusterVerifier {
    key: ClusterKey,
    window: Mutex<ReplayWindow>,
}

fn number(request: &RemotingCommand, key: &'static str) -> Result<u64, AuthError> {
    let text = request.ext_fields.get(key).ok_or(AuthError::Malformed(key))?;
    text.parse::<u64>().map_err(|_| AuthError::Malformed(key))
}

impl ClusterVerifier {
    /// A verifier of `key` that has seen nothing yet.
    pub fn new(key: ClusterKey) -> Self {
        ClusterVerifier { key, window: Mutex::new(ReplayWindow::default()) }
    }

    /// Checks `request` at `now_ms`: signature, time, then the replay window (which records it).
    pub fn verify(&self, request: &RemotingCommand, now_ms: u64) -> Result<Verified, AuthError> {
        let signature = request.ext_fields.get(CLUSTER_SIGNATURE).ok_or(AuthError::Unsigned)?;
        let tag = base64::engine::general_purpose::STANDARD
            .decode(signature.as_bytes())
            .map_err(|_| AuthError::Malformed(CLUSTER_SIGNATURE))?;
        let tag: [u8; blake3::OUT_LEN] = tag.try_into().map_err(|_| AuthError::BadSignature)?;
        // `Hash` compares in constant time.
        if self.key.mac_of(request) != blake3::Hash::from_bytes(tag) {
            return Err(AuthError::BadSignature);
        }
        let time_ms = number(request, CLUSTER_TIME)?;
        let session = number(request, CLUSTER_SESSION)?;
        let seq = number(request, CLUSTER_SEQ)?;
        let sender = request.ext_fields.get(CLUSTER_SENDER).ok_or(AuthError::Malformed(CLUSTER_SENDER))?;
        let skew_ms = time_ms.abs_diff(now_ms);
        if skew_ms > CLUSTER_AUTH_CLOCK_SKEW_MAX_MS {
            return Err(AuthError::Stale { time_ms, skew_ms, max_ms: CLUSTER_AUTH_CLOCK_SKEW_MAX_MS });
        }
        self.window.lock().unwrap_or_else(PoisonError::into_inner).accept(session, seq, now_ms)?;
        Ok(Verified {
            sender: sender.to_string(),
            target: request.ext_fields.get(CLUSTER_TARGET).map(|t| t.to_string()),
        })
    }
}

/// Wall-clock ms since the Unix epoch, as signers and verifiers stamp and check requests.
pub fn wall_clock_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    const NOW: u64 = 1_700_000_000_000;

    fn request() -> RemotingCommand {
        let mut r = RemotingCommand::request(RequestCode::RegisterBroker).with_body(&b"body"[..]);
        r.ext_fields.insert("brokerName".into(), "broker-a".into());
        r
    }

    #[test]
    fn signed_requests_verify_once() {
        let key = ClusterKey::new(b"0123456789abcdef0123");
        let signer = ClusterSigner::with_session(key.clone(), "node-1", 7);
        let verifier = ClusterVerifier::new(key);
        let mut r = request();
        signer.sign(&mut r, NOW);
        assert_eq!(verifier.verify(&r, NOW + 5).map(|v| v.sender), Ok("node-1".to_owned()));
        assert!(matches!(verifier.verify(&r, NOW + 5), Err(AuthError::Replay(_))), "a replay is refused");
        let mut next = request();
        signer.sign(&mut next, NOW);
        assert!(verifier.verify(&next, NOW).is_ok());
    }

    #[test]
    fn forged_altered_stale_and_unsigned_requests_are_refused() {
        let key = ClusterKey::new(b"0123456789abcdef0123");
        let verifier = ClusterVerifier::new(key.clone());
        assert_eq!(verifier.verify(&request(), NOW), Err(AuthError::Unsigned));

        let other = ClusterSigner::new(ClusterKey::new(b"another secret, not ours"), "x");
        let mut forged = request();
        other.sign(&mut forged, NOW);
        assert_eq!(verifier.verify(&forged, NOW), Err(AuthError::BadSignature));

        let signer = ClusterSigner::new(key, "node-1");
        let mut altered = request();
        signer.sign(&mut altered, NOW);
        let mut body = altered.clone();
        body.body = bytes::Bytes::from_static(b"bodx");
        assert_eq!(verifier.verify(&body, NOW), Err(AuthError::BadSignature));
        let mut field = altered.clone();
        field.ext_fields.insert("brokerName".into(), "broker-b".into());
        assert_eq!(verifier.verify(&field, NOW), Err(AuthError::BadSignature));
        let mut code = altered.clone();
        code.code = RequestCode::UnregisterBroker.as_i32();
        assert_eq!(verifier.verify(&code, NOW), Err(AuthError::BadSignature));
        // Moving bytes between a key and its value changes the content.
        let mut moved = altered.clone();
        moved.ext_fields.shift_remove("brokerName");
        moved.ext_fields.insert("brokerNam".into(), "ebroker-a".into());
        assert_eq!(verifier.verify(&moved, NOW), Err(AuthError::BadSignature));
        let mut garbage = altered.clone();
        garbage.ext_fields.insert(CLUSTER_SIGNATURE.into(), "!!".into());
        assert_eq!(verifier.verify(&garbage, NOW), Err(AuthError::Malformed(CLUSTER_SIGNATURE)));

        let late = NOW + CLUSTER_AUTH_CLOCK_SKEW_MAX_MS + 1;
        assert!(matches!(verifier.verify(&altered, late), Err(AuthError::Stale { .. })));
        let early = NOW - CLUSTER_AUTH_CLOCK_SKEW_MAX_MS - 1;
        assert!(matches!(verifier.verify(&altered, early), Err(AuthError::Stale { .. })));
        assert!(verifier.verify(&altered, NOW).is_ok(), "refusals recorded nothing");
    }

    #[test]
    fn sessions_differ_and_debug_masks_the_secret() {
        let key = ClusterKey::new(b"a secret that must not be printed");
        assert_eq!(format!("{key:?}"), "ClusterKey(***)");
        let (a, b) = (ClusterSigner::new(key.clone(), "a"), ClusterSigner::new(key, "a"));
        assert_ne!(a.session, b.session);
        assert!(!format!("{a:?}").contains("printed"));
    }
}
