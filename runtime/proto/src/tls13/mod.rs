//! The TLS 1.3 record layer after the handshake (RFC 8446 sections 5 to 7),
//! for sessions whose handshake OpenSSL did.
//!
//! OpenSSL keeps about 15 KiB for every idle TLS 1.3 session, most of it in
//! its record layer. Once a session is established the runtime takes the
//! two application traffic secrets and the record sequence numbers, frees
//! OpenSSL's SSL object, and protects records with this module: AEAD with
//! nonce = iv XOR seq and the inner content type (5.2-5.4), the traffic
//! keys and KeyUpdate (7.1-7.3), the post-handshake messages a peer may
//! still send (4.6) and alerts (6).
//!
//! It is sans-IO: records are sealed and opened in place in buffers the
//! caller owns, and nothing allocates per record.

mod alert;
mod error;
mod keys;
mod post_handshake;
mod record;
mod suite;

#[cfg(test)]
mod interop;

pub use alert::{alert, CLOSE_NOTIFY};
pub use error::Error;
pub use keys::Keys;
pub use post_handshake::{Message, PostHandshake, Sender, KEY_UPDATE_NOT_REQUESTED};
pub use record::{record_len, ContentType, EmptyRecords, MAX_EMPTY_RECORDS};
pub use suite::Suite;

/// A record header: outer content type, legacy version, body length.
pub const HEADER_LEN: usize = 5;
/// Most plaintext one record carries (2^14).
pub const MAX_PLAINTEXT: usize = 1 << 14;
/// Most body (ciphertext) a record may declare: 2^14 + 256 (RFC 8446 5.2).
pub const MAX_BODY: usize = MAX_PLAINTEXT + 256;
/// Every suite here has a 16-byte tag.
pub const TAG_LEN: usize = 16;
/// What seal adds around the plaintext: header, inner content type, 16-byte tag.
pub const SEAL_OVERHEAD: usize = HEADER_LEN + 1 + TAG_LEN;
