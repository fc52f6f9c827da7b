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
pub(crate) mod tests {
    use std::io;
    use std::time::SystemTime;

    use crate::aead::Algorithm;
    use crate::codec::{Opened, Refusal, ServerCore, ServerStep, StreamCodec};

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

    /// A request and the bytes after it, None if the wire ended first, or
    /// the refusal.
    pub type Driven<R> = Result<Option<(R, Vec<u8>)>, Refusal>;

    /// Feeds `wire` to `core` `split` bytes at a time as the runtime would,
    /// dropping what it consumes; returns the request and the bytes after
    /// it, or None if the wire ends first.
    pub fn drive<C: ServerCore>(
        core: &mut C,
        wire: &[u8],
        split: usize,
        now: SystemTime,
    ) -> Driven<C::Request> {
        let mut pending = Vec::new();
        let mut fed = 0;
        while fed < wire.len() {
            let n = split.min(wire.len() - fed);
            pending.extend_from_slice(&wire[fed..fed + n]);
            fed += n;
            let mut out = Vec::new();
            match core.advance(&pending, now, &mut out)? {
                ServerStep::NeedMore { consumed } => {
                    pending.drain(..consumed);
                }
                ServerStep::Open { consumed, request } => {
                    let mut rest = pending[consumed..].to_vec();
                    rest.extend_from_slice(&wire[fed..]);
                    return Ok(Some((request, rest)));
                }
            }
            assert!(out.is_empty(), "shadowsocks sends nothing in the handshake");
        }
        Ok(None)
    }

    /// The payloads of every frame `open` finds in `wire`, handed over whole.
    pub fn frames(
        mut open: impl FnMut(&mut [u8]) -> io::Result<Opened>,
        wire: &[u8],
    ) -> io::Result<Vec<Vec<u8>>> {
        let mut buf = wire.to_vec();
        let mut at = 0;
        let mut found = Vec::new();
        while let Opened::Frame { consumed, payload } = open(&mut buf[at..])? {
            found.push(buf[at..][payload].to_vec());
            at += consumed;
        }
        assert_eq!(at, buf.len(), "bytes left unopened");
        Ok(found)
    }

    /// `data` sealed by `codec` as one frame, staged as the runtime does.
    pub fn seal_frame<S: StreamCodec>(codec: &mut S, data: &[u8]) -> Vec<u8> {
        let mut buf = vec![0; S::HEADROOM + data.len() + S::TAILROOM];
        buf[S::HEADROOM..S::HEADROOM + data.len()].copy_from_slice(data);
        let sealed = codec.seal(&mut buf, data.len()).unwrap();
        buf[sealed].to_vec()
    }
}
