//! Shadowsocks AEAD (SIP004), the legacy methods aes-128-gcm, aes-256-gcm
//! and chacha20-ietf-poly1305: the client stream codec, the server core,
//! and the UDP codec both ends share.
//!
//! The server half is [`server`]: the TCP core, its stream codec, the salt
//! filter an inbound shares, and the UDP packet functions.
//!
//! A stream is, each way, a random salt and then the chunks of
//! [`crate::aead`] under the session key HKDF-SHA1(master, salt,
//! "ss-subkey"); the client's first chunk is the destination, a SOCKS5
//! address. A UDP packet is a salt of its own and one sealed record,
//! `[salt][sealed(ATYP addr port payload)][tag]`, under the session key of
//! that salt with nonce zero. The address names the destination on the way
//! to the server and the source on the way back.
//!
//! The master key ([`MasterKey::from_password`]) is derived once, when an
//! outbound (or inbound) is built; only session keys are derived per flow
//! or per packet. Codecs that take a random salt also take a given one, so
//! tests are deterministic.
//!
//! [`MasterKey::from_password`]: crate::aead::MasterKey::from_password

mod salt_filter;
pub mod server;
mod session;
mod stream;
mod udp;

use std::io;

use ring::rand::{SecureRandom, SystemRandom};

use crate::aead::MAX_KEY_LEN;

pub use session::{Incoming, Outgoing};
pub use stream::SsStream;
pub use udp::SsDatagram;

/// A salt is as long as the method's key: at most 32 bytes.
pub const MAX_SALT_LEN: usize = MAX_KEY_LEN;
/// The longest SOCKS5 address: type, length, a 255-byte name, port.
pub const MAX_ADDRESS_LEN: usize = 1 + 1 + 255 + 2;

/// Fills `salt` from the system's random source.
fn random_salt(salt: &mut [u8]) -> io::Result<()> {
    SystemRandom::new()
        .fill(salt)
        .map_err(|_| io::Error::other("shadowsocks: the system gave no randomness for a salt"))
}

#[cfg(test)]
mod tests {
    use crate::aead::Algorithm;

    pub const ALGORITHMS: [Algorithm; 3] = [
        Algorithm::Aes128Gcm,
        Algorithm::Aes256Gcm,
        Algorithm::ChaCha20Poly1305,
    ];

    pub fn hex(text: &str) -> Vec<u8> {
        let text: String = text.split_whitespace().collect();
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }
}
