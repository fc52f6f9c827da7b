//! The three TLS 1.3 cipher suites aws-lc-rs implements, and what each means for
//! the record layer: the AEAD and the hash of its key schedule.
//!
//! The two CCM suites (0x1304, 0x1305) are not here: aws-lc-rs has no CCM, and
//! no browser or common server offers them, so such a session stays on
//! OpenSSL.

use aws_lc_rs::aead::{self, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
use aws_lc_rs::hkdf::{self, HKDF_SHA256, HKDF_SHA384};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    Aes128GcmSha256,
    Aes256GcmSha384,
    Chacha20Poly1305Sha256,
}

impl Suite {
    /// From the IANA id (0x1301, 0x1302, 0x1303); None for any other (CCM
    /// suites included).
    pub fn from_id(id: u16) -> Option<Suite> {
        match id {
            0x1301 => Some(Self::Aes128GcmSha256),
            0x1302 => Some(Self::Aes256GcmSha384),
            0x1303 => Some(Self::Chacha20Poly1305Sha256),
            _ => None,
        }
    }

    /// The IANA name, as OpenSSL's `SSL_CIPHER_standard_name` and its
    /// ciphersuites lists spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aes128GcmSha256 => "TLS_AES_128_GCM_SHA256",
            Self::Aes256GcmSha384 => "TLS_AES_256_GCM_SHA384",
            Self::Chacha20Poly1305Sha256 => "TLS_CHACHA20_POLY1305_SHA256",
        }
    }

    /// The hash length: 32 or 48; the length every traffic secret of the
    /// suite has.
    pub fn hash_len(self) -> usize {
        match self {
            Self::Aes128GcmSha256 | Self::Chacha20Poly1305Sha256 => 32,
            Self::Aes256GcmSha384 => 48,
        }
    }

    pub(super) fn aead(self) -> &'static aead::Algorithm {
        match self {
            Self::Aes128GcmSha256 => &AES_128_GCM,
            Self::Aes256GcmSha384 => &AES_256_GCM,
            Self::Chacha20Poly1305Sha256 => &CHACHA20_POLY1305,
        }
    }

    pub(super) fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Self::Aes128GcmSha256 | Self::Chacha20Poly1305Sha256 => HKDF_SHA256,
            Self::Aes256GcmSha384 => HKDF_SHA384,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::hkdf::KeyType;

    #[test]
    fn only_the_gcm_and_chacha20_suites_are_known() {
        for (id, suite) in [
            (0x1301, Suite::Aes128GcmSha256),
            (0x1302, Suite::Aes256GcmSha384),
            (0x1303, Suite::Chacha20Poly1305Sha256),
        ] {
            assert_eq!(Suite::from_id(id), Some(suite));
            assert_eq!(suite.hkdf().len(), suite.hash_len());
        }
        // The CCM suites, a TLS 1.2 suite, nothing.
        for id in [0x1304, 0x1305, 0xc02f, 0] {
            assert_eq!(Suite::from_id(id), None);
        }
    }
}
