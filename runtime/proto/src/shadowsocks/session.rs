//! The two directions of a Shadowsocks AEAD stream, the same at either end:
//! what we send starts with our salt, what we receive with the peer's, and
//! chunks follow under the session key of that salt. The client codec is
//! built from them, and a server is built from the same two.

use std::io;
use std::ops::Range;

use super::{random_salt, MAX_SALT_LEN};
use crate::aead::{self, ChunkOpener, ChunkSealer, MasterKey};
use crate::codec::Opened;

/// What we send: our salt, then chunks sealed in place.
pub struct Outgoing {
    salt: [u8; MAX_SALT_LEN],
    salt_len: usize,
    sealer: ChunkSealer,
}

impl Outgoing {
    /// Under a fresh random salt.
    pub fn random(master: &MasterKey) -> io::Result<Outgoing> {
        let mut salt = [0; MAX_SALT_LEN];
        random_salt(&mut salt[..master.salt_len()])?;
        Outgoing::with_salt(master, &salt[..master.salt_len()])
    }

    /// Under `salt`, which must be as long as the method's key.
    pub fn with_salt(master: &MasterKey, salt: &[u8]) -> io::Result<Outgoing> {
        if salt.len() != master.salt_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "shadowsocks: the salt's length does not match the method",
            ));
        }
        let mut own = [0; MAX_SALT_LEN];
        own[..salt.len()].copy_from_slice(salt);
        Ok(Outgoing {
            salt: own,
            salt_len: salt.len(),
            sealer: ChunkSealer::new(master.session_key(salt)?),
        })
    }

    /// The salt to send before the first chunk.
    pub fn salt(&self) -> &[u8] {
        &self.salt[..self.salt_len]
    }

    /// Seals the `len` bytes at `buf[aead::RESERVE..]` into one chunk where
    /// they lie; returns the range of `buf` the chunk occupies.
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        Ok(0..self.sealer.seal_in_place(buf, len)?)
    }
}

/// What we receive: the peer's salt, then chunks opened in place.
pub struct Incoming {
    master: MasterKey,
    /// Once the salt is in, the session key's opener.
    opener: Option<ChunkOpener>,
}

impl Incoming {
    pub fn new(master: MasterKey) -> Incoming {
        Incoming {
            master,
            opener: None,
        }
    }

    /// Past the peer's salt, whose chunks `opener` has begun to open.
    pub fn resumed(master: MasterKey, opener: ChunkOpener) -> Incoming {
        Incoming {
            master,
            opener: Some(opener),
        }
    }

    /// Opens what starts `buf`: the salt, a frame with no payload; then one
    /// chunk a call. An error is final.
    pub fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        let Some(opener) = &mut self.opener else {
            let salt_len = self.master.salt_len();
            let Some(salt) = buf.get(..salt_len) else {
                return Ok(Opened::NeedMore { needed: salt_len });
            };
            self.opener = Some(ChunkOpener::new(self.master.session_key(salt)?));
            return Ok(Opened::Frame {
                consumed: salt_len,
                payload: salt_len..salt_len,
            });
        };
        Ok(match opener.open(buf)? {
            aead::Opened::NeedMore { needed } => Opened::NeedMore { needed },
            aead::Opened::Chunk { consumed, payload } => Opened::Frame { consumed, payload },
        })
    }
}
