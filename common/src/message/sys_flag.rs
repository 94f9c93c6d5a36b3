//! Message `sysFlag` bits (`common/.../sysflag/MessageSysFlag.java`, docs/store-format.md#sysflag).
//!
//! The flag travels in SEND headers (`f`) and in every CommitLog record (SYSFLAG at byte 36). It is an
//! `i32` on the wire; these helpers keep it an `i32` so values round-trip bit for bit, including bits
//! this module does not know.

/// Bit 0: the body is compressed (zlib unless bits 8–10 say otherwise).
pub const COMPRESSED: i32 = 0x1;
/// Bit 1: the topic's filter type is MULTI_TAG.
pub const MULTI_TAGS: i32 = 0x1 << 1;
/// Bits 2–3 = 0: not transactional.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// Bits 2–3 = 1: half (prepared) message.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
/// Bits 2–3 = 2: commit of a half message.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
/// Bits 2–3 = 3: rollback of a half message; also the mask of the transaction bits.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
/// Bit 4: BORNHOST is IPv6 (16-byte address, 20-byte field).
pub const BORNHOST_V6: i32 = 0x1 << 4;
/// Bit 5: STOREHOST is IPv6 (16-byte address, 20-byte field).
pub const STOREHOST_V6: i32 = 0x1 << 5;
/// Bit 6 (5.x): the batch must be unwrapped.
pub const NEED_UNWRAP: i32 = 0x1 << 6;
/// Bit 7 (5.x): the record is an inner batch.
pub const INNER_BATCH: i32 = 0x1 << 7;
/// Bits 8–10: compression type (4.9.x `COMPRESSION_TYPE_COMPARATOR`).
pub const COMPRESSION_TYPE_MASK: i32 = 0x7 << 8;
/// Compression type LZ4.
pub const COMPRESSION_LZ4_TYPE: i32 = 0x1 << 8;
/// Compression type ZSTD.
pub const COMPRESSION_ZSTD_TYPE: i32 = 0x2 << 8;
/// Compression type ZLIB (explicit; 0 with bit 0 set also means zlib).
pub const COMPRESSION_ZLIB_TYPE: i32 = 0x3 << 8;

/// The transaction state carried in bits 2–3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionType {
    /// Ordinary message.
    Not,
    /// Half message waiting for commit or rollback; not visible to consumers.
    Prepared,
    /// Commit of a half message.
    Commit,
    /// Rollback of a half message.
    Rollback,
}

impl TransactionType {
    /// The bits of this type.
    pub fn bits(self) -> i32 {
        match self {
            TransactionType::Not => TRANSACTION_NOT_TYPE,
            TransactionType::Prepared => TRANSACTION_PREPARED_TYPE,
            TransactionType::Commit => TRANSACTION_COMMIT_TYPE,
            TransactionType::Rollback => TRANSACTION_ROLLBACK_TYPE,
        }
    }

    /// The type encoded in `sys_flag` (`getTransactionValue`); every flag maps to one of the four.
    pub fn of(sys_flag: i32) -> Self {
        match sys_flag & TRANSACTION_ROLLBACK_TYPE {
            TRANSACTION_PREPARED_TYPE => TransactionType::Prepared,
            TRANSACTION_COMMIT_TYPE => TransactionType::Commit,
            TRANSACTION_ROLLBACK_TYPE => TransactionType::Rollback,
            _ => TransactionType::Not,
        }
    }
}

/// `sys_flag` with its transaction bits replaced (`resetTransactionValue`).
pub fn with_transaction_type(sys_flag: i32, t: TransactionType) -> i32 {
    (sys_flag & !TRANSACTION_ROLLBACK_TYPE) | t.bits()
}

/// Body compression named by bits 8–10 (`CompressionType.findByValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionType {
    /// zlib (value 0 for pre-4.9.5 senders, or 3).
    Zlib,
    /// LZ4 (value 1).
    Lz4,
    /// ZSTD (value 2).
    Zstd,
}

