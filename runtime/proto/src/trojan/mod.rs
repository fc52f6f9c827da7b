//! Trojan (trojan-gfw's protocol): the password's hash, the request that
//! opens a tunnel or a UDP association, the framing of UDP packets inside
//! the tunnel (the same both ways), and the server core ([`server`]).
//!
//! ```text
//! request: hex(SHA224(password)) CRLF CMD ATYP DST.ADDR DST.PORT CRLF
//! packet:  ATYP DST.ADDR DST.PORT LENGTH CRLF PAYLOAD
//! ```
//!
//! Addresses are SOCKS5's. The server sends no answer: the tunnel is open
//! once the request is written, and a wrong password is met by the server's
//! fallback (typically a web server), not by a refusal.

mod password;
mod request;
pub mod server;
mod udp;

pub use password::PasswordHash;
pub use request::{Command, Request, REQUEST_HEADER_MAX};
pub use udp::{UdpFraming, PACKET_HEADER_MAX};

const CRLF: &[u8; 2] = b"\r\n";
