//! etemenanki-proto: the protocol cores of the runtime, without I/O.
//!
//! Every function here works on byte slices the caller owns and returns what
//! to send, what was asked for, or why the peer is refused. The runtime does
//! the reading, writing, timing and dialing, so these cores are tested with
//! plain byte strings and no sockets.

pub mod addr;
pub mod aead;
pub mod backoff;
pub mod codec;
pub mod gun;
pub mod http;
pub mod mux;
pub mod shadowsocks;
pub mod sniff;
pub mod socks;
pub mod ss2022;
pub mod tls13;
pub mod trojan;
pub mod vless;
pub mod vmess;
pub mod ws;

#[cfg(test)]
mod testing;

pub use addr::Address;

/// The largest UDP payload any protocol here carries, and what a buffer
/// that receives one must hold.
pub const MAX_DATAGRAM: usize = 65_535;