/// The compression type of `sys_flag`, or the unknown 3-bit value (4..=7).
pub fn compression_type(sys_flag: i32) -> Result<CompressionType, i32> {
    match (sys_flag & COMPRESSION_TYPE_MASK) >> 8 {
        0 | 3 => Ok(CompressionType::Zlib),
        1 => Ok(CompressionType::Lz4),
        2 => Ok(CompressionType::Zstd),
        other => Err(other),
    }
}

/// Whether bit 0 is set.
pub fn is_compressed(sys_flag: i32) -> bool {
    sys_flag & COMPRESSED != 0
}

/// `sys_flag` without the compressed bit (`clearCompressedFlag`).
pub fn clear_compressed(sys_flag: i32) -> i32 {
    sys_flag & !COMPRESSED
}

/// Whether BORNHOST is an IPv6 address.
pub fn is_born_host_v6(sys_flag: i32) -> bool {
    sys_flag & BORNHOST_V6 != 0
}

/// Whether STOREHOST is an IPv6 address.
pub fn is_store_host_v6(sys_flag: i32) -> bool {
    sys_flag & STOREHOST_V6 != 0
}

/// `sys_flag` with the BORNHOST_V6 bit set to `v6`.
pub fn with_born_host_v6(sys_flag: i32, v6: bool) -> i32 {
    if v6 { sys_flag | BORNHOST_V6 } else { sys_flag & !BORNHOST_V6 }
}

/// `sys_flag` with the STOREHOST_V6 bit set to `v6`.
pub fn with_store_host_v6(sys_flag: i32, v6: bool) -> i32 {
    if v6 { sys_flag | STOREHOST_V6 } else { sys_flag & !STOREHOST_V6 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_values_match_java() {
        assert_eq!(
            [COMPRESSED, MULTI_TAGS, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE],
            [0x1, 0x2, 0x4, 0x8, 0xC]
        );
        assert_eq!([BORNHOST_V6, STOREHOST_V6, NEED_UNWRAP, INNER_BATCH], [0x10, 0x20, 0x40, 0x80]);
        assert_eq!([COMPRESSION_LZ4_TYPE, COMPRESSION_ZSTD_TYPE, COMPRESSION_ZLIB_TYPE], [0x100, 0x200, 0x300]);
    }

    #[test]
    fn transaction_type_round_trips_and_keeps_other_bits() {
        let base = COMPRESSED | BORNHOST_V6 | 0x4000_0000;
        for t in [TransactionType::Not, TransactionType::Prepared, TransactionType::Commit, TransactionType::Rollback] {
            let flag = with_transaction_type(base | TRANSACTION_ROLLBACK_TYPE, t);
            assert_eq!(TransactionType::of(flag), t);
            assert_eq!(flag & !TRANSACTION_ROLLBACK_TYPE, base);
        }
    }

    #[test]
    fn helpers() {
        assert!(is_compressed(0x101));
        assert_eq!(clear_compressed(0x101), 0x100);
        assert_eq!(compression_type(COMPRESSED), Ok(CompressionType::Zlib));
        assert_eq!(compression_type(COMPRESSION_ZLIB_TYPE), Ok(CompressionType::Zlib));
        assert_eq!(compression_type(COMPRESSION_LZ4_TYPE), Ok(CompressionType::Lz4));
        assert_eq!(compression_type(COMPRESSION_ZSTD_TYPE), Ok(CompressionType::Zstd));
        assert_eq!(compression_type(0x7 << 8), Err(7));
        assert!(is_born_host_v6(with_born_host_v6(0, true)));
        assert!(!is_born_host_v6(with_born_host_v6(-1, false)));
        assert!(is_store_host_v6(with_store_host_v6(0, true)));
        assert!(!is_store_host_v6(with_store_host_v6(-1, false)));
    }
}
