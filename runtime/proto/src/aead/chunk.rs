//! The Shadowsocks AEAD chunk framing, the same for client and server.
//!
//! After the salt, each direction of a stream is a run of chunks:
//!
//! ```text
//! [ length: 2 bytes, big-endian, sealed ][ tag ][ payload, sealed ][ tag ]
//! ```
//!
//! with a payload of at most [`MAX_PAYLOAD`] bytes and the nonce counting up
//! after every record sealed or opened, so a chunk uses two nonces.
//!
//! Both ends work in the caller's buffers and never allocate. A sealer seals
//! a payload the runtime read into `buf[RESERVE..]` where it lies, writing
//! the length record in front of it and the tag after it; an opener opens
//! chunks where they arrived and says where the payload is.

use std::ops::Range;

use super::{AeadError, Nonce, SessionKey, TAG_LEN};

/// The longest payload one chunk carries.
pub const MAX_PAYLOAD: usize = 0x3FFF;
/// What a chunk puts before its payload: the sealed 2-byte length and its
/// tag. A runtime reads a payload into `buf[RESERVE..]` and seals it there.
pub const RESERVE: usize = 2 + TAG_LEN;
/// What a chunk adds to its payload: the length record and the payload's tag.
pub const RECORD_OVERHEAD: usize = RESERVE + TAG_LEN;
/// The longest chunk on the wire.
pub const MAX_CHUNK_LEN: usize = MAX_PAYLOAD + RECORD_OVERHEAD;

/// How many bytes `payload_len` bytes of payload take on the wire as chunks
/// of at most MAX_PAYLOAD (none for an empty payload).
pub const fn sealed_len(payload_len: usize) -> usize {
    payload_len + payload_len.div_ceil(MAX_PAYLOAD) * RECORD_OVERHEAD
}

/// Seals the chunks of one direction under one session key.
pub struct ChunkSealer {
    key: SessionKey,
    nonce: Nonce,
}

impl ChunkSealer {
    /// A sealer whose first chunk takes nonce zero, as each new session key
    /// does.
    pub fn new(key: SessionKey) -> Self {
        Self {
            key,
            nonce: Nonce::ZERO,
        }
    }

    /// Seals the `payload_len` bytes at `buf[RESERVE..RESERVE + payload_len]`
    /// into one chunk where they lie: the length record goes over
    /// `buf[..RESERVE]` and the tag after the payload. Returns the chunk's
    /// length, `RECORD_OVERHEAD + payload_len`, from the start of `buf`.
    /// An empty payload seals nothing and returns 0, since a peer may take
    /// an empty chunk for the end of the stream.
    pub fn seal_in_place(
        &mut self,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<usize, AeadError> {
        if payload_len == 0 {
            return Ok(0);
        }
        if payload_len > MAX_PAYLOAD {
            return Err(AeadError::PayloadTooLong);
        }
        let chunk_len = payload_len + RECORD_OVERHEAD;
        let chunk = buf.get_mut(..chunk_len).ok_or(AeadError::BufferTooSmall)?;
        let (record, payload) = chunk.split_at_mut(RESERVE);
        // payload_len <= 0x3FFF, so it fits two bytes.
        record[..2].copy_from_slice(&(payload_len as u16).to_be_bytes());
        self.key.seal_in_place(&self.nonce, &[], record)?;
        self.nonce.increment();
        self.key.seal_in_place(&self.nonce, &[], payload)?;
        self.nonce.increment();
        Ok(chunk_len)
    }

    /// Seals as much of `payload` as fits into `out` as whole chunks of at
    /// most MAX_PAYLOAD, copying it there. Returns how many payload bytes
    /// were taken and how many bytes of `out` were written; (0, 0) when
    /// `out` cannot hold a chunk of even one byte, so the caller flushes
    /// first.
    pub fn seal(&mut self, payload: &[u8], out: &mut [u8]) -> Result<(usize, usize), AeadError> {
        let (mut taken, mut written) = (0, 0);
        while taken < payload.len() {
            let room = out.len() - written;
            if room <= RECORD_OVERHEAD {
                break;
            }
            let n = (payload.len() - taken)
                .min(MAX_PAYLOAD)
                .min(room - RECORD_OVERHEAD);
            let chunk = &mut out[written..written + n + RECORD_OVERHEAD];
            chunk[RESERVE..RESERVE + n].copy_from_slice(&payload[taken..taken + n]);
            written += self.seal_in_place(chunk, n)?;
            taken += n;
        }
        Ok((taken, written))
    }
}

/// What [`ChunkOpener::open`] found at the start of the bytes it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// No whole chunk yet. `needed` is how long the bytes must be, from the
    /// same start, before the next call can make progress: RESERVE until the
    /// length is known, then the whole chunk. Nothing was consumed; present
    /// the same bytes again with more after them.
    NeedMore { needed: usize },
    /// One chunk, opened in place: `buf[payload]` is its plaintext, and the
    /// first `consumed` bytes are done with.
    Chunk {
        consumed: usize,
        payload: Range<usize>,
    },
}

