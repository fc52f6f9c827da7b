//! The keys of a Shadowsocks 2022 outbound, checked and expanded once when
//! it is built, and the BLAKE3 derivations of SIP022 and SIP023: a session
//! subkey per salt (TCP) or per session id (UDP), an identity subkey per
//! identity PSK and salt.

use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use etemenanki_ir::spec::Ss2022Method;

use super::block::Block;
use super::identity::Identity;
use super::{Ss2022Error, MAX_IDENTITIES, MAX_KEY_LEN};
use crate::aead::{AeadError, Algorithm, SessionKey};

const SESSION_SUBKEY: &str = "shadowsocks 2022 session subkey";
const IDENTITY_SUBKEY: &str = "shadowsocks 2022 identity subkey";

/// A key of the method's length, kept inline.
#[derive(Clone, Copy)]
pub(super) struct Key {
    bytes: [u8; MAX_KEY_LEN],
    len: usize,
}

impl Key {
    pub fn new(bytes: &[u8], len: usize) -> Result<Key, Ss2022Error> {
        if bytes.len() != len {
            return Err(Ss2022Error::KeyLength);
        }
        let mut key = Key {
            bytes: [0; MAX_KEY_LEN],
            len,
        };
        key.bytes[..len].copy_from_slice(bytes);
        Ok(key)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    #[cfg(test)]
    pub fn for_test(bytes: &[u8]) -> Key {
        Key::new(bytes, bytes.len()).unwrap()
    }
}

/// BLAKE3's derive_key over `key || salt`, as long as `key`.
fn derive(context: &str, key: &Key, salt: &[u8]) -> Key {
    let mut hasher = blake3::Hasher::new_derive_key(context);
    hasher.update(key.as_bytes());
    hasher.update(salt);
    let mut out = Key {
        bytes: [0; MAX_KEY_LEN],
        len: key.len,
    };
    hasher.finalize_xof().fill(&mut out.bytes[..key.len]);
    out
}

/// The AEAD key of the session `salt` (or a UDP session id) starts.
pub(super) fn session_key(
    algorithm: Algorithm,
    psk: &Key,
    salt: &[u8],
) -> Result<SessionKey, AeadError> {
    SessionKey::new(algorithm, derive(SESSION_SUBKEY, psk, salt).as_bytes())
}

/// The AES block that seals a TCP identity header for `salt`.
pub(super) fn identity_block(ipsk: &Key, salt: &[u8]) -> Result<Block, Ss2022Error> {
    Block::new(derive(IDENTITY_SUBKEY, ipsk, salt).as_bytes())
}

/// The AEAD of a method's streams, and whether it is an AES method (whose
/// UDP headers are AES blocks, and which alone has identity headers).
pub(super) fn algorithm_of(method: Ss2022Method) -> (Algorithm, bool) {
    match method {
        Ss2022Method::Blake3Aes128Gcm => (Algorithm::Aes128Gcm, true),
        Ss2022Method::Blake3Aes256Gcm => (Algorithm::Aes256Gcm, true),
        Ss2022Method::Blake3Chacha20Poly1305 => (Algorithm::ChaCha20Poly1305, false),
    }
}

/// Everything an outbound's flows are keyed from.
pub struct Keys {
    algorithm: Algorithm,
    psk: Key,
    /// The identity PSKs in the order the relays and the server peel them.
    identities: Vec<Identity>,
    /// AES methods: the block of the first identity PSK, or of the PSK,
    /// that seals our separate UDP headers.
    request_block: Option<Block>,
    /// AES methods: the block of the PSK that opens the server's.
    reply_block: Option<Block>,
    /// 2022-blake3-chacha20-poly1305: UDP packets are sealed with the PSK.
    xchacha: Option<XChaCha20Poly1305>,
}

impl Keys {
    /// Checks every PSK's length against the method and expands the key
    /// schedules every flow shares.
    pub fn new(
        method: Ss2022Method,
        psk: &[u8],
        identity_psks: &[&[u8]],
    ) -> Result<Keys, Ss2022Error> {
        let len = method.key_len();
        let psk = Key::new(psk, len)?;
        if identity_psks.len() > MAX_IDENTITIES {
            return Err(Ss2022Error::TooManyIdentities);
        }
        let ipsks = identity_psks
            .iter()
            .map(|ipsk| Key::new(ipsk, len))
            .collect::<Result<Vec<_>, _>>()?;
        let (algorithm, aes) = algorithm_of(method);
        if !aes && !ipsks.is_empty() {
            return Err(Ss2022Error::IdentityNeedsAes);
        }
        let identities = ipsks
            .iter()
            .enumerate()
            .map(|(i, ipsk)| Identity::new(*ipsk, ipsks.get(i + 1).unwrap_or(&psk)))
            .collect::<Result<Vec<_>, _>>()?;
        let (request_block, reply_block, xchacha) = if aes {
            let first = ipsks.first().unwrap_or(&psk);
            (
                Some(Block::new(first.as_bytes())?),
                Some(Block::new(psk.as_bytes())?),
                None,
            )
        } else {
            let xchacha = XChaCha20Poly1305::new_from_slice(psk.as_bytes())
                .map_err(|_| Ss2022Error::KeyLength)?;
            (None, None, Some(xchacha))
        };
        Ok(Keys {
            algorithm,
            psk,
            identities,
            request_block,
            reply_block,
            xchacha,
        })
    }

