//! The errors of the Shadowsocks 2022 client: static texts, and the
//! io::Error kind a flow or a build fails with.

use std::fmt;
use std::io;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ss2022Error {
    /// A PSK whose length is not the method's key length.
    KeyLength,
    /// Identity PSKs with 2022-blake3-chacha20-poly1305, which has no
    /// identity headers.
    IdentityNeedsAes,
    /// More identity PSKs than [`MAX_IDENTITIES`](super::MAX_IDENTITIES).
    TooManyIdentities,
    /// The system's random generator failed.
    Random,
    /// A response header, or a reply packet, not of the server type.
    NotServer,
    /// A peer's timestamp more than 30 s from ours.
    Timestamp,
    /// A response header that names another request's salt.
    SaltMismatch,
    /// A reply packet for another client session.
    OtherSession,
    /// A reply packet id seen before or behind the replay window.
    Replayed,
    /// A new server session while the previous one is still in use.
    SessionChurn,
    /// A packet shorter than its headers, or padding past its end.
    Short,
    /// A peer's address field that does not parse.
    Address,
    /// A caller's payload that does not fit one chunk or one packet.
    PayloadTooLong,
    /// A request header, or a client packet, not of the client type.
    NotClient,
    /// A client's timestamp more than 30 s from ours.
    ClientTimestamp,
    /// An identity header that names none of the inbound's users.
    UnknownUser,
    /// A request whose salt this inbound has seen.
    ReplayedSalt,
    /// A request the salt filter has no room for: it holds as many salts
    /// as it may, all seen within 60 s.
    SaltFilterFull,
    /// A client packet given to the state of another session or user.
    SessionMismatch,
    /// A request's address field that does not parse.
    RequestAddress,
    /// A caller's buffer too short for what it should hold.
    BufferTooSmall,
}

impl Ss2022Error {
    pub fn message(self) -> &'static str {
        match self {
            Self::KeyLength => "shadowsocks-2022: a psk's length does not match its method",
            Self::IdentityNeedsAes => {
                "shadowsocks-2022: identity psks need an aes method (2022-blake3-aes-128-gcm or 2022-blake3-aes-256-gcm)"
            }
            Self::TooManyIdentities => "shadowsocks-2022: more than 16 identity psks",
            Self::Random => "shadowsocks-2022: the system random generator failed",
            Self::NotServer => "shadowsocks-2022: the server's header is not of the server type",
            Self::Timestamp => {
                "shadowsocks-2022: the server's timestamp is more than 30 s from ours"
            }
            Self::SaltMismatch => {
                "shadowsocks-2022: the response header names another request's salt"
            }
            Self::OtherSession => "shadowsocks-2022: a reply for another client session",
            Self::Replayed => "shadowsocks-2022: a replayed or out-of-window packet id",
            Self::SessionChurn => {
                "shadowsocks-2022: a new server session while the previous one is in use"
            }
            Self::Short => "shadowsocks-2022: a packet shorter than its headers",
            Self::Address => "shadowsocks-2022: a reply's address does not parse",
            Self::PayloadTooLong => "shadowsocks-2022: a payload too long for one record",
            Self::NotClient => "shadowsocks-2022: the client's header is not of the client type",
            Self::ClientTimestamp => {
                "shadowsocks-2022: the client's timestamp is more than 30 s from ours"
            }
            Self::UnknownUser => "shadowsocks-2022: the identity header names no user",
            Self::ReplayedSalt => "shadowsocks-2022: a replayed salt",
            Self::SaltFilterFull => {
                "shadowsocks-2022: the salt filter is full of salts seen within 60 s"
            }
            Self::SessionMismatch => {
                "shadowsocks-2022: a packet for another client session or user"
            }
            Self::RequestAddress => "shadowsocks-2022: the request's address does not parse",
            Self::BufferTooSmall => "shadowsocks-2022: the buffer is too short for the record",
        }
    }

    /// What a peer sent is InvalidData; what the caller or the
    /// configuration asked for is InvalidInput.
    pub fn kind(self) -> io::ErrorKind {
        match self {
            Self::KeyLength
            | Self::IdentityNeedsAes
            | Self::TooManyIdentities
            | Self::PayloadTooLong
            | Self::BufferTooSmall => io::ErrorKind::InvalidInput,
            Self::Random | Self::SaltFilterFull => io::ErrorKind::Other,
            Self::NotServer
            | Self::Timestamp
            | Self::SaltMismatch
            | Self::OtherSession
            | Self::Replayed
            | Self::SessionChurn
            | Self::Short
            | Self::Address
            | Self::NotClient
            | Self::ClientTimestamp
            | Self::UnknownUser
            | Self::ReplayedSalt
            | Self::RequestAddress => io::ErrorKind::InvalidData,
            Self::SessionMismatch => io::ErrorKind::InvalidInput,
        }
    }
}

impl fmt::Display for Ss2022Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Ss2022Error {}

impl From<Ss2022Error> for io::Error {
    fn from(error: Ss2022Error) -> Self {
        io::Error::new(error.kind(), error)
    }
}
