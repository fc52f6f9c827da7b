//! The keys of both directions of one request: the client's body key and
//! IV as drawn, the server's the first 16 bytes of their SHA-256.

use ring::digest::{digest, Context, SHA256};

use std::io;

use super::body::{BodyKey, BodyOpener, BodySealer};
use super::header::Entropy;
use super::security::{Layout, Security};

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

/// What seeds the padding of a server's chunks.
const SERVER_PADDING: &[u8] = b"etemenanki vmess server padding";

impl Session {
    /// A client's session, from the random bytes it drew.
    pub fn new(security: Security, entropy: &Entropy) -> Self {
        let request = BodyKey {
            key: entropy.body_key,
            iv: entropy.body_iv,
        };
        Self::from_request(
            security,
            request,
            entropy.response_auth,
            entropy.padding_seed,
        )
    }

    /// A server's session, from the request header it opened. It draws
    /// nothing: the padding bytes it sends come from a hash of the response
    /// keys, which the padding (in clear) does not reveal.
    pub fn for_server(security: Security, request: BodyKey, response_auth: u8) -> Self {
        let mut session = Self::from_request(security, request, response_auth, [0; 32]);
        let mut seed = Context::new(&SHA256);
        seed.update(SERVER_PADDING);
        seed.update(&session.response.key);
        seed.update(&session.response.iv);
        session.padding_seed.copy_from_slice(seed.finish().as_ref());
        session
    }

    /// A server's halves of the body under `layout`: its chunks sealed
    /// with the response keys, the client's opened with the request's.
    pub(super) fn server_body(&self, layout: Layout) -> io::Result<(BodySealer, BodyOpener)> {
        Ok((
            BodySealer::with_layout(self.security, layout, &self.response, &self.padding_seed)?,
            BodyOpener::with_layout(self.security, layout, &self.request)?,
        ))
    }

    fn from_request(
        security: Security,
        request: BodyKey,
        response_auth: u8,
        padding_seed: [u8; 32],
    ) -> Self {
        Self {
            security,
            response: BodyKey {
                key: first_16_of_sha256(&request.key),
                iv: first_16_of_sha256(&request.iv),
            },
            request,
            response_auth,
            padding_seed,
        }
    }
}
