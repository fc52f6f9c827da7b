//! The body of one direction, in chunks:
//!
//! ```text
//! sealed:  [ length (^ mask): 2 ][ payload, sealed ][ tag: 16 ][ padding ]
//! none:    [ length (^ mask): 2 ][ payload ][ padding, packets only ]
//! raw:     the payload as it is (zero on a stream)
//! ```
//!
//! as the request's options lay it out ([`Layout`]): the length is masked
//! under chunk masking, and padded under global padding. It counts
//! everything after it, padding included; a chunk whose
//! length is only its tag and padding ends the direction. Chunk `n` is
//! sealed under the nonce `[n as u16, big-endian][iv[2..12]]`, the count
//! wrapping as v2ray's does. The ChaCha20-Poly1305 key is
//! MD5(key) || MD5(MD5(key)), aes-128-gcm takes the key itself.

use std::io;
use std::ops::Range;

use md5::{Digest, Md5};

use super::mask::{Filler, Mask, MAX_PADDING};
use super::security::{Layout, Security};
use crate::aead::{AeadError, Algorithm, Nonce, SessionKey, TAG_LEN};
use crate::codec::Opened;

/// What a chunk puts before its payload: the masked length.
pub const HEADROOM: usize = 2;
/// What it puts after: a tag and the longest padding.
pub const TAILROOM: usize = TAG_LEN + MAX_PADDING;

/// One direction's key and IV.
#[derive(Clone, Copy)]
pub struct BodyKey {
    pub key: [u8; 16],
    pub iv: [u8; 16],
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// The ChaCha20-Poly1305 key of a body key: MD5(key) || MD5(MD5(key)).
fn chacha_key(key: &[u8; 16]) -> [u8; 32] {
    let mut out = [0; 32];
    let first: [u8; 16] = Md5::digest(key).into();
    out[..16].copy_from_slice(&first);
    out[16..].copy_from_slice(&Md5::digest(first));
    out
}

/// The cipher of one direction, and its chunk count.
struct ChunkCipher {
    key: SessionKey,
    nonce: [u8; 12],
    count: u16,
}

impl ChunkCipher {
    fn new(security: Security, body: &BodyKey) -> Result<Option<Self>, AeadError> {
        let key = match security {
            Security::Aes128Gcm => SessionKey::new(Algorithm::Aes128Gcm, &body.key)?,
            Security::ChaCha20Poly1305 => {
                SessionKey::new(Algorithm::ChaCha20Poly1305, &chacha_key(&body.key))?
            }
            Security::None | Security::Zero => return Ok(None),
        };
        let mut nonce = [0; 12];
        nonce.copy_from_slice(&body.iv[..12]);
        Ok(Some(Self {
            key,
            nonce,
            count: 0,
        }))
    }

    fn next_nonce(&mut self) -> Nonce {
        self.nonce[..2].copy_from_slice(&self.count.to_be_bytes());
        self.count = self.count.wrapping_add(1);
        Nonce::new(self.nonce)
    }
}

/// Seals one direction's chunks in place.
pub struct BodySealer {
    layout: Layout,
    cipher: Option<ChunkCipher>,
    mask: Mask,
    filler: Filler,
}

impl BodySealer {
    /// `packets` for a UDP flow's body; `padding_seed` seeds the padding
    /// bytes.
    pub fn new(
        security: Security,
        packets: bool,
        body: &BodyKey,
        padding_seed: &[u8; 32],
    ) -> io::Result<Self> {
        Self::with_layout(security, security.layout(packets), body, padding_seed)
    }

    /// As [`BodySealer::new`], laid out as a request's options say.
    pub fn with_layout(
        security: Security,
        layout: Layout,
        body: &BodyKey,
        padding_seed: &[u8; 32],
    ) -> io::Result<Self> {
        Ok(Self {
            layout,
            cipher: ChunkCipher::new(security, body)?,
            mask: Mask::new(&body.iv),
            filler: Filler::new(padding_seed),
        })
    }

