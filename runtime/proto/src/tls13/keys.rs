//! One direction's traffic keys (RFC 8446 7.1-7.3): the AEAD key and iv
//! derived from an application traffic secret, the next secret for a
//! KeyUpdate, and the record sequence number the nonce is made from.

use std::fmt;

use aws_lc_rs::aead::{LessSafeKey, Nonce, UnboundKey, NONCE_LEN};
use aws_lc_rs::hkdf::Prk;

use super::{Error, Suite};
use crate::aead::Len;

/// The longest traffic secret (SHA-384's).
const MAX_SECRET_LEN: usize = 48;
/// The longest AEAD key (AES-256's and ChaCha20's).
const MAX_KEY_LEN: usize = 32;

/// One direction's record protection: the current traffic secret (kept for
/// KeyUpdate), the AEAD key and IV derived from it, and the sequence number
/// of the next record.
pub struct Keys {
    suite: Suite,
    secret: [u8; MAX_SECRET_LEN],
    pub(super) key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    pub(super) seq: u64,
}

impl Keys {
    /// `secret` must be `suite.hash_len()` bytes, else Err; `seq` is the
    /// sequence number of the next record under this secret (records
    /// already protected under it by OpenSSL).
    pub fn new(suite: Suite, secret: &[u8], seq: u64) -> Result<Keys, Error> {
        if secret.len() != suite.hash_len() {
            return Err(Error::BadSecret);
        }
        let mut kept = [0; MAX_SECRET_LEN];
        kept[..secret.len()].copy_from_slice(secret);
        let (key, iv) = traffic_keys(suite, secret);
        Ok(Keys {
            suite,
            secret: kept,
            key,
            iv,
            seq,
        })
    }

    /// KeyUpdate (RFC 8446 7.2): the next application traffic secret, its
    /// key and iv, seq 0.
    pub fn update(&mut self) {
        let len = self.suite.hash_len();
        let mut next = [0; MAX_SECRET_LEN];
        expand_label(
            self.suite,
            &self.secret[..len],
            b"traffic upd",
            &mut next[..len],
        );
        self.secret = next;
        (self.key, self.iv) = traffic_keys(self.suite, &self.secret[..len]);
        self.seq = 0;
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The nonce of the next record (RFC 8446 5.3): the iv XOR the
    /// sequence number, big-endian, left-padded to the iv's length.
    pub(super) fn nonce(&self) -> Nonce {
        let mut nonce = self.iv;
        for (byte, seq) in nonce[NONCE_LEN - 8..]
            .iter_mut()
            .zip(self.seq.to_be_bytes())
        {
            *byte ^= seq;
        }
        Nonce::assume_unique_for_key(nonce)
    }
}

/// Neither the secret nor the key: the suite and where the sequence is.
impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("suite", &self.suite)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// The write key and iv of a traffic secret (RFC 8446 7.3).
fn traffic_keys(suite: Suite, secret: &[u8]) -> (LessSafeKey, [u8; NONCE_LEN]) {
    let algorithm = suite.aead();
    let mut key = [0; MAX_KEY_LEN];
    let key = &mut key[..algorithm.key_len()];
    expand_label(suite, secret, b"key", key);
    let key = UnboundKey::new(algorithm, key).expect("the key is as long as its algorithm's");
    let mut iv = [0; NONCE_LEN];
    expand_label(suite, secret, b"iv", &mut iv);
    (LessSafeKey::new(key), iv)
}

/// HKDF-Expand-Label(secret, label, "", out.len()) (RFC 8446 7.1): HKDF-Expand
/// with the HkdfLabel structure as info, passed as slices rather than built.
fn expand_label(suite: Suite, secret: &[u8], label: &[u8], out: &mut [u8]) {
    const PREFIX: &[u8] = b"tls13 ";
    let length = (out.len() as u16).to_be_bytes();
    let label_len = [(PREFIX.len() + label.len()) as u8];
    let info: [&[u8]; 5] = [&length, &label_len, PREFIX, label, &[0]];
    // HKDF-Expand refuses only more than 255 hash lengths of output; ours
    // is at most one.
    Prk::new_less_safe(suite.hkdf(), secret)
        .expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("at most one hash length of output");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hex;

    // RFC 8448 section 3 (Simple 1-RTT Handshake): "{server} derive write
    // traffic keys for application data" and the client's counterpart.
    #[test]
    fn application_keys_match_rfc_8448_simple_1rtt() {
        for (secret, key, iv) in [
            (
                "a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643",
                "9f02283b6c9c07efc26bb9f2ac92e356",
                "cf782b88dd83549aadf1e984",
            ),
            (
                "9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5",
                "17422dda596ed5d9acd890e3c63f5051",
                "5b78923dee08579033e523d9",
            ),
        ] {
            let suite = Suite::Aes128GcmSha256;
            let mut out = [0; 16];
            expand_label(suite, &hex(secret), b"key", &mut out);
            assert_eq!(out[..], hex(key)[..]);
            let keys = Keys::new(suite, &hex(secret), 0).unwrap();
            assert_eq!(keys.iv[..], hex(iv)[..]);
        }
    }

    #[test]
    fn a_secret_of_the_wrong_length_is_refused() {
        assert_eq!(
            Keys::new(Suite::Aes256GcmSha384, &[7; 32], 0).err(),
            Some(Error::BadSecret)
        );
        assert_eq!(
            Keys::new(Suite::Chacha20Poly1305Sha256, &[7; 48], 0).err(),
            Some(Error::BadSecret)
        );
        assert!(Keys::new(Suite::Aes256GcmSha384, &[7; 48], 0).is_ok());
    }

    #[test]
    fn the_nonce_is_the_iv_xor_the_big_endian_sequence_number() {
        let mut keys = Keys::new(Suite::Aes128GcmSha256, &[1; 32], 0).unwrap();
        let iv = keys.iv;
        assert_eq!(keys.nonce().as_ref(), &iv);
        keys.seq = 0x0102;
        let mut expected = iv;
        expected[10] ^= 1;
        expected[11] ^= 2;
        assert_eq!(keys.nonce().as_ref(), &expected);
    }

    #[test]
    fn an_update_derives_the_next_secret_and_restarts_the_sequence() {
        let suite = Suite::Aes256GcmSha384;
        let mut keys = Keys::new(suite, &[3; 48], 9).unwrap();
        let mut next = [0; 48];
        expand_label(suite, &[3; 48], b"traffic upd", &mut next);
        keys.update();
        assert_eq!(keys.secret, next);
        assert_eq!(keys.seq(), 0);
        assert_eq!(keys.iv, Keys::new(suite, &next, 0).unwrap().iv);
    }
}
