//! VMess, the AEAD variant (alterId 0): on the client the request header
//! sealed at dial, the body securities, chunk masking and global padding,
//! and the response header checked on the first read; TCP as a
//! [`VmessStream`], UDP to one target as a [`VmessDatagram`]. The server
//! core ([`server`]) opens the header and answers with the same codecs.
//!
//! Time and randomness are the caller's: a request takes `now`, the auth
//! id's four bytes and an [`Entropy`], so tests are deterministic.

mod auth_id;
mod body;
mod datagram;
mod header;
mod kdf;
mod mask;
mod replay;
mod response;
mod security;
pub mod server;
mod session;
mod stream;
#[cfg(test)]
mod test_support;

pub use body::BodyKey;
pub use datagram::VmessDatagram;
pub use header::{Command, Entropy, Request, User, HEADER_MAX};
pub use security::{Layout, Security};
pub use session::Session;
pub use stream::VmessStream;
#[cfg(test)]
mod tests;
