//! Hysteria 2 (PROTOCOL.md of apernet/hysteria): TCP flows as QUIC streams
//! and UDP as QUIC datagrams over one authenticated connection, optionally
//! obfuscated by Salamander.
//!
//! The wire format ([`tcp`], [`udp`], [`auth`]), Salamander's transform and
//! Brutal's window are sans-IO and tested without sockets; [`client`] and [`server`] run them over quinn.

pub mod auth;
pub mod client;
pub mod congestion;
pub mod masquerade;
pub mod salamander;
pub mod server;
mod stream;
pub mod tcp;
pub mod tls;
mod transport;
pub mod udp;
mod varint;

pub use salamander::Salamander;
pub use stream::QuicStream;
pub use tls::Verify;
