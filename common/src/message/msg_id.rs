//! Message ids (docs/wire-format.md#message-ids): the broker's **offsetMsgId** and the client's
//! **UNIQ_KEY**.
//!
//! ```text
//! offsetMsgId: store IP (4 | 16) | port i32 | CommitLog offset i64      → 32 | 56 upper-case hex chars
//! UNIQ_KEY:    client IP (4 | 16) | pid i16 | classloader hash i32 | ms since month start i32 | counter i16
//!                                                                      → 32 | 56 upper-case hex chars
//! ```
//!
//! Invariants: encoding is upper-case hex like `UtilAll.bytes2string`; decoding accepts either case
//! (Java upper-cases first) and rejects any other length or non-hex character instead of producing
//! garbage. The UNIQ_KEY generator is pure: the caller passes the clock reading; month boundaries are
//! computed in UTC (Java uses the JVM's local zone; the field is only a hint for `nearly_time_ms`).

use std::fmt;
use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use thiserror::Error;

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Hex length of an offsetMsgId with an IPv4 store host (16 bytes).
pub const OFFSET_MSG_ID_V4_HEX_LEN: usize = 32;
/// Hex length of an offsetMsgId with an IPv6 store host (28 bytes).
pub const OFFSET_MSG_ID_V6_HEX_LEN: usize = 56;
/// Hex length of a UNIQ_KEY with an IPv4 client address (16 bytes).
pub const UNIQ_ID_V4_HEX_LEN: usize = 32;
/// Hex length of a UNIQ_KEY with an IPv6 client address (28 bytes).
pub const UNIQ_ID_V6_HEX_LEN: usize = 56;

const MS_PER_DAY: i64 = 86_400_000;

/// Why an id string could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsgIdError {
    /// Neither the IPv4 nor the IPv6 length.
    #[error("message id {id:?} has {len} characters; expected 32 (IPv4) or 56 (IPv6)")]
    Length {
        /// The input (truncated to 64 chars).
        id: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A character outside `[0-9A-Fa-f]`.
    #[error("message id {id:?} is not hexadecimal")]
    NotHex {
        /// The input (truncated to 64 chars).
        id: String,
    },
    /// The port field is outside 0..=65535.
    #[error("message id {id:?} holds the invalid port {port}")]
    Port {
        /// The input.
        id: String,
        /// The decoded `i32`.
        port: i32,
    },
}

fn push_hex_upper(bytes: &[u8], out: &mut String) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
        out.push(char::from(HEX_UPPER[usize::from(b & 0x0F)]));
    }
}

fn shown(id: &str) -> String {
    id.chars().take(64).collect()
}

