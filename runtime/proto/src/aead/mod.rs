//! AEAD for the proxy protocols: the ciphers with a key schedule built once
//! per key, the Shadowsocks AEAD chunk framing that client and server
//! share, and the Shadowsocks AEAD key derivation.
//!
//! All of it works in place in buffers the caller owns, and nothing
//! allocates per chunk.

mod chunk;
mod cipher;
mod error;
mod kdf;

pub use chunk::{
    sealed_len, ChunkOpener, ChunkSealer, Opened, MAX_CHUNK_LEN, MAX_PAYLOAD, RECORD_OVERHEAD,
    RESERVE,
};
pub use cipher::{Algorithm, Nonce, PacketKey, SessionKey, MAX_KEY_LEN, NONCE_LEN, TAG_LEN};
pub use error::AeadError;
pub(crate) use kdf::Len;
pub use kdf::MasterKey;
