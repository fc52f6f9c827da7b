//! The auth id that opens every VMess AEAD request: 16 bytes, the AES-128
//! encryption, under a key derived from the user's command key, of
//!
//! ```text
//! [ timestamp: 8 bytes, big-endian Unix seconds ][ random: 4 ][ CRC-32 of the 12 before: 4, big-endian ]
//! ```
//!
//! The server decrypts it with each user's key, checks the CRC and that the
//! time is within 120 s of its own, and refuses an id it has seen before
//! ("replayed request"). So a client's ids must never repeat and its
//! timestamps must be the time: the caller passes both the time and the
//! four bytes.

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use aes::Aes128;

use super::kdf::{kdf16, AUTH_ID_KEY};

/// A user's auth id cipher, keyed once when the outbound is built.
#[derive(Clone)]
pub struct AuthIdKey(Aes128);

impl AuthIdKey {
    pub fn new(cmd_key: &[u8; 16]) -> Self {
        Self(Aes128::new(&kdf16(cmd_key, [AUTH_ID_KEY]).into()))
    }

    /// The auth id of a request made at `unix_secs` with `random`.
    pub fn seal(&self, unix_secs: u64, random: [u8; 4]) -> [u8; 16] {
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&unix_secs.to_be_bytes());
        block[8..12].copy_from_slice(&random);
        let crc = crc32(&block[..12]);
        block[12..].copy_from_slice(&crc.to_be_bytes());
        let mut block = block.into();
        self.0.encrypt_block(&mut block);
        block.into()
    }

    /// The server's side: the timestamp of `id`, if it decrypts under this
    /// key to a block whose CRC holds.
    pub fn open(&self, id: &[u8; 16]) -> Option<u64> {
        let mut block = (*id).into();
        self.0.decrypt_block(&mut block);
        let block: [u8; 16] = block.into();
        let (head, crc) = block.split_last_chunk::<4>()?;
        let (time, _random) = head.split_first_chunk::<8>()?;
        (u32::from_be_bytes(*crc) == crc32(head)).then(|| u64::from_be_bytes(*time))
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's and Go's `ChecksumIEEE`), by
/// the bit: it runs over 12 bytes once per connection, so a table or a
/// crate would buy nothing.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmess::kdf::cmd_key;

    #[test]
    fn crc32_matches_the_check_value_of_the_ieee_polynomial() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// The layout, checked by the server's steps: AES-decrypt under
    /// KDF16(cmd key, "AES Auth ID Encryption"), then time, random, CRC.
    #[test]
    fn an_auth_id_decrypts_to_time_random_and_crc() {
        let cmd = cmd_key(&[0x11; 16]);
        let key = AuthIdKey::new(&cmd);
        let id = key.seal(1_703_242_500, [1, 2, 3, 4]);
        assert_eq!(key.open(&id), Some(1_703_242_500));
        assert_eq!(
            AuthIdKey::new(&cmd_key(&[0x22; 16])).open(&id),
            None,
            "another user"
        );
        assert_ne!(key.seal(1_703_242_500, [1, 2, 3, 5]), id);
        assert_ne!(key.seal(1_703_242_501, [1, 2, 3, 4]), id);
    }
}
