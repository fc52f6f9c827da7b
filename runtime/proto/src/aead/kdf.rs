//! Shadowsocks AEAD key derivation: the master key from a password
//! (OpenSSL's EVP_BytesToKey with MD5, one iteration, no salt), derived once
//! when an outbound or inbound is built, and the session subkey of each salt
//! (HKDF-SHA1 with info "ss-subkey"), derived once per direction of a flow.

use aws_lc_rs::hkdf::{KeyType, Salt, HKDF_SHA1_FOR_LEGACY_USE_ONLY};
use md5::{Digest, Md5};

use super::{AeadError, Algorithm, PacketKey, SessionKey, MAX_KEY_LEN};

/// The HKDF info of every Shadowsocks AEAD session subkey.
const SUBKEY_INFO: &[u8] = b"ss-subkey";

/// A method's master key. Cheap to clone; it is what a flow's session keys
/// are derived from.
#[derive(Clone)]
pub struct MasterKey {
    algorithm: Algorithm,
    bytes: [u8; MAX_KEY_LEN],
}

impl MasterKey {
    /// EVP_BytesToKey(MD5) of `password`, as long as the method's key.
    pub fn from_password(algorithm: Algorithm, password: &[u8]) -> Self {
        let mut bytes = [0; MAX_KEY_LEN];
        evp_bytes_to_key(password, &mut bytes[..algorithm.key_len()]);
        Self { algorithm, bytes }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A salt is as long as the key: 16 bytes for aes-128-gcm, else 32.
    pub fn salt_len(&self) -> usize {
        self.algorithm.key_len()
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.algorithm.key_len()]
    }

    /// The key schedule of the session that `salt` starts: one for what we
    /// send (our salt) and one for what we receive (the peer's).
    pub fn session_key(&self, salt: &[u8]) -> Result<SessionKey, AeadError> {
        let mut subkey = [0; MAX_KEY_LEN];
        SessionKey::new(self.algorithm, self.subkey(salt, &mut subkey)?)
    }

    /// The key schedule of the one UDP packet that `salt` starts.
    pub fn packet_key(&self, salt: &[u8]) -> Result<PacketKey, AeadError> {
        let mut subkey = [0; MAX_KEY_LEN];
        PacketKey::new(self.algorithm, self.subkey(salt, &mut subkey)?)
    }

    fn subkey<'a>(
        &self,
        salt: &[u8],
        out: &'a mut [u8; MAX_KEY_LEN],
    ) -> Result<&'a [u8], AeadError> {
        let subkey = &mut out[..self.algorithm.key_len()];
        hkdf_sha1(self.bytes(), salt, SUBKEY_INFO, subkey)?;
        Ok(subkey)
    }
}

/// EVP_BytesToKey with MD5, one round and no salt: D1 = MD5(password),
/// Dn = MD5(Dn-1 || password), the key the first bytes of D1 || D2 || ...
fn evp_bytes_to_key(password: &[u8], key: &mut [u8]) {
    let mut previous = None;
    for block in key.chunks_mut(16) {
        let mut md5 = Md5::new();
        if let Some(previous) = previous {
            md5.update(previous);
        }
        md5.update(password);
        let digest: [u8; 16] = md5.finalize().into();
        block.copy_from_slice(&digest[..block.len()]);
        previous = Some(digest);
    }
}