/// The value of one hex digit, either case.
pub(crate) fn hex_nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Decodes an id of 32 or 56 hex chars into 16 or 28 bytes.
fn decode_id_hex(id: &str) -> Result<Vec<u8>, MsgIdError> {
    let raw = id.as_bytes();
    if raw.len() != 32 && raw.len() != 56 {
        return Err(MsgIdError::Length { id: shown(id), len: raw.len() });
    }
    raw.chunks_exact(2)
        .map(|pair| match (hex_nibble(pair[0]), hex_nibble(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => Err(MsgIdError::NotHex { id: shown(id) }),
        })
        .collect()
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// Splits the leading IP (4 bytes for a 16-byte id, else 16) off `bytes`.
fn take_ip(bytes: &[u8]) -> (IpAddr, &[u8]) {
    if bytes.len() == 16 {
        let (ip, rest) = bytes.split_at(4);
        let octets: [u8; 4] = [ip[0], ip[1], ip[2], ip[3]];
        (IpAddr::V4(Ipv4Addr::from(octets)), rest)
    } else {
        let (ip, rest) = bytes.split_at(16);
        let mut octets = [0u8; 16];
        octets.copy_from_slice(ip);
        (IpAddr::V6(Ipv6Addr::from(octets)), rest)
    }
}

fn be_i16(b: &[u8]) -> i16 {
    i16::from_be_bytes([b[0], b[1]])
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// An offsetMsgId: where a record lives (`MessageDecoder.createMessageId` / `decodeMessageId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffsetMsgId {
    /// The storing broker's address.
    pub store_host: SocketAddr,
    /// The record's CommitLog offset.
    pub commit_log_offset: i64,
}

impl OffsetMsgId {
    /// An id for a record at `commit_log_offset` stored by `store_host`.
    pub fn new(store_host: SocketAddr, commit_log_offset: i64) -> Self {
        OffsetMsgId { store_host, commit_log_offset }
    }
}

impl OffsetMsgId {
    /// Appends the id as [`Display`](fmt::Display) writes it to `out`, with no buffer of its own:
    /// a broker writes one for every message it stores.
    pub fn push_hex(&self, out: &mut String) {
        let mut bytes = [0u8; 16 + 4 + 8];
        let ip_len = match self.store_host.ip() {
            IpAddr::V4(v4) => {
                bytes[..4].copy_from_slice(&v4.octets());
                4
            }
            IpAddr::V6(v6) => {
                bytes[..16].copy_from_slice(&v6.octets());
                16
            }
        };
        bytes[ip_len..ip_len + 4].copy_from_slice(&i32::from(self.store_host.port()).to_be_bytes());
        bytes[ip_len + 4..ip_len + 12].copy_from_slice(&self.commit_log_offset.to_be_bytes());
        push_hex_upper(&bytes[..ip_len + 12], out);
    }
}

impl fmt::Display for OffsetMsgId {
    /// Upper-case hex, 32 chars for IPv4, 56 for IPv6.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hex = String::new();
        self.push_hex(&mut hex);
        f.write_str(&hex)
    }
}

impl FromStr for OffsetMsgId {
    type Err = MsgIdError;

    fn from_str(id: &str) -> Result<Self, MsgIdError> {
        let bytes = decode_id_hex(id)?;
        let (ip, rest) = take_ip(&bytes);
        // rest is exactly port i32 + offset i64: the length check above guarantees 12 bytes.
        let port = be_i32(&rest[0..4]);
        let port = u16::try_from(port).map_err(|_| MsgIdError::Port { id: shown(id), port })?;
        Ok(OffsetMsgId { store_host: SocketAddr::new(ip, port), commit_log_offset: be_i64(&rest[4..12]) })
    }
}

/// The fixed part of every UNIQ_KEY a process generates (`MessageClientIDSetter.FIX_STRING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqIdSeed {
    /// The client's IP (`UtilAll.getIP()`).
    pub ip: IpAddr,
    /// Process id, truncated to 16 bits as Java's `(short) getPid()`.
    pub pid: i16,
    /// Java's classloader identity hash; any per-process value that tells two runs apart.
    pub class_loader_hash: i32,
}

impl UniqIdSeed {
    /// A seed for this process: its pid and a hash of the current time standing in for Java's
    /// classloader identity hash (reads the system clock; use a literal seed in tests).
    pub fn for_this_process(ip: IpAddr) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let pid = std::process::id();
        // Truncations are the point: Java keeps the low 16 bits of the pid, and any 32 bits of the
        // clock make a good enough per-run discriminator.
        let hash = (nanos as u32) ^ pid.rotate_left(16);
        UniqIdSeed { ip, pid: pid as i16, class_loader_hash: hash as i32 }
    }
}

/// Generates UNIQ_KEYs like `MessageClientIDSetter.createUniqID`, with the clock passed in.
///
/// Not thread-safe by itself; a client shares one behind a `Mutex` so the counter stays unique.
#[derive(Debug, Clone)]
pub struct UniqIdGenerator {
    prefix: Vec<u8>,
    month_start_ms: i64,
    next_month_start_ms: i64,
    counter: u16,
}

impl UniqIdGenerator {
    /// A generator for `seed`, counter at 0.
    pub fn new(seed: UniqIdSeed) -> Self {
        let mut prefix = ip_bytes(seed.ip);
        prefix.extend_from_slice(&seed.pid.to_be_bytes());
        prefix.extend_from_slice(&seed.class_loader_hash.to_be_bytes());
        // next_month_start_ms = MIN makes the first call compute the month window from its clock.
        UniqIdGenerator { prefix, month_start_ms: 0, next_month_start_ms: i64::MIN, counter: 0 }
    }

    /// The next id at wall-clock time `now_ms` (ms since the epoch).
    pub fn next_id(&mut self, now_ms: i64) -> String {
        if now_ms >= self.next_month_start_ms {
            let (start, next) = utc_month_window_ms(now_ms);
            self.month_start_ms = start;
            self.next_month_start_ms = next;
        }
        // Java: `(int)(current - startTime)`, forced to 0 for a small backwards clock step (NTP).
        let mut diff = now_ms.wrapping_sub(self.month_start_ms) as i32;
        if diff < 0 && diff > -1_000_000 {
            diff = 0;
        }
        let counter = self.counter;
        self.counter = self.counter.wrapping_add(1);
        let mut out = String::with_capacity((self.prefix.len() + 8) * 2);
        push_hex_upper(&self.prefix, &mut out);
        push_hex_upper(&diff.to_be_bytes(), &mut out);
        push_hex_upper(&counter.to_be_bytes(), &mut out);
        out
    }