    /// Seals the `len` bytes at `buf[HEADROOM..HEADROOM + len]` into one
    /// chunk where they lie; returns the chunk's range of `buf`. `len` is
    /// at most what a 16-bit length can carry with the tag and padding.
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        let too_long = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "vmess: a chunk too long to seal",
            )
        };
        if !self.layout.chunked {
            return Ok(HEADROOM..HEADROOM + len);
        }
        let padding = if self.layout.padded {
            self.mask.padding_len()
        } else {
            0
        };
        let tag = if self.cipher.is_some() { TAG_LEN } else { 0 };
        let end = HEADROOM + len + tag + padding;
        let size = u16::try_from(end - HEADROOM).map_err(|_| too_long())?;
        let chunk = buf.get_mut(..end).ok_or(AeadError::BufferTooSmall)?;
        let mask = if self.layout.masked {
            self.mask.length_mask()
        } else {
            0
        };
        chunk[..HEADROOM].copy_from_slice(&(size ^ mask).to_be_bytes());
        let (sealed, padding) = chunk[HEADROOM..].split_at_mut(len + tag);
        if let Some(cipher) = &mut self.cipher {
            let nonce = cipher.next_nonce();
            cipher.key.seal_in_place(&nonce, &[], sealed)?;
        }
        self.filler.fill(padding);
        Ok(0..end)
    }
}

/// Opens one direction's chunks in place, split anywhere across reads.
///
/// A masked chunk of a stream is handed out as its bytes arrive: nothing
/// authenticates it, and servers send them as long as a 16-bit length
/// allows (sing-box does under `none`), more than a client buffer holds.
/// A sealed chunk, and any chunk of packets, is opened whole.
pub struct BodyOpener {
    layout: Layout,
    /// Masked chunks may be handed out in pieces.
    in_pieces: bool,
    cipher: Option<ChunkCipher>,
    mask: Mask,
    /// The chunk at the front, once its length is read: what follows the
    /// length, and how much of that is padding.
    pending: Option<(usize, usize)>,
    /// What is left of a masked chunk whose start was handed out.
    left: usize,
    /// The chunk last opened was empty: the sender's end of stream.
    ended: bool,
}

impl BodyOpener {
    pub fn new(security: Security, packets: bool, body: &BodyKey) -> io::Result<Self> {
        Self::with_layout(security, security.layout(packets), body)
    }

    /// As [`BodyOpener::new`], laid out as a request's options say.
    pub fn with_layout(security: Security, layout: Layout, body: &BodyKey) -> io::Result<Self> {
        let cipher = ChunkCipher::new(security, body)?;
        Ok(Self {
            layout,
            in_pieces: layout.chunked && !layout.packets && cipher.is_none(),
            cipher,
            mask: Mask::new(&body.iv),
            pending: None,
            left: 0,
            ended: false,
        })
    }

