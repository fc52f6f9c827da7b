//! The response header the server sends before its first chunk, sealed
//! with AES-128-GCM under keys and nonces the KDF derives from the
//! response body key and IV, without associated data:
//!
//! ```text
//! [ length: 2, sealed ][ tag: 16 ][ header, sealed ][ tag: 16 ]
//! header: [ response auth: 1 ][ options: 1 ][ command: 1 ][ command length: 1 ][ command ]
//! ```
//!
//! The response auth must be the byte the request drew: it proves the
//! answer is to this request. A command (v2ray's dynamic port) is skipped;
//! a server ([`seal_header`]) sends none, and no options.

use std::io;

use super::body::BodyKey;
use super::kdf::{
    kdf12, kdf16, RESPONSE_KEY, RESPONSE_LEN_KEY, RESPONSE_LEN_NONCE, RESPONSE_NONCE,
};
use crate::aead::{AeadError, Algorithm, Nonce, SessionKey, TAG_LEN};
use crate::codec::Opened;

/// The sealed length record.
const LENGTH: usize = 2 + TAG_LEN;
/// The shortest and longest header in clear.
const MIN: usize = 4;
const MAX: usize = 4 + 255;

/// The header a server sends: the length record and a header of MIN
/// bytes.
pub const SEALED_LEN: usize = LENGTH + MIN + TAG_LEN;

/// The response header a server sends for a request whose response body
/// key is `response` and whose response auth is `auth`.
pub fn seal_header(response: &BodyKey, auth: u8) -> Result<[u8; SEALED_LEN], AeadError> {
    let mut sealed = [0u8; SEALED_LEN];
    let (length, header) = sealed.split_at_mut(LENGTH);
    length[..2].copy_from_slice(&(MIN as u16).to_be_bytes());
    SessionKey::new(
        Algorithm::Aes128Gcm,
        &kdf16(&response.key, [RESPONSE_LEN_KEY]),
    )?
    .seal_in_place(
        &Nonce::new(kdf12(&response.iv, [RESPONSE_LEN_NONCE])),
        &[],
        length,
    )?;
    header[0] = auth;
    SessionKey::new(Algorithm::Aes128Gcm, &kdf16(&response.key, [RESPONSE_KEY]))?.seal_in_place(
        &Nonce::new(kdf12(&response.iv, [RESPONSE_NONCE])),
        &[],
        header,
    )?;
    Ok(sealed)
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

pub struct ResponseOpener {
    len_key: SessionKey,
    len_nonce: Nonce,
    key: SessionKey,
    nonce: Nonce,
    auth: u8,
    /// The header's length, once its record is opened.
    pending: Option<usize>,
}

impl ResponseOpener {
    pub fn new(response: &BodyKey, auth: u8) -> io::Result<Self> {
        let key = |path| SessionKey::new(Algorithm::Aes128Gcm, &kdf16(&response.key, [path]));
        Ok(Self {
            len_key: key(RESPONSE_LEN_KEY)?,
            len_nonce: Nonce::new(kdf12(&response.iv, [RESPONSE_LEN_NONCE])),
            key: key(RESPONSE_KEY)?,
            nonce: Nonce::new(kdf12(&response.iv, [RESPONSE_NONCE])),
            auth,
            pending: None,
        })
    }

    /// Opens the header at the start of `buf`: a frame without payload
    /// once it is whole and answers our request. The length record is
    /// opened from a copy, so bytes given back with NeedMore are unchanged.
    pub fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        let unauthentic = || {
            invalid("vmess: the response header failed authentication (wrong id or corrupt data)")
        };
        let len = match self.pending {
            Some(len) => len,
            None => {
                let Some(record) = buf.first_chunk::<LENGTH>() else {
                    return Ok(Opened::NeedMore { needed: LENGTH });
                };
                let mut record = *record;
                self.len_key
                    .open_in_place(&self.len_nonce, &[], &mut record)
                    .map_err(|_| unauthentic())?;
                let len = usize::from(u16::from_be_bytes([record[0], record[1]]));
                if !(MIN..=MAX).contains(&len) {
                    return Err(invalid("vmess: a response header length out of range"));
                }
                self.pending = Some(len);
                len
            }
        };
        let end = LENGTH + len + TAG_LEN;
        let Some(sealed) = buf.get_mut(LENGTH..end) else {
            return Ok(Opened::NeedMore { needed: end });
        };
        self.key
            .open_in_place(&self.nonce, &[], sealed)
            .map_err(|_| unauthentic())?;
        if sealed[0] != self.auth {
            return Err(invalid(
                "vmess: the response header answers another request",
            ));
        }
        Ok(Opened::Frame {
            consumed: end,
            payload: end..end,
        })
    }
}
