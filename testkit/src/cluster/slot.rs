//! Which of Redis Cluster's 16384 hash slots a key belongs to, computed as Redis computes it:
//! CRC16 (XMODEM) of the key's hash tag, or of the whole key when it has none, modulo 16384.

/// How many hash slots a Redis Cluster has.
pub const SLOTS: u16 = 16_384;

/// The hash slot of `key`. When the key holds a `{` followed by a `}` with at least one byte
/// between them, only the bytes between the first `{` and the first `}` after it count, so that
/// `{lock}` and `{lock}:token` share a slot. `slot("123456789") == 12739`.
pub fn slot(key: impl AsRef<[u8]>) -> u16 {
    crc16_xmodem(hash_tag(key.as_ref())) % SLOTS
}

/// The part of `key` that decides its slot.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&byte| byte == b'}') {
        Some(length) if length > 0 => &rest[..length],
        _ => key,
    }
}

/// CRC16 with polynomial 0x1021, initial value 0, no reflection (XMODEM), as in Redis's crc16.c.
fn crc16_xmodem(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_standard_check_value() {
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(slot("123456789"), 12739);
    }

    #[test]
    fn only_a_non_empty_hash_tag_counts() {
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % SLOTS);
        assert_eq!(slot("foo{{bar}}zap"), slot("{bar"));
        assert_eq!(slot("foo{bar}{zap}"), slot("bar"));
        assert_eq!(slot("no tag{"), crc16_xmodem(b"no tag{") % SLOTS);
        assert_eq!(slot(""), 0);
    }
}
