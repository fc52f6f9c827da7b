//! The request header a VMess AEAD client opens with, sealed:
//!
//! ```text
//! [ auth id: 16 ][ length: 2, sealed ][ tag: 16 ][ nonce: 8 ][ header, sealed ][ tag: 16 ]
//! ```
//!
//! Both records are AES-128-GCM under keys and nonces the KDF derives from
//! the command key, the auth id and the connection nonce, with the auth id
//! as associated data. The header itself:
//!
//! ```text
//! [ 1 ][ body iv: 16 ][ body key: 16 ][ response auth: 1 ][ options: 1 ]
//! [ padding length << 4 | security: 1 ][ 0 ][ command: 1 ][ port: 2 ][ address ]
//! [ padding ][ FNV-1a 32 of everything before: 4 ]
//! ```
//!
//! with the address as type 1 and four bytes, 2 and a length-prefixed name,
//! or 3 and sixteen bytes.

use std::io;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use super::auth_id::AuthIdKey;
use super::kdf::{
    cmd_key, kdf12, kdf16, HEADER_KEY, HEADER_LEN_KEY, HEADER_LEN_NONCE, HEADER_NONCE,
};
use super::security::Security;
use crate::aead::{AeadError, Algorithm, Nonce, SessionKey, TAG_LEN};
use crate::codec::{ClientCodec, ClientStep};
use crate::Address;

/// The header's version byte.
pub(super) const VERSION: u8 = 1;
/// The header before its address: version, IV, key, response auth,
/// options, security, reserved, command.
pub(super) const FIXED: usize = 1 + 16 + 16 + 1 + 1 + 1 + 1 + 1;
/// The longest header in clear: the fixed part, the port, the longest
/// address (a 255-byte name), 15 bytes of padding and the checksum.
pub(super) const PLAIN_MAX: usize = FIXED + 2 + 1 + 1 + 255 + 15 + 4;
/// What the auth id, the sealed length and the nonce take before the
/// sealed header.
pub(super) const PREFIX: usize = 16 + 2 + TAG_LEN + 8;
/// The longest sealed request header.
pub const HEADER_MAX: usize = PREFIX + PLAIN_MAX + TAG_LEN;

/// What a request asks the server to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Tcp = 1,
    Udp = 2,
}

/// A user, with the keys every request derives from, computed once when
/// the outbound is built.
#[derive(Clone)]
pub struct User {
    cmd_key: [u8; 16],
    auth_id: AuthIdKey,
}

impl User {
    pub fn new(uuid: &[u8; 16]) -> Self {
        let cmd_key = cmd_key(uuid);
        Self {
            auth_id: AuthIdKey::new(&cmd_key),
            cmd_key,
        }
    }

    pub fn cmd_key(&self) -> &[u8; 16] {
        &self.cmd_key
    }

    pub(super) fn auth_id(&self) -> &AuthIdKey {
        &self.auth_id
    }
}

/// The random bytes one request takes, drawn by the caller.
pub struct Entropy {
    pub body_key: [u8; 16],
    pub body_iv: [u8; 16],
    pub response_auth: u8,
    /// Its low nibble is the header's padding length.
    pub padding_len: u8,
    pub padding: [u8; 15],
    pub nonce: [u8; 8],
    /// Seeds the bytes the body's chunks are padded with.
    pub padding_seed: [u8; 32],
}

impl Entropy {
    /// How many random bytes [`Entropy::from_bytes`] takes.
    pub const LEN: usize = 16 + 16 + 1 + 1 + 15 + 8 + 32;

    pub fn from_bytes(bytes: &[u8; Self::LEN]) -> Self {
        let mut entropy = Entropy {
            body_key: [0; 16],
            body_iv: [0; 16],
            response_auth: bytes[32],
            padding_len: bytes[33],
            padding: [0; 15],
            nonce: [0; 8],
            padding_seed: [0; 32],
        };
        entropy.body_key.copy_from_slice(&bytes[..16]);
        entropy.body_iv.copy_from_slice(&bytes[16..32]);
        entropy.padding.copy_from_slice(&bytes[34..49]);
        entropy.nonce.copy_from_slice(&bytes[49..57]);
        entropy.padding_seed.copy_from_slice(&bytes[57..]);
        entropy
    }
}

/// One request's sealed header, written whole at dial: VMess's server
/// answers only with the first bytes of the response, so the client does
/// not wait for it, and the stream codec checks it on its first open.
pub struct Request {
    sealed: [u8; HEADER_MAX],
    len: usize,
}

fn invalid_input(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, text)
}

impl Request {
    /// Seals the header of a `command` to `target` by `user` at `now`.
    /// `auth_random` are the auth id's four bytes: unique per request.
    pub fn new(
        user: &User,
        command: Command,
        target: &Address,
        security: Security,
        now: SystemTime,
        auth_random: [u8; 4],
        entropy: &Entropy,
    ) -> io::Result<Self> {
        let unix_secs = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| invalid_input("vmess: the clock is before 1970"))?
            .as_secs();
        let mut plain = [0u8; PLAIN_MAX];
        let len = write_plain(&mut plain, command, target, security, entropy)?;
        let plain = &plain[..len];