    /// The next id at the system clock's current time.
    pub fn next_id_now(&mut self) -> String {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        self.next_id(i64::try_from(now_ms).unwrap_or(i64::MAX))
    }
}

/// A decoded UNIQ_KEY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqId {
    /// The generating client's IP.
    pub ip: IpAddr,
    /// Low 16 bits of its pid (`getPidFromID` reads them unsigned).
    pub pid: u16,
    /// Its classloader hash.
    pub class_loader_hash: i32,
    /// ms since the start of the month of generation (read unsigned, as `getNearlyTimeFromID` does).
    pub ms_since_month_start: u32,
    /// The per-process counter.
    pub counter: u16,
}

impl UniqId {
    /// Decodes a 32- or 56-char UNIQ_KEY.
    pub fn parse(id: &str) -> Result<Self, MsgIdError> {
        let bytes = decode_id_hex(id)?;
        let (ip, rest) = take_ip(&bytes);
        // rest is exactly pid i16 + hash i32 + ms i32 + counter i16: 12 bytes by the length check.
        Ok(UniqId {
            ip,
            pid: be_i16(&rest[0..2]) as u16,
            class_loader_hash: be_i32(&rest[2..6]),
            ms_since_month_start: be_i32(&rest[6..10]) as u32,
            counter: be_i16(&rest[10..12]) as u16,
        })
    }

    /// Approximate generation time (`getNearlyTimeFromID`, UTC): this month's start plus the offset,
    /// or last month's if that would not be in the past of `now_ms`.
    pub fn nearly_time_ms(&self, now_ms: i64) -> i64 {
        let span = i64::from(self.ms_since_month_start);
        let (start, _) = utc_month_window_ms(now_ms);
        if start.saturating_add(span) >= now_ms {
            let (prev_start, _) = utc_month_window_ms(start - 1);
            prev_start.saturating_add(span)
        } else {
            start + span
        }
    }
}