/// Opens the chunks of one direction under one session key, from bytes as
/// they arrive: split anywhere, or several chunks in one read.
pub struct ChunkOpener {
    key: SessionKey,
    nonce: Nonce,
    /// The payload length of the chunk at the front, once its length record
    /// has been opened.
    pending: Option<usize>,
}

impl ChunkOpener {
    pub fn new(key: SessionKey) -> Self {
        Self {
            key,
            nonce: Nonce::ZERO,
            pending: None,
        }
    }

    /// Opens the chunk at the start of `buf`, the bytes received and not yet
    /// consumed. Call it again on `buf[consumed..]` for the chunks after it.
    /// The length record is opened from a copy, so bytes given back with
    /// NeedMore are unchanged. An error is final: the stream is unusable.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Opened, AeadError> {
        let payload_len = match self.pending {
            Some(len) => len,
            None => {
                let Some(record) = buf.first_chunk::<RESERVE>() else {
                    return Ok(Opened::NeedMore { needed: RESERVE });
                };
                let mut record = *record;
                self.key.open_in_place(&self.nonce, &[], &mut record)?;
                let len = usize::from(u16::from_be_bytes([record[0], record[1]]));
                if len > MAX_PAYLOAD {
                    return Err(AeadError::LengthOverLimit);
                }
                self.nonce.increment();
                self.pending = Some(len);
                len
            }
        };
        let chunk_len = RESERVE + payload_len + TAG_LEN;
        let Some(sealed) = buf.get_mut(RESERVE..chunk_len) else {
            return Ok(Opened::NeedMore { needed: chunk_len });
        };
        self.key.open_in_place(&self.nonce, &[], sealed)?;
        self.nonce.increment();
        self.pending = None;
        Ok(Opened::Chunk {
            consumed: chunk_len,
            payload: RESERVE..RESERVE + payload_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::Algorithm;

    const ALGORITHMS: [Algorithm; 3] = [
        Algorithm::Aes128Gcm,
        Algorithm::Aes256Gcm,
        Algorithm::ChaCha20Poly1305,
    ];

    fn key(algorithm: Algorithm) -> SessionKey {
        let bytes: Vec<u8> = (0..algorithm.key_len() as u8).collect();
        SessionKey::new(algorithm, &bytes).unwrap()
    }

    fn pair(algorithm: Algorithm) -> (ChunkSealer, ChunkOpener) {
        (
            ChunkSealer::new(key(algorithm)),
            ChunkOpener::new(key(algorithm)),
        )
    }

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    /// Opens everything in `wire`, fed as a receiver would be: bytes arrive
    /// `split` at a time into a buffer of unconsumed bytes.
    fn open_all(opener: &mut ChunkOpener, wire: &[u8], split: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut arrived = 0;
        while arrived < wire.len() {
            let more = split.min(wire.len() - arrived);
            pending.extend_from_slice(&wire[arrived..arrived + more]);
            arrived += more;
            let mut at = 0;
            loop {
                match opener.open(&mut pending[at..]).unwrap() {
                    Opened::Chunk { consumed, payload } => {
                        out.extend_from_slice(&pending[at..][payload]);
                        at += consumed;
                    }
                    Opened::NeedMore { needed } => {
                        assert!(needed > pending.len() - at);
                        break;
                    }
                }
            }
            pending.drain(..at);
        }
        assert!(pending.is_empty(), "{} bytes left unopened", pending.len());
        out
    }

    #[test]
    fn the_constants_are_those_of_the_wire_format() {
        assert_eq!(RESERVE, 18);
        assert_eq!(RECORD_OVERHEAD, 34);
        assert_eq!(MAX_CHUNK_LEN, 0x3FFF + 34);
        assert_eq!(sealed_len(0), 0);
        assert_eq!(sealed_len(1), 35);
        assert_eq!(sealed_len(MAX_PAYLOAD), MAX_CHUNK_LEN);
        assert_eq!(sealed_len(MAX_PAYLOAD + 1), MAX_CHUNK_LEN + 35);
    }

    #[test]
    fn a_chunk_sealed_in_place_opens_split_at_every_byte_boundary() {
        for algorithm in ALGORITHMS {
            for len in [1, 2, 17, 1400] {
                let (mut sealer, _) = pair(algorithm);
                let mut wire = vec![0; RESERVE];
                wire.extend_from_slice(&payload(len));
                wire.extend_from_slice(&[0; TAG_LEN]);
                assert_eq!(
                    sealer.seal_in_place(&mut wire, len),
                    Ok(len + RECORD_OVERHEAD)
                );
                for split in 1..wire.len() {
                    let (_, mut opener) = pair(algorithm);
                    let mut buf = wire.clone();
                    assert_eq!(
                        opener.open(&mut buf[..split]),
                        Ok(Opened::NeedMore {
                            needed: if split < RESERVE { RESERVE } else { wire.len() }
                        }),
                        "{algorithm:?} {len} split at {split}"
                    );
                    assert_eq!(&buf[..split], &wire[..split], "NeedMore changed the bytes");
                    assert_eq!(
                        opener.open(&mut buf),
                        Ok(Opened::Chunk {
                            consumed: wire.len(),
                            payload: RESERVE..RESERVE + len
                        })
                    );
                    assert_eq!(&buf[RESERVE..RESERVE + len], &payload(len)[..]);
                }
            }
        }
    }

    #[test]
    fn a_long_write_seals_into_chunks_that_open_back_whatever_the_split() {
        for algorithm in ALGORITHMS {
            for len in [1, 1400, MAX_PAYLOAD, MAX_PAYLOAD + 1, 3 * MAX_PAYLOAD + 100] {
                let data = payload(len);
                let (mut sealer, _) = pair(algorithm);
                let mut wire = vec![0; sealed_len(len)];
                assert_eq!(sealer.seal(&data, &mut wire), Ok((len, sealed_len(len))));
                for split in [1, 2, 17, 18, 19, 1000, MAX_CHUNK_LEN, wire.len()] {
                    let (_, mut opener) = pair(algorithm);
                    assert!(
                        open_all(&mut opener, &wire, split) == data,
                        "{algorithm:?} {len} /{split}"
                    );
                }
            }
        }
    }

    #[test]
    fn several_chunks_in_one_read_open_one_after_another() {
        let (mut sealer, mut opener) = pair(Algorithm::Aes128Gcm);
        let mut wire = [0; 3 * (RECORD_OVERHEAD + 5)];
        let mut written = 0;
        for text in [b"first", b"secnd", b"third"] {
            written += sealer.seal(text, &mut wire[written..]).unwrap().1;
        }
        assert_eq!(written, wire.len());
        let mut at = 0;
        for text in [b"first", b"secnd", b"third"] {
            let Ok(Opened::Chunk { consumed, payload }) = opener.open(&mut wire[at..]) else {
                panic!("no chunk at {at}");
            };
            assert_eq!(&wire[at..][payload], text);
            at += consumed;
        }
        assert_eq!(
            opener.open(&mut wire[at..]),
            Ok(Opened::NeedMore { needed: RESERVE })
        );
    }

    #[test]
    fn seal_fills_the_room_it_has_and_no_more() {
        let (mut sealer, mut opener) = pair(Algorithm::ChaCha20Poly1305);
        let data = payload(100);
        let mut out = [0; RECORD_OVERHEAD];
        assert_eq!(sealer.seal(&data, &mut out), Ok((0, 0)));
        let mut out = [0; RECORD_OVERHEAD + 40];
        assert_eq!(sealer.seal(&data, &mut out), Ok((40, out.len())));
        assert_eq!(open_all(&mut opener, &out, out.len()), &data[..40]);
        assert_eq!(sealer.seal(&[], &mut out), Ok((0, 0)));
    }

    #[test]
    fn seal_in_place_refuses_what_it_cannot_hold() {
        let (mut sealer, _) = pair(Algorithm::Aes256Gcm);
        let mut buf = vec![0; MAX_CHUNK_LEN + 1];
        assert_eq!(
            sealer.seal_in_place(&mut buf, MAX_PAYLOAD + 1),
            Err(AeadError::PayloadTooLong)
        );
        assert_eq!(
            sealer.seal_in_place(&mut buf[..RECORD_OVERHEAD + 9], 10),
            Err(AeadError::BufferTooSmall)
        );
        assert_eq!(sealer.seal_in_place(&mut buf, 0), Ok(0));
    }

    #[test]
    fn a_flipped_bit_anywhere_in_a_chunk_is_refused() {
        for algorithm in ALGORITHMS {
            let (mut sealer, _) = pair(algorithm);
            let mut wire = vec![0; sealed_len(24)];
            sealer.seal(&payload(24), &mut wire).unwrap();
            for byte in 0..wire.len() {
                for bit in [0x01, 0x80] {
                    let (_, mut opener) = pair(algorithm);
                    let mut buf = wire.clone();
                    buf[byte] ^= bit;
                    assert_eq!(
                        opener.open(&mut buf),
                        Err(AeadError::Unauthentic),
                        "byte {byte}"
                    );
                }
            }
        }
    }

    #[test]
    fn chunks_opened_out_of_order_are_refused() {
        let (mut sealer, mut opener) = pair(Algorithm::Aes128Gcm);
        let mut first = vec![0; sealed_len(3)];
        let mut second = vec![0; sealed_len(3)];
        sealer.seal(b"one", &mut first).unwrap();
        sealer.seal(b"two", &mut second).unwrap();
        assert_eq!(opener.open(&mut second), Err(AeadError::Unauthentic));
    }

    #[test]
    fn a_length_over_0x3fff_is_refused() {
        for algorithm in ALGORITHMS {
            // A peer with the right key that sends a length record of 0x4000.
            let key = key(algorithm);
            let mut record = [0; RESERVE];
            record[..2].copy_from_slice(&0x4000u16.to_be_bytes());
            key.seal_in_place(&Nonce::ZERO, &[], &mut record).unwrap();
            let (_, mut opener) = pair(algorithm);
            assert_eq!(opener.open(&mut record), Err(AeadError::LengthOverLimit));
        }
    }

    #[test]
    fn an_empty_chunk_from_a_peer_opens_to_an_empty_payload() {
        let key = key(Algorithm::Aes128Gcm);
        let mut nonce = Nonce::ZERO;
        let mut wire = [0; RECORD_OVERHEAD];
        key.seal_in_place(&nonce, &[], &mut wire[..RESERVE])
            .unwrap();
        nonce.increment();
        key.seal_in_place(&nonce, &[], &mut wire[RESERVE..])
            .unwrap();
        let (_, mut opener) = pair(Algorithm::Aes128Gcm);
        assert_eq!(
            opener.open(&mut wire),
            Ok(Opened::Chunk {
                consumed: RECORD_OVERHEAD,
                payload: RESERVE..RESERVE
            })
        );
    }

    #[test]
    fn any_bytes_are_refused_or_awaited_without_a_panic() {
        let (_, mut opener) = pair(Algorithm::ChaCha20Poly1305);
        let mut junk: Vec<u8> = (0..=255u8).cycle().take(MAX_CHUNK_LEN + 40).collect();
        for len in [0, 1, RESERVE - 1, RESERVE, junk.len()] {
            let got = opener.open(&mut junk[..len]);
            assert!(matches!(
                got,
                Ok(Opened::NeedMore { .. }) | Err(AeadError::Unauthentic)
            ));
        }
    }

    #[test]
    fn errors_carry_their_io_kind_and_text() {
        let error = std::io::Error::from(AeadError::Unauthentic);
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            error.to_string(),
            "aead: a sealed record failed authentication (wrong key or corrupt data)"
        );
        let error = std::io::Error::from(AeadError::LengthOverLimit);
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(error.to_string(), "shadowsocks: a chunk length over 0x3FFF");
        assert_eq!(
            std::io::Error::from(AeadError::PayloadTooLong).kind(),
            std::io::ErrorKind::InvalidInput
        );
    }
}
