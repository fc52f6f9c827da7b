//! The records of a Shadowsocks 2022 stream after its headers, the same at
//! either end: each `[length] [payload]` pair sealed under the session key
//! of its direction's salt, the nonce counting every record, headers
//! included.

use std::io;
use std::ops::Range;

use super::{Ss2022Error, MAX_PAYLOAD};
use crate::aead::{Nonce, SessionKey, TAG_LEN};
use crate::codec::Opened;

/// A sealed length: two bytes and a tag.
pub const LENGTH_RECORD: usize = 2 + TAG_LEN;

/// One direction's key and nonce.
pub struct Sealed {
    key: SessionKey,
    nonce: Nonce,
}

impl Sealed {
    pub fn new(key: SessionKey) -> Sealed {
        Sealed {
            key,
            nonce: Nonce::ZERO,
        }
    }

    /// Seals `record`, its last TAG_LEN bytes the tag's room.
    pub fn seal(&mut self, record: &mut [u8]) -> io::Result<()> {
        self.key.seal_in_place(&self.nonce, &[], record)?;
        self.nonce.increment();
        Ok(())
    }

    /// Opens `record` in place; returns its plaintext length.
    pub fn open(&mut self, record: &mut [u8]) -> io::Result<usize> {
        let len = self.key.open_in_place(&self.nonce, &[], record)?;
        self.nonce.increment();
        Ok(len)
    }
}

/// Seals the `len` payload bytes at `buf[LENGTH_RECORD..]` as a length
/// record and a payload record, where they lie; returns the range of `buf`
/// the pair occupies.
pub fn seal_chunk(send: &mut Sealed, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
    if len > MAX_PAYLOAD {
        return Err(Ss2022Error::PayloadTooLong.into());
    }
    let end = LENGTH_RECORD + len + TAG_LEN;
    let chunk = buf.get_mut(..end).ok_or(Ss2022Error::BufferTooSmall)?;
    let (length, payload) = chunk.split_at_mut(LENGTH_RECORD);
    // len <= 0xFFFF.
    length[..2].copy_from_slice(&(len as u16).to_be_bytes());
    send.seal(length)?;
    send.seal(payload)?;
    Ok(0..end)
}

/// What we receive after the headers: one chunk a call, opened in place.
pub struct Chunks {
    sealed: Sealed,
    /// A payload record whose length is known, starting `at` bytes into
    /// what the caller presents: after a length record, or right after the
    /// response header, which holds the first length.
    pending: Option<(usize, usize)>,
}

impl Chunks {
    /// Chunks that start with a length record.
    pub fn new(sealed: Sealed) -> Chunks {
        Chunks {
            sealed,
            pending: None,
        }
    }

    /// Chunks whose first payload record, `first` bytes long, comes at once.
    pub fn after_header(sealed: Sealed, first: usize) -> Chunks {
        Chunks {
            sealed,
            pending: Some((0, first)),
        }
    }

    /// Opens the chunk at the start of `buf`; the length record is opened
    /// from a copy, so bytes given back with NeedMore are unchanged. An
    /// error is final.
    pub fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        let (at, len) = match self.pending {
            Some(known) => known,
            None => {
                let Some(record) = buf.first_chunk::<LENGTH_RECORD>() else {
                    return Ok(Opened::NeedMore {
                        needed: LENGTH_RECORD,
                    });
                };
                let mut record = *record;
                self.sealed.open(&mut record)?;
                let len = usize::from(u16::from_be_bytes([record[0], record[1]]));
                self.pending = Some((LENGTH_RECORD, len));
                (LENGTH_RECORD, len)
            }
        };
        let end = at + len + TAG_LEN;
        let Some(chunk) = buf.get_mut(at..end) else {
            return Ok(Opened::NeedMore { needed: end });
        };
        self.sealed.open(chunk)?;
        self.pending = None;
        Ok(Opened::Frame {
            consumed: end,
            payload: at..at + len,
        })
    }
}