/// An HKDF output length, as aws-lc-rs asks for one (shared with tls13's keys).
pub(crate) struct Len(pub(crate) usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF (RFC 5869) with HMAC-SHA1, filling `out`.
fn hkdf_sha1(ikm: &[u8], salt: &[u8], info: &[u8], out: &mut [u8]) -> Result<(), AeadError> {
    Salt::new(HKDF_SHA1_FOR_LEGACY_USE_ONLY, salt)
        .extract(ikm)
        .expand(&[info], Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| AeadError::KeyLength)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::{ChunkOpener, ChunkSealer, Opened};
    use crate::testing::hex;

    // `openssl enc -aes-256-cbc -k 'barfoo!' -md md5 -nosalt -P` prints the
    // same key: EVP_BytesToKey itself.
    #[test]
    fn the_master_key_is_evp_bytes_to_key_of_the_password() {
        let mut key = [0; 32];
        evp_bytes_to_key(b"barfoo!", &mut key);
        assert_eq!(
            key.to_vec(),
            hex("b3adc47839e047eb228870526dc8fc30b347287ffca3045dcea06b3fdf090acb")
        );
        let master = MasterKey::from_password(Algorithm::Aes128Gcm, b"barfoo!");
        assert_eq!(master.bytes(), &key[..16]);
        assert_eq!(master.salt_len(), 16);
        let master = MasterKey::from_password(Algorithm::ChaCha20Poly1305, b"barfoo!");
        assert_eq!(master.bytes(), &key[..]);
        assert_eq!(master.salt_len(), 32);
        assert_eq!(master.algorithm(), Algorithm::ChaCha20Poly1305);
    }

    #[test]
    fn hkdf_sha1_matches_rfc_5869_test_case_4() {
        let mut okm = [0; 42];
        hkdf_sha1(
            &hex("0b0b0b0b0b0b0b0b0b0b0b"),
            &hex("000102030405060708090a0b0c"),
            &hex("f0f1f2f3f4f5f6f7f8f9"),
            &mut okm,
        )
        .unwrap();
        assert_eq!(
            okm.to_vec(),
            hex("085a01ea1b10f36933068b56efa5ad81a4f14b822f5b091568a9cdd4f155fda2c22e422478d305f3f896")
        );
    }

    #[test]
    fn hkdf_sha1_refuses_more_than_255_blocks() {
        let mut okm = [0; 255 * 20 + 1];
        assert_eq!(
            hkdf_sha1(b"k", b"s", b"i", &mut okm),
            Err(AeadError::KeyLength)
        );
    }

    /// Two chunks, "hello" and " world", sealed under password "barfoo!"
    /// and salt 00 01 02 ..., by Python's `cryptography` (OpenSSL) with
    /// hashlib's MD5 and an HMAC-SHA1 HKDF: a Shadowsocks stream after its
    /// salt, made by an implementation other than ours.
    const REFERENCE: [(Algorithm, &str); 3] = [
        (
            Algorithm::Aes128Gcm,
            "6f516de5fb51219959820fba2fbaa7060cf6e8a53f65d182c3e7fdb60757cc6d
             e4a54367cb74a827eafec850022b0c732ac995e0fea5eda70b72156d07b40295
             fecb5f42b28afb6ddf9d3c47e20ac4",
        ),
        (
            Algorithm::Aes256Gcm,
            "fe32afeb1b6b5afee4953444c734467514fdb6f5cc0f033f510973cd30785b47
             6c59f5b47847c9e4c82db7f04adecab1750be23947f38c1babb4dc5738fe53d0
             2429ac90fc5c57dbc92cfe0411b7b2",
        ),
        (
            Algorithm::ChaCha20Poly1305,
            "a02a7867f0725260f542fb1ffd407f07a60c26d76ee13a692cabd05d0c89b363
             6c1ec8c0eab347ed492c97794f7d33a12879cc7867f7fff94633beec31519f9a
             996e0b876bd7860885e72c14d1b98d",
        ),
    ];

    #[test]
    fn a_reference_stream_opens_and_ours_seals_to_the_same_bytes() {
        for (algorithm, wire) in REFERENCE {
            let master = MasterKey::from_password(algorithm, b"barfoo!");
            let salt: Vec<u8> = (0..master.salt_len() as u8).collect();
            let mut wire = hex(wire);

            let mut sealer = ChunkSealer::new(master.session_key(&salt).unwrap());
            let mut ours = vec![0; wire.len()];
            let (_, first) = sealer.seal(b"hello", &mut ours).unwrap();
            sealer.seal(b" world", &mut ours[first..]).unwrap();
            assert_eq!(ours, wire, "{algorithm:?}");

            let mut opener = ChunkOpener::new(master.session_key(&salt).unwrap());
            let mut at = 0;
            for text in [&b"hello"[..], b" world"] {
                let Ok(Opened::Chunk { consumed, payload }) = opener.open(&mut wire[at..]) else {
                    panic!("{algorithm:?}: no chunk at {at}");
                };
                assert_eq!(&wire[at..][payload], text);
                at += consumed;
            }
            assert_eq!(at, wire.len());
        }
    }

    #[test]
    fn a_wrong_password_fails_the_first_chunk() {
        let (algorithm, wire) = REFERENCE[0];
        let master = MasterKey::from_password(algorithm, b"foobar!");
        let mut wire = hex(wire);
        let mut opener = ChunkOpener::new(master.session_key(&[0; 16]).unwrap());
        assert_eq!(opener.open(&mut wire), Err(AeadError::Unauthentic));
    }
}