    /// Whether the last chunk opened was empty, which ends the sender's
    /// stream (v2ray and sing-box read it as the end of the upload or
    /// download).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Opens the chunk at the start of `buf`. The length is read from the
    /// first two bytes without changing them, so bytes given back with
    /// NeedMore are the same next time. An error is final.
    pub fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        if !self.layout.chunked {
            return Ok(match buf.len() {
                0 => Opened::NeedMore { needed: 1 },
                n => Opened::Frame {
                    consumed: n,
                    payload: 0..n,
                },
            });
        }
        if self.left > 0 {
            let n = self.left.min(buf.len());
            self.left -= n;
            return Ok(match n {
                0 => Opened::NeedMore { needed: 1 },
                n => Opened::Frame {
                    consumed: n,
                    payload: 0..n,
                },
            });
        }
        let tag = if self.cipher.is_some() { TAG_LEN } else { 0 };
        let (size, padding) = match self.pending {
            Some(pending) => pending,
            None => {
                let Some(&[a, b]) = buf.first_chunk::<HEADROOM>() else {
                    return Ok(Opened::NeedMore { needed: HEADROOM });
                };
                let padding = if self.layout.padded {
                    self.mask.padding_len()
                } else {
                    0
                };
                let mask = if self.layout.masked {
                    self.mask.length_mask()
                } else {
                    0
                };
                let size = usize::from(u16::from_be_bytes([a, b]) ^ mask);
                if size < tag + padding {
                    return Err(invalid("vmess: a chunk shorter than its tag and padding"));
                }
                self.pending = Some((size, padding));
                (size, padding)
            }
        };
        if self.in_pieces && buf.len() < HEADROOM + size {
            // The length and what arrived of the payload; the rest later.
            self.pending = None;
            self.left = HEADROOM + size - buf.len();
            return Ok(Opened::Frame {
                consumed: buf.len(),
                payload: HEADROOM..buf.len(),
            });
        }
        let Some(chunk) = buf.get_mut(..HEADROOM + size) else {
            return Ok(Opened::NeedMore {
                needed: HEADROOM + size,
            });
        };
        let end = HEADROOM + size - padding;
        if let Some(cipher) = &mut self.cipher {
            let nonce = cipher.next_nonce();
            cipher
                .key
                .open_in_place(&nonce, &[], &mut chunk[HEADROOM..end])
                .map_err(|_| {
                    invalid("vmess: a chunk failed authentication (wrong key or corrupt data)")
                })?;
        }
        self.pending = None;
        self.ended = size == tag + padding;
        Ok(Opened::Frame {
            consumed: HEADROOM + size,
            payload: HEADROOM..end - tag,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECURITIES: [Security; 4] = [
        Security::Aes128Gcm,
        Security::ChaCha20Poly1305,
        Security::None,
        Security::Zero,
    ];

    fn body() -> BodyKey {
        BodyKey {
            key: *b"0123456789abcdef",
            iv: *b"fedcba9876543210",
        }
    }

    /// Seals `pieces` as chunks, one after the other into one wire.
    fn seal_all(security: Security, packets: bool, pieces: &[&[u8]]) -> Vec<u8> {
        let mut sealer = BodySealer::new(security, packets, &body(), &[9; 32]).unwrap();
        let mut wire = Vec::new();
        for piece in pieces {
            let mut buf = vec![0u8; HEADROOM + piece.len() + TAILROOM];
            buf[HEADROOM..HEADROOM + piece.len()].copy_from_slice(piece);
            let range = sealer.seal(&mut buf, piece.len()).unwrap();
            wire.extend_from_slice(&buf[range]);
        }
        wire
    }

    /// Opens `wire` handed over `step` bytes at a time, as reads would
    /// deliver it, and returns the payloads.
    fn open_split(security: Security, packets: bool, wire: &[u8], step: usize) -> Vec<Vec<u8>> {
        let mut opener = BodyOpener::new(security, packets, &body()).unwrap();
        let mut held = Vec::new();
        let mut payloads = Vec::new();
        for piece in wire.chunks(step) {
            held.extend_from_slice(piece);
            loop {
                match opener.open(&mut held).unwrap() {
                    Opened::NeedMore { needed } => {
                        assert!(needed > held.len());
                        break;
                    }
                    Opened::Frame { consumed, payload } => {
                        payloads.push(held[payload].to_vec());
                        held.drain(..consumed);
                    }
                }
            }
        }
        assert!(held.is_empty());
        payloads
    }

    #[test]
    fn every_security_round_trips_chunks_split_anywhere() {
        let long: Vec<u8> = (0..5000).map(|i| (i * 13) as u8).collect();
        let pieces: [&[u8]; 4] = [b"hello", b"x", &long, b" world"];
        for security in SECURITIES {
            let wire = seal_all(security, false, &pieces);
            for step in [1, 2, 3, 17, 1000, wire.len()] {
                let got: Vec<u8> = open_split(security, false, &wire, step).concat();
                assert!(got == pieces.concat(), "{security:?} step {step}");
            }
        }
    }

    #[test]
    fn packets_keep_their_boundaries_under_every_security() {
        let pieces: [&[u8]; 3] = [b"one", b"two packets", b"three"];
        for security in SECURITIES {
            let wire = seal_all(security, true, &pieces);
            for step in [1, 5, wire.len()] {
                assert_eq!(
                    open_split(security, true, &wire, step),
                    pieces,
                    "{security:?}"
                );
            }
        }
    }

    /// A masked chunk longer than any client buffer, as sing-box sends
    /// under `none`: its bytes come out as they arrive, and the chunk after
    /// it opens as usual.
    #[test]
    fn a_masked_chunk_of_a_stream_is_handed_out_as_it_arrives() {
        let long = vec![0x42u8; 0xffff];
        let wire = seal_all(Security::None, false, &[&long, b"next"]);
        let mut opener = BodyOpener::new(Security::None, false, &body()).unwrap();
        let mut got = Vec::new();
        let mut largest = 0;
        let mut held = Vec::new();
        for piece in wire.chunks(1000) {
            held.extend_from_slice(piece);
            while !held.is_empty() {
                let Opened::Frame { consumed, payload } = opener.open(&mut held).unwrap() else {
                    break;
                };
                largest = largest.max(consumed);
                got.extend_from_slice(&held[payload]);
                held.drain(..consumed);
            }
            assert!(held.len() < 2, "at most a split length is held back");
        }
        assert!(largest <= 1000, "nothing waits for the whole chunk");
        assert!(got == [&long[..], b"next"].concat());
    }

    #[test]
    fn sealed_chunks_are_padded_and_masked() {
        let chunk: &[u8] = &[0; 100];
        let wire = seal_all(Security::Aes128Gcm, false, &[chunk; 8]);
        // Each chunk is 2 + 100 + 16 and up to 63 bytes of padding; eight
        // of them without any padding would be 944 bytes.
        assert!(wire.len() > 8 * 118, "padding is on");
        assert!(wire.len() <= 8 * (118 + MAX_PADDING));
        let first = u16::from_be_bytes([wire[0], wire[1]]);
        assert!(!(116..116 + 64).contains(&first), "the length is masked");
    }

    #[test]
    fn a_changed_byte_fails_authentication_and_a_short_length_is_refused() {
        for security in [Security::Aes128Gcm, Security::ChaCha20Poly1305] {
            let mut wire = seal_all(security, false, &[b"secret"]);
            wire[5] ^= 1;
            let mut opener = BodyOpener::new(security, false, &body()).unwrap();
            let e = opener.open(&mut wire).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
        // A length of 3 cannot hold a 16-byte tag.
        let mut mask = Mask::new(&body().iv);
        let padding = mask.padding_len();
        let mut wire = ((3 + padding as u16) ^ mask.length_mask())
            .to_be_bytes()
            .to_vec();
        let mut opener = BodyOpener::new(Security::Aes128Gcm, false, &body()).unwrap();
        let e = opener.open(&mut wire).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vmess: a chunk shorter than its tag and padding"
        );
    }

    /// The ChaCha20-Poly1305 key, from another implementation's tests
    /// (swift-nio-proxies): MD5(key) || MD5(MD5(key)).
    #[test]
    fn the_chacha_key_is_md5_of_the_key_and_of_that() {
        let key = crate::vmess::test_support::hex("96b727f438a60a07ca1f554ec689862e");
        assert_eq!(
            chacha_key(&key.try_into().unwrap()).to_vec(),
            crate::vmess::test_support::hex(
                "80c2c504eca628a44855d24e6a9478841d87e34a09027344ebf659d22fb2b88b"
            )
        );
    }
}
