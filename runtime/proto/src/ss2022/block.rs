//! One AES block, encrypted or decrypted alone (ECB of exactly one block):
//! the separate header of an AES-method UDP packet and every identity
//! header. The key schedule is expanded once per key.

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use aes::{Aes128, Aes256};

use super::{Ss2022Error, BLOCK_LEN};

pub enum Block {
    Aes128(Aes128),
    Aes256(Aes256),
}

impl Block {
    /// AES-128 for a 16-byte key, AES-256 for a 32-byte one.
    pub fn new(key: &[u8]) -> Result<Block, Ss2022Error> {
        match key.len() {
            16 => Aes128::new_from_slice(key).map(Block::Aes128),
            32 => Aes256::new_from_slice(key).map(Block::Aes256),
            _ => return Err(Ss2022Error::KeyLength),
        }
        .map_err(|_| Ss2022Error::KeyLength)
    }

    pub fn encrypt(&self, block: &mut [u8; BLOCK_LEN]) {
        match self {
            Block::Aes128(aes) => aes.encrypt_block(block.into()),
            Block::Aes256(aes) => aes.encrypt_block(block.into()),
        }
    }

    pub fn decrypt(&self, block: &mut [u8; BLOCK_LEN]) {
        match self {
            Block::Aes128(aes) => aes.decrypt_block(block.into()),
            Block::Aes256(aes) => aes.decrypt_block(block.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    // FIPS-197 appendix C.1 and C.3.
    #[test]
    fn one_block_matches_fips_197() {
        let plain: [u8; 16] = hex("00112233445566778899aabbccddeeff").try_into().unwrap();
        for (key, expected) in [
            (
                "000102030405060708090a0b0c0d0e0f",
                "69c4e0d86a7b0430d8cdb78070b4c55a",
            ),
            (
                "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                "8ea2b7ca516745bfeafc49904b496089",
            ),
        ] {
            let block = Block::new(&hex(key)).unwrap();
            let mut data = plain;
            block.encrypt(&mut data);
            assert_eq!(data.to_vec(), hex(expected));
            block.decrypt(&mut data);
            assert_eq!(data, plain);
        }
        assert!(matches!(Block::new(&[0; 24]), Err(Ss2022Error::KeyLength)));
    }
}
