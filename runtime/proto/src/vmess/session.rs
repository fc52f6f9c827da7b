//! The keys of both directions of one request: the client's body key and
//! IV as drawn, the server's the first 16 bytes of their SHA-256.

use ring::digest::{digest, SHA256};

use super::body::BodyKey;
use super::header::Entropy;
use super::security::Security;

pub struct Session {
    pub security: Security,
    pub request: BodyKey,
    pub response: BodyKey,
    /// The byte the server's response header must echo.
    pub response_auth: u8,
    pub padding_seed: [u8; 32],
}

fn first_16_of_sha256(bytes: &[u8; 16]) -> [u8; 16] {
    let mut out = [0; 16];
    out.copy_from_slice(&digest(&SHA256, bytes).as_ref()[..16]);
    out
}

impl Session {
    pub fn new(security: Security, entropy: &Entropy) -> Self {
        Self {
            security,
            request: BodyKey {
                key: entropy.body_key,
                iv: entropy.body_iv,
            },
            response: BodyKey {
                key: first_16_of_sha256(&entropy.body_key),
                iv: first_16_of_sha256(&entropy.body_iv),
            },
            response_auth: entropy.response_auth,
            padding_seed: entropy.padding_seed,
        }
    }
}
