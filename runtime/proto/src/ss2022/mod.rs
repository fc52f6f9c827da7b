//! Shadowsocks 2022 (SIP022), client and server: TCP streams and UDP
//! sessions, single-user or through identity headers (SIP023) for
//! multi-user servers.
//!
//! - [`Keys`]: the method, the user's PSK and the identity PSKs, checked
//!   and expanded once when an outbound is built.
//! - [`Ss2022Stream`]: a TCP flow. As a [`ClientCodec`](crate::codec::ClientCodec)
//!   it writes the salt, the identity headers and the two request header
//!   chunks at dial; as a [`StreamCodec`](crate::codec::StreamCodec) it
//!   seals length and payload chunks of up to 0xFFFF bytes and opens the
//!   response, whose header (type, timestamp, our salt) is checked first.
//! - [`UdpSession`]: a UDP flow, one client session: the AES methods' packets
//!   with a separate header sealed by one AES block, and the XChaCha20 form of
//!   2022-blake3-chacha20-poly1305; replies are checked against a sliding
//!   window of packet ids per server session.
//!
//! The server half is [`server`]: [`server::Users`], the TCP core and its
//! stream codec, and the UDP client sessions.
//!
//! Time is the caller's: the request is stamped with the `now` it passes,
//! and replies are checked against the clock it hands in. Fresh salts,
//! session ids and nonces come from the system's CSPRNG (ring).

mod address;
mod block;
mod chunks;
mod error;
mod identity;
mod kdf;
mod random;
mod replay;
mod salt_filter;
pub mod server;
mod stream;
mod udp;
mod udp_aes;
mod udp_chacha;
mod udp_server;
mod users;

pub use error::Ss2022Error;
pub use kdf::Keys;
pub use stream::Ss2022Stream;
pub use udp::UdpSession;

use crate::aead::TAG_LEN;

/// The largest payload one chunk carries: SIP022 lifts AEAD's 0x3FFF cap.
pub const MAX_PAYLOAD: usize = 0xFFFF;
/// What a chunk adds to its payload: the sealed two-byte length with its
/// tag, and the payload's tag.
pub const RECORD_OVERHEAD: usize = 2 + TAG_LEN + TAG_LEN;
/// The longest chunk on the wire; the client runtime's buffers hold one.
pub const MAX_RECORD_LEN: usize = MAX_PAYLOAD + RECORD_OVERHEAD;
/// Most identity PSKs an outbound may chain: each adds 16 bytes to every
/// request, and all of them must fit the staging reserve.
pub const MAX_IDENTITIES: usize = 16;
/// A peer's timestamp may differ from ours by this many seconds at most.
pub const TIMESTAMP_WINDOW_SECS: u64 = 30;
/// The most padding a request header carries (SIP022's MaxPaddingLength).
pub const MAX_PADDING: usize = 900;

/// The longest key, salt and identity block: 32 bytes (aes-256, chacha20).
const MAX_KEY_LEN: usize = 32;
/// An identity header and the AES block of the separate UDP header.
const BLOCK_LEN: usize = 16;

/// Seconds since the Unix epoch; zero for a clock set before it.
fn unix_secs(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Whether a peer's timestamp lies within the window around `now`.
fn timestamp_fresh(timestamp: u64, now: std::time::SystemTime) -> bool {
    unix_secs(now).abs_diff(timestamp) <= TIMESTAMP_WINDOW_SECS
}

#[cfg(test)]
mod tests {
    use etemenanki_ir::spec::Ss2022Method;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    pub const METHODS: [Ss2022Method; 3] = [
        Ss2022Method::Blake3Aes128Gcm,
        Ss2022Method::Blake3Aes256Gcm,
        Ss2022Method::Blake3Chacha20Poly1305,
    ];

    pub fn t0() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_750_000_000)
    }

    /// A PSK of the method's length, every byte `byte`.
    pub fn psk(method: Ss2022Method, byte: u8) -> Vec<u8> {
        vec![byte; method.key_len()]
    }
}
