//! The credential a Trojan request carries: the password's SHA-224 digest
//! in lowercase hex, computed once when the outbound is built.

use sha2::{Digest, Sha224};

/// The length of the hex digest on the wire.
pub const HASH_LEN: usize = 56;

/// `hex(SHA224(password))`. No `Debug`: it authenticates as well as the
/// password does.
#[derive(Clone)]
pub struct PasswordHash([u8; HASH_LEN]);

impl PasswordHash {
    pub fn new(password: &str) -> PasswordHash {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digest = Sha224::digest(password.as_bytes());
        let mut hex = [0u8; HASH_LEN];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(digest) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        PasswordHash(hex)
    }

    pub fn as_bytes(&self) -> &[u8; HASH_LEN] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_lowercase_hex_sha224_of_the_password() {
        // FIPS 180-4 example vectors for SHA-224.
        assert_eq!(
            PasswordHash::new("abc").as_bytes(),
            b"23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"
        );
        assert_eq!(
            PasswordHash::new("").as_bytes(),
            b"d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f"
        );
    }
}
