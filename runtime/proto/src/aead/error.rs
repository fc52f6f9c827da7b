//! The one error type of the AEAD layer: static texts, and the io::Error
//! kind the runtime fails a flow with.

use std::fmt;
use std::io;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AeadError {
    /// A key of the wrong length for its algorithm.
    KeyLength,
    /// A record whose tag does not match: a wrong password or key, or bytes
    /// changed on the way.
    Unauthentic,
    /// A peer's chunk length over [`MAX_PAYLOAD`](super::MAX_PAYLOAD).
    LengthOverLimit,
    /// A caller's payload over [`MAX_PAYLOAD`](super::MAX_PAYLOAD) for one chunk.
    PayloadTooLong,
    /// A caller's buffer too short for what it should hold.
    BufferTooSmall,
    /// The cipher refused to seal (never for the sizes a chunk can have).
    Cipher,
}

impl AeadError {
    pub fn message(self) -> &'static str {
        match self {
            Self::KeyLength => "aead: the key's length does not match its method",
            Self::Unauthentic => {
                "aead: a sealed record failed authentication (wrong key or corrupt data)"
            }
            Self::LengthOverLimit => "shadowsocks: a chunk length over 0x3FFF",
            Self::PayloadTooLong => "shadowsocks: a chunk payload over 0x3FFF bytes",
            Self::BufferTooSmall => "aead: the buffer is too short for the sealed record",
            Self::Cipher => "aead: the cipher refused to seal",
        }
    }

    /// What a peer sent is InvalidData; what a caller asked for is
    /// InvalidInput.
    pub fn kind(self) -> io::ErrorKind {
        match self {
            Self::Unauthentic | Self::LengthOverLimit => io::ErrorKind::InvalidData,
            Self::KeyLength | Self::PayloadTooLong | Self::BufferTooSmall => {
                io::ErrorKind::InvalidInput
            }
            Self::Cipher => io::ErrorKind::Other,
        }
    }
}

impl fmt::Display for AeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for AeadError {}

impl From<AeadError> for io::Error {
    fn from(error: AeadError) -> Self {
        io::Error::new(error.kind(), error)
    }
}