        let mut sealed = [0u8; HEADER_MAX];
        let auth_id = user.auth_id.seal(unix_secs, auth_random);
        let (id, rest) = sealed.split_at_mut(16);
        id.copy_from_slice(&auth_id);
        let (length, rest) = rest.split_at_mut(2 + TAG_LEN);
        let (nonce, header) = rest.split_at_mut(8);
        nonce.copy_from_slice(&entropy.nonce);
        // len <= PLAIN_MAX, well under u16::MAX.
        length[..2].copy_from_slice(&(len as u16).to_be_bytes());
        let path = |name| [name, &auth_id[..], &entropy.nonce[..]];
        seal(
            user,
            path(HEADER_LEN_KEY),
            path(HEADER_LEN_NONCE),
            &auth_id,
            length,
        )?;
        let header = &mut header[..len + TAG_LEN];
        header[..len].copy_from_slice(plain);
        seal(user, path(HEADER_KEY), path(HEADER_NONCE), &auth_id, header)?;
        Ok(Self {
            sealed,
            len: PREFIX + len + TAG_LEN,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.sealed[..self.len]
    }
}

/// Seals `record` (plaintext then room for the tag) under the key and
/// nonce KDF derives from the command key along `key_path` and
/// `nonce_path`.
pub(super) fn seal(
    user: &User,
    key_path: [&[u8]; 3],
    nonce_path: [&[u8]; 3],
    aad: &[u8],
    record: &mut [u8],
) -> io::Result<()> {
    let key = SessionKey::new(Algorithm::Aes128Gcm, &kdf16(&user.cmd_key, key_path))?;
    let nonce = Nonce::new(kdf12(&user.cmd_key, nonce_path));
    key.seal_in_place(&nonce, aad, record)?;
    Ok(())
}

/// Opens `record` (ciphertext then tag) sealed as [`seal`] seals it;
/// returns the plaintext's length.
pub(super) fn open_record(
    user: &User,
    key_path: [&[u8]; 3],
    nonce_path: [&[u8]; 3],
    aad: &[u8],
    record: &mut [u8],
) -> Result<usize, AeadError> {
    let key = SessionKey::new(Algorithm::Aes128Gcm, &kdf16(&user.cmd_key, key_path))?;
    let nonce = Nonce::new(kdf12(&user.cmd_key, nonce_path));
    key.open_in_place(&nonce, aad, record)
}

/// Writes the header in clear into `out`; returns its length.
fn write_plain(
    out: &mut [u8; PLAIN_MAX],
    command: Command,
    target: &Address,
    security: Security,
    entropy: &Entropy,
) -> io::Result<usize> {
    let padding = usize::from(entropy.padding_len & 0x0f);
    out[0] = VERSION;
    out[1..17].copy_from_slice(&entropy.body_iv);
    out[17..33].copy_from_slice(&entropy.body_key);
    out[33] = entropy.response_auth;
    out[34] = security.layout(command == Command::Udp).options();
    out[35] = (padding as u8) << 4 | security.nibble();
    out[36] = 0;
    out[37] = command as u8;
    out[38..40].copy_from_slice(&target.port().to_be_bytes());
    let mut at = FIXED + 2;
    match target {
        Address::Ip(SocketAddr::V4(v4)) => {
            out[at] = 1;
            out[at + 1..at + 5].copy_from_slice(&v4.ip().octets());
            at += 5;
        }
        Address::Domain(name, _) => {
            let len = u8::try_from(name.len())
                .map_err(|_| invalid_input("vmess: a domain name longer than 255 bytes"))?;
            out[at] = 2;
            out[at + 1] = len;
            out[at + 2..at + 2 + name.len()].copy_from_slice(name.as_bytes());
            at += 2 + name.len();
        }
        Address::Ip(SocketAddr::V6(v6)) => {
            out[at] = 3;
            out[at + 1..at + 17].copy_from_slice(&v6.ip().octets());
            at += 17;
        }
    }
    out[at..at + padding].copy_from_slice(&entropy.padding[..padding]);
    at += padding;
    let checksum = fnv1a32(&out[..at]);
    out[at..at + 4].copy_from_slice(&checksum.to_be_bytes());
    Ok(at + 4)
}

/// FNV-1a, 32 bits.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

impl ClientCodec for Request {
    type Reply = ();

    /// HEADER_MAX (374) rounded up to a multiple of 64.
    const STAGING_RESERVE: usize = HEADER_MAX.next_multiple_of(64);

    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        out.extend_from_slice(self.bytes());
        Ok(ClientStep::Open(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a32_matches_its_reference_values() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn the_staging_reserve_is_the_longest_header_rounded_up_to_384() {
        assert_eq!(HEADER_MAX, 374);
        assert_eq!(Request::STAGING_RESERVE, 384);
    }
}
