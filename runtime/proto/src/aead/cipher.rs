//! The AEAD algorithms, their key schedules, and the Shadowsocks nonce
//! counter.
//!
//! A key that lives for a session (a stream's, a UDP session's, a TLS
//! record layer's) is aws-lc-rs's: on this project's machines it seals and
//! opens AES-GCM half as fast again as ring, with AVX-512 (VAES) where ring
//! stops at AVX2, and its schedule is one heap block built once per session.
//! A key used for one packet (Shadowsocks AEAD UDP salts every packet) is
//! ring's, whose schedule lives on the stack: no allocation per packet.
//! runtime/proto/benches/aead.rs has the figures against OpenSSL and
//! RustCrypto.

use etemenanki_ir::spec::SsMethod;

use super::AeadError;

/// Every algorithm here has a 16-byte tag.
pub const TAG_LEN: usize = 16;
/// Every algorithm here has a 12-byte nonce.
pub const NONCE_LEN: usize = 12;
/// The longest key of any algorithm here.
pub const MAX_KEY_LEN: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Aes128Gcm,
    Aes256Gcm,
    /// The IETF construction of RFC 8439: a 12-byte nonce.
    ChaCha20Poly1305,
}

impl Algorithm {
    pub fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm | Self::ChaCha20Poly1305 => 32,
        }
    }
}

impl From<SsMethod> for Algorithm {
    fn from(method: SsMethod) -> Self {
        match method {
            SsMethod::Aes128Gcm => Self::Aes128Gcm,
            SsMethod::Aes256Gcm => Self::Aes256Gcm,
            SsMethod::Chacha20IetfPoly1305 => Self::ChaCha20Poly1305,
        }
    }
}

/// A 12-byte nonce that counts up as a little-endian integer, as
/// Shadowsocks AEAD does: zero for the first record of a session key, one
/// more after each record sealed or opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nonce([u8; NONCE_LEN]);

impl Nonce {
    pub const ZERO: Nonce = Nonce([0; NONCE_LEN]);

    pub fn new(bytes: [u8; NONCE_LEN]) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; NONCE_LEN] {
        &self.0
    }

    /// Adds one, little-endian, wrapping after 2^96 - 1 (no session key
    /// lives that long).
    pub fn increment(&mut self) {
        for byte in &mut self.0 {
            let (next, carry) = byte.overflowing_add(1);
            *byte = next;
            if !carry {
                return;
            }
        }
    }
}