/// Start of the UTC month containing `now_ms` and start of the next one, in ms since the epoch.
fn utc_month_window_ms(now_ms: i64) -> (i64, i64) {
    let days = now_ms.div_euclid(MS_PER_DAY);
    let (y, m, _) = civil_from_days(days);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (days_from_civil(y, m, 1).saturating_mul(MS_PER_DAY), days_from_civil(ny, nm, 1).saturating_mul(MS_PER_DAY))
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month 1..=12, day 1..=31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Howard Hinnant's `days_from_civil`: (year, month, day) → days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::testing::socket_addr;

    #[test]
    fn offset_msg_id_golden() {
        // 10.0.0.1 | port 10911 = 0x00002A9F | offset 0x0102030405060708.
        let id = OffsetMsgId::new("10.0.0.1:10911".parse().unwrap(), 0x0102_0304_0506_0708);
        assert_eq!(id.to_string(), "0A00000100002A9F0102030405060708");
        assert_eq!("0a00000100002a9f0102030405060708".parse::<OffsetMsgId>(), Ok(id));
        let v6 = OffsetMsgId::new("[2001:db8::1]:10911".parse().unwrap(), 255);
        let s = v6.to_string();
        assert_eq!(s, "20010DB800000000000000000000000100002A9F00000000000000FF");
        assert_eq!(s.len(), OFFSET_MSG_ID_V6_HEX_LEN);
        assert_eq!(s.parse::<OffsetMsgId>(), Ok(v6));
    }

    #[test]
    fn offset_msg_id_rejects_bad_input() {
        assert!(matches!("".parse::<OffsetMsgId>(), Err(MsgIdError::Length { len: 0, .. })));
        assert!(matches!("0A".parse::<OffsetMsgId>(), Err(MsgIdError::Length { .. })));
        assert!(matches!("ZA00000100002A9F0102030405060708".parse::<OffsetMsgId>(), Err(MsgIdError::NotHex { .. })));
        assert!(matches!(
            "0A000001FFFFFFFF0102030405060708".parse::<OffsetMsgId>(),
            Err(MsgIdError::Port { port: -1, .. })
        ));
        assert!(matches!("0A0000010001000001020304050607é".parse::<OffsetMsgId>(), Err(MsgIdError::NotHex { .. })));
    }

    #[test]
    fn uniq_id_golden() {
        let seed = UniqIdSeed { ip: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)), pid: 0x1234, class_loader_hash: -1 };
        let mut generator = UniqIdGenerator::new(seed);
        // 2024-03-01T00:00:00Z = 1_709_251_200_000 ms; 1.5 s into the month.
        let now = 1_709_251_200_000 + 1_500;
        let first = generator.next_id(now);
        assert_eq!(first, "C0A801021234FFFFFFFF000005DC0000");
        assert_eq!(generator.next_id(now), "C0A801021234FFFFFFFF000005DC0001");
        let parsed = UniqId::parse(&first).unwrap();
        assert_eq!(
            parsed,
            UniqId { ip: seed.ip, pid: 0x1234, class_loader_hash: -1, ms_since_month_start: 1_500, counter: 0 }
        );
        assert_eq!(parsed.nearly_time_ms(now + 10_000), now);
        // Read back from the next month, the same id still points into March.
        assert_eq!(parsed.nearly_time_ms(1_711_929_600_000 + 1_000), now);
    }

    #[test]
    fn uniq_id_month_rolls_over_and_small_backward_steps_clamp() {
        let seed = UniqIdSeed { ip: IpAddr::V6(Ipv6Addr::LOCALHOST), pid: 1, class_loader_hash: 2 };
        let mut generator = UniqIdGenerator::new(seed);
        let april = 1_711_929_600_000; // 2024-04-01T00:00:00Z
        let id = UniqId::parse(&generator.next_id(april - 1)).unwrap();
        assert_eq!(id.ms_since_month_start, 31 * 86_400_000 - 1);
        let id = UniqId::parse(&generator.next_id(april + 5)).unwrap();
        assert_eq!(id.ms_since_month_start, 5);
        // Clock stepped back 500 ms across the boundary: Java clamps to 0.
        let id = UniqId::parse(&generator.next_id(april - 500)).unwrap();
        assert_eq!(id.ms_since_month_start, 0);
        assert_eq!(id.counter, 2);
    }

    #[test]
    fn month_windows() {
        assert_eq!(utc_month_window_ms(0), (0, 31 * MS_PER_DAY));
        // 2024-02 (leap year): 29 days.
        let feb = days_from_civil(2024, 2, 1) * MS_PER_DAY;
        assert_eq!(utc_month_window_ms(feb + 123), (feb, feb + 29 * MS_PER_DAY));
        // December rolls into January.
        let dec = days_from_civil(2023, 12, 1) * MS_PER_DAY;
        assert_eq!(utc_month_window_ms(dec), (dec, days_from_civil(2024, 1, 1) * MS_PER_DAY));
        // Before the epoch.
        assert_eq!(utc_month_window_ms(-1), (days_from_civil(1969, 12, 1) * MS_PER_DAY, 0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn offset_msg_id_round_trip(host in socket_addr(), offset in any::<i64>()) {
            let id = OffsetMsgId::new(host, offset);
            let s = id.to_string();
            prop_assert_eq!(s.len(), if host.is_ipv4() { 32 } else { 56 });
            prop_assert_eq!(s.parse::<OffsetMsgId>(), Ok(id));
            prop_assert_eq!(s.to_lowercase().parse::<OffsetMsgId>(), Ok(id));
        }

        #[test]
        fn uniq_id_round_trip(
            host in socket_addr(),
            pid in any::<i16>(),
            hash in any::<i32>(),
            now in 0i64..4_102_444_800_000,
            skip in 0u16..1000,
        ) {
            let mut generator = UniqIdGenerator::new(UniqIdSeed { ip: host.ip(), pid, class_loader_hash: hash });
            for _ in 0..skip {
                generator.counter = generator.counter.wrapping_add(1);
            }
            let id = generator.next_id(now);
            prop_assert_eq!(id.len(), if host.is_ipv4() { UNIQ_ID_V4_HEX_LEN } else { UNIQ_ID_V6_HEX_LEN });
            let parsed = UniqId::parse(&id).unwrap();
            prop_assert_eq!(parsed.ip, host.ip());
            prop_assert_eq!(parsed.pid, pid as u16);
            prop_assert_eq!(parsed.class_loader_hash, hash);
            prop_assert_eq!(parsed.counter, skip);
            let (start, _) = utc_month_window_ms(now);
            prop_assert_eq!(i64::from(parsed.ms_since_month_start), now - start);
            prop_assert_eq!(parsed.nearly_time_ms(now + 1), now);
        }

        #[test]
        fn days_civil_round_trip(days in -1_000_000i64..1_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn decoders_never_panic(s in "\\PC{0,60}") {
            let _ = s.parse::<OffsetMsgId>();
            let _ = UniqId::parse(&s);
        }
    }
}