    pub(super) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A salt is as long as the key.
    pub(super) fn salt_len(&self) -> usize {
        self.psk.len
    }

    pub(super) fn psk(&self) -> &Key {
        &self.psk
    }

    pub(super) fn identities(&self) -> &[Identity] {
        &self.identities
    }

    pub(super) fn request_block(&self) -> Option<&Block> {
        self.request_block.as_ref()
    }

    pub(super) fn reply_block(&self) -> Option<&Block> {
        self.reply_block.as_ref()
    }

    pub(super) fn xchacha(&self) -> Option<&XChaCha20Poly1305> {
        self.xchacha.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_psk_must_have_the_methods_length() {
        let m = Ss2022Method::Blake3Aes128Gcm;
        assert!(Keys::new(m, &[1; 16], &[&[2; 16]]).is_ok());
        assert_eq!(
            Keys::new(m, &[1; 32], &[]).err(),
            Some(Ss2022Error::KeyLength)
        );
        assert_eq!(
            Keys::new(m, &[1; 16], &[&[2; 32]]).err(),
            Some(Ss2022Error::KeyLength)
        );
        assert_eq!(
            Keys::new(m, &[1; 16], &[&[2u8; 16][..]; 17]).err(),
            Some(Ss2022Error::TooManyIdentities)
        );
        assert_eq!(
            Keys::new(Ss2022Method::Blake3Chacha20Poly1305, &[1; 32], &[&[2; 32]]).err(),
            Some(Ss2022Error::IdentityNeedsAes)
        );
    }

    /// The subkey is derive_key over key || salt, as long as the key: for a
    /// 16-byte key, the first half of the 32-byte derivation.
    #[test]
    fn a_subkey_is_blake3_derive_key_of_key_and_salt() {
        let key = Key::new(&[7; 16], 16).unwrap();
        let mut material = vec![7; 16];
        material.extend_from_slice(&[9; 16]);
        let full = blake3::derive_key(SESSION_SUBKEY, &material);
        assert_eq!(
            derive(SESSION_SUBKEY, &key, &[9; 16]).as_bytes(),
            &full[..16]
        );
        let key = Key::new(&[7; 32], 32).unwrap();
        let mut material = vec![7; 32];
        material.extend_from_slice(&[9; 32]);
        let full = blake3::derive_key(IDENTITY_SUBKEY, &material);
        assert_eq!(
            derive(IDENTITY_SUBKEY, &key, &[9; 32]).as_bytes(),
            &full[..]
        );
    }
}