/// A key schedule over one of two libraries with ring's API (aws-lc-rs is
/// written to be ring's drop-in): `$krate` names it.
macro_rules! key_schedule {
    ($(#[$doc:meta])* $name:ident, $krate:ident) => {
        $(#[$doc])*
        pub struct $name($krate::aead::LessSafeKey);

        impl $name {
            pub fn new(algorithm: Algorithm, key: &[u8]) -> Result<Self, AeadError> {
                use $krate::aead::{AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
                if key.len() != algorithm.key_len() {
                    return Err(AeadError::KeyLength);
                }
                let algorithm = match algorithm {
                    Algorithm::Aes128Gcm => &AES_128_GCM,
                    Algorithm::Aes256Gcm => &AES_256_GCM,
                    Algorithm::ChaCha20Poly1305 => &CHACHA20_POLY1305,
                };
                let key = $krate::aead::UnboundKey::new(algorithm, key)
                    .map_err(|_| AeadError::KeyLength)?;
                Ok(Self($krate::aead::LessSafeKey::new(key)))
            }

            /// Seals `buf` in place: its first `buf.len() - TAG_LEN` bytes
            /// are the plaintext, replaced by the ciphertext, and the tag is
            /// written over the last TAG_LEN bytes. `aad` is authenticated,
            /// not sent (Shadowsocks passes none; VMess's header does).
            pub fn seal_in_place(
                &self,
                nonce: &Nonce,
                aad: &[u8],
                buf: &mut [u8],
            ) -> Result<(), AeadError> {
                let (data, tag_out) = buf
                    .split_last_chunk_mut::<TAG_LEN>()
                    .ok_or(AeadError::BufferTooSmall)?;
                let tag = self
                    .0
                    .seal_in_place_separate_tag(
                        $krate::aead::Nonce::assume_unique_for_key(nonce.0),
                        $krate::aead::Aad::from(aad),
                        data,
                    )
                    .map_err(|_| AeadError::Cipher)?;
                tag_out.copy_from_slice(tag.as_ref());
                Ok(())
            }

            /// Opens `buf` in place: the ciphertext followed by its tag. On
            /// success the first `buf.len() - TAG_LEN` bytes are the
            /// plaintext, and that length is returned; on failure the
            /// contents of `buf` are unspecified.
            pub fn open_in_place(
                &self,
                nonce: &Nonce,
                aad: &[u8],
                buf: &mut [u8],
            ) -> Result<usize, AeadError> {
                if buf.len() < TAG_LEN {
                    return Err(AeadError::BufferTooSmall);
                }
                let opened = self
                    .0
                    .open_in_place(
                        $krate::aead::Nonce::assume_unique_for_key(nonce.0),
                        $krate::aead::Aad::from(aad),
                        buf,
                    )
                    .map_err(|_| AeadError::Unauthentic)?;
                Ok(opened.len())
            }
        }
    };
}

key_schedule!(
    /// The key schedule of a session key (for Shadowsocks, one per salt and
    /// direction of a stream), built once and used for every record of that
    /// session.
    SessionKey,
    aws_lc_rs
);

key_schedule!(
    /// The key schedule of a key used for one packet, held on the stack.
    PacketKey,
    ring
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hex;

    /// Runs `$body` once with `$key` naming each key schedule, so every
    /// test covers both libraries.
    macro_rules! each_schedule {
        ($key:ident => $body:block) => {{
            {
                type $key = SessionKey;
                $body
            }
            {
                type $key = PacketKey;
                $body
            }
        }};
    }

    /// Seals `plaintext` with `key` and `nonce`, checks ciphertext || tag
    /// against `expected`, then opens it back.
    fn known_answer(
        algorithm: Algorithm,
        key: &str,
        nonce: &str,
        aad: &[u8],
        plaintext: &[u8],
        expected: &str,
    ) {
        let nonce = Nonce::new(hex(nonce).try_into().unwrap());
        each_schedule!(Key => {
            let key = Key::new(algorithm, &hex(key)).unwrap();
            let mut buf = plaintext.to_vec();
            buf.extend_from_slice(&[0; TAG_LEN]);
            key.seal_in_place(&nonce, aad, &mut buf).unwrap();
            assert_eq!(buf, hex(expected));
            assert_eq!(
                key.open_in_place(&nonce, aad, &mut buf),
                Ok(plaintext.len())
            );
            assert_eq!(&buf[..plaintext.len()], plaintext);
            buf[0] ^= 1;
            assert_eq!(
                key.open_in_place(&nonce, aad, &mut buf),
                Err(AeadError::Unauthentic)
            );
        });
    }

    const GCM_PLAINTEXT: &str = "
        d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
        1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";

    // The GCM specification's test case 3 (McGrew and Viega, also in NIST's
    // CAVP files): AES-128, no AAD.
    #[test]
    fn aes_128_gcm_matches_the_gcm_spec_test_case_3() {
        known_answer(
            Algorithm::Aes128Gcm,
            "feffe9928665731c6d6a8f9467308308",
            "cafebabefacedbaddecaf888",
            &[],
            &hex(GCM_PLAINTEXT),
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985
             4d5c2af327cd64a62cf35abd2ba6fab4",
        );
    }

    // The GCM specification's test case 15: AES-256, no AAD.
    #[test]
    fn aes_256_gcm_matches_the_gcm_spec_test_case_15() {
        known_answer(
            Algorithm::Aes256Gcm,
            "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
            "cafebabefacedbaddecaf888",
            &[],
            &hex(GCM_PLAINTEXT),
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad
             b094dac5d93471bdec1a502270e3cc6c",
        );
    }

    #[test]
    fn chacha20_poly1305_matches_rfc_8439_section_2_8_2() {
        known_answer(
            Algorithm::ChaCha20Poly1305,
            "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f",
            "070000004041424344454647",
            &hex("50515253c0c1c2c3c4c5c6c7"),
            b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip \
              for the future, sunscreen would be it.",
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6
             3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36
             92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
             3ff4def08e4b7a9de576d26586cec64b6116
             1ae10b594f09e26a7e902ecbd0600691",
        );
    }

    /// OpenSSL, an implementation independent of both libraries, opens
    /// what we seal and seals what we open, for every algorithm and a
    /// spread of lengths.
    #[test]
    fn openssl_agrees_with_every_algorithm() {
        use openssl::symm::{decrypt_aead, encrypt_aead, Cipher};
        for (algorithm, cipher) in [
            (Algorithm::Aes128Gcm, Cipher::aes_128_gcm()),
            (Algorithm::Aes256Gcm, Cipher::aes_256_gcm()),
            (Algorithm::ChaCha20Poly1305, Cipher::chacha20_poly1305()),
        ] {
            let key_bytes: Vec<u8> = (0..algorithm.key_len() as u8).map(|b| b ^ 0x5c).collect();
            each_schedule!(Key => {
                let key = Key::new(algorithm, &key_bytes).unwrap();
                let mut nonce = Nonce::ZERO;
                for len in (0..=40).chain([1400, 16 * 1024]) {
                    nonce.increment();
                    let plaintext: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
                    let mut tag = [0; TAG_LEN];
                    let ciphertext = encrypt_aead(
                        cipher,
                        &key_bytes,
                        Some(nonce.as_bytes()),
                        b"aad",
                        &plaintext,
                        &mut tag,
                    )
                    .unwrap();
                    let mut buf = plaintext.clone();
                    buf.extend_from_slice(&[0; TAG_LEN]);
                    key.seal_in_place(&nonce, b"aad", &mut buf).unwrap();
                    assert_eq!(&buf[..len], &ciphertext[..], "{algorithm:?} {len}");
                    assert_eq!(&buf[len..], &tag[..], "{algorithm:?} {len}");
                    let opened = decrypt_aead(
                        cipher,
                        &key_bytes,
                        Some(nonce.as_bytes()),
                        b"aad",
                        &ciphertext,
                        &tag,
                    )
                    .unwrap();
                    assert_eq!(opened, plaintext);
                    assert_eq!(key.open_in_place(&nonce, b"aad", &mut buf), Ok(len));
                    assert_eq!(&buf[..len], &plaintext[..]);
                }
            });
        }
    }

    #[test]
    fn a_key_of_the_wrong_length_is_refused() {
        each_schedule!(Key => {
            assert_eq!(
                Key::new(Algorithm::Aes256Gcm, &[0; 16]).err(),
                Some(AeadError::KeyLength)
            );
            assert_eq!(
                Key::new(Algorithm::Aes128Gcm, &[0; 32]).err(),
                Some(AeadError::KeyLength)
            );
        });
    }

    #[test]
    fn a_buffer_shorter_than_a_tag_is_refused() {
        each_schedule!(Key => {
            let key = Key::new(Algorithm::Aes128Gcm, &[0; 16]).unwrap();
            let mut buf = [0; TAG_LEN - 1];
            assert_eq!(
                key.seal_in_place(&Nonce::ZERO, &[], &mut buf),
                Err(AeadError::BufferTooSmall)
            );
            assert_eq!(
                key.open_in_place(&Nonce::ZERO, &[], &mut buf),
                Err(AeadError::BufferTooSmall)
            );
        });
    }

    #[test]
    fn the_nonce_counts_up_little_endian_with_carry() {
        let mut nonce = Nonce::ZERO;
        nonce.increment();
        assert_eq!(nonce.as_bytes(), &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut nonce = Nonce::new([0xff, 0xff, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        nonce.increment();
        assert_eq!(nonce.as_bytes(), &[0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut nonce = Nonce::new([0xff; NONCE_LEN]);
        nonce.increment();
        assert_eq!(nonce, Nonce::ZERO);
    }

    #[test]
    fn ss_methods_map_to_their_algorithms() {
        for (method, algorithm) in [
            (SsMethod::Aes128Gcm, Algorithm::Aes128Gcm),
            (SsMethod::Aes256Gcm, Algorithm::Aes256Gcm),
            (SsMethod::Chacha20IetfPoly1305, Algorithm::ChaCha20Poly1305),
        ] {
            assert_eq!(Algorithm::from(method), algorithm);
            assert_eq!(algorithm.key_len(), method.key_len());
        }
    }
}
