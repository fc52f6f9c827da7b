//! Salamander obfuscation (PROTOCOL.md, "Salamander"): every QUIC packet
//! travels as an 8-byte random salt and the packet XORed with
//! BLAKE2b-256(key + salt). [`Salamander`] is the transform, sans-IO;
//! [`SalamanderSocket`] wraps the UDP socket quinn drives with it.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use rand::RngCore;

/// The salt in front of every packet.
pub const SALT_LEN: usize = 8;

/// The transform of one pre-shared key.
#[derive(Clone)]
pub struct Salamander {
    key: Arc<[u8]>,
}

impl Salamander {
    pub fn new(key: &[u8]) -> Salamander {
        Salamander { key: key.into() }
    }

    fn mask(&self, salt: &[u8]) -> [u8; 32] {
        let mut hash = Blake2b::<U32>::new();
        hash.update(&self.key);
        hash.update(salt);
        hash.finalize().into()
    }

    /// Writes `salt` and `packet`, masked, to `out`, which must hold
    /// `SALT_LEN + packet.len()` bytes.
    pub fn obfuscate(&self, salt: [u8; SALT_LEN], packet: &[u8], out: &mut [u8]) {
        let mask = self.mask(&salt);
        out[..SALT_LEN].copy_from_slice(&salt);
        for (i, (o, p)) in out[SALT_LEN..].iter_mut().zip(packet).enumerate() {
            *o = p ^ mask[i % 32];
        }
    }

    /// Unmasks `datagram` in place and moves the packet to its start:
    /// the packet's length, or `None` for a datagram too short to hold a
    /// salt and a byte.
    pub fn deobfuscate(&self, datagram: &mut [u8]) -> Option<usize> {
        if datagram.len() <= SALT_LEN {
            return None;
        }
        let mask = self.mask(&datagram[..SALT_LEN]);
        let len = datagram.len() - SALT_LEN;
        for i in 0..len {
            datagram[i] = datagram[i + SALT_LEN] ^ mask[i % 32];
        }
        Some(len)
    }
}

/// The UDP socket quinn drives, obfuscated. It sends one packet a call
/// (no GSO: each packet takes its own salt and grows by it), and unmasks
/// what arrives in place, GRO batches included.
pub struct SalamanderSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    salamander: Salamander,
    /// The masked packet being sent, reused by every send.
    scratch: Mutex<Vec<u8>>,
}

impl SalamanderSocket {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, salamander: Salamander) -> SalamanderSocket {
        SalamanderSocket {
            inner,
            salamander,
            scratch: Mutex::new(Vec::with_capacity(1500)),
        }
    }
}

impl fmt::Debug for SalamanderSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SalamanderSocket")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl AsyncUdpSocket for SalamanderSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let mut salt = [0u8; SALT_LEN];
        rand::rng().fill_bytes(&mut salt);
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        scratch.resize(SALT_LEN + transmit.contents.len(), 0);
        self.salamander
            .obfuscate(salt, transmit.contents, &mut scratch);
        self.inner.try_send(&Transmit {
            destination: transmit.destination,
            ecn: transmit.ecn,
            contents: &scratch,
            segment_size: None,
            src_ip: transmit.src_ip,
        })
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            let count = match self.inner.poll_recv(cx, bufs, meta) {
                Poll::Ready(Ok(count)) => count,
                other => return other,
            };
            let mut kept = 0;
            for i in 0..count {
                let m = meta[i];
                let buf = &mut bufs[i][..m.len];
                // A GRO batch: packets at every `stride`, each unmasked and
                // moved down so they sit at `stride - SALT_LEN`.
                let stride = m.stride.max(1);
                let mut out = 0;
                let mut at = 0;
                let mut new_stride = 0;
                while at < m.len {
                    let end = (at + stride).min(m.len);
                    if let Some(len) = self.salamander.deobfuscate(&mut buf[at..end]) {
                        buf.copy_within(at..at + len, out);
                        out += len;
                        new_stride = new_stride.max(len);
                    }
                    at = end;
                }
                if out == 0 {
                    continue;
                }
                meta[i].len = out;
                meta[i].stride = new_stride;
                if kept != i {
                    meta[kept] = meta[i];
                    let (head, tail) = bufs.split_at_mut(i);
                    head[kept][..out].copy_from_slice(&tail[0][..out]);
                }
                kept += 1;
            }
            if kept > 0 {
                return Poll::Ready(Ok(kept));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_round_trips_and_the_mask_depends_on_key_and_salt() {
        let s = Salamander::new(b"cry me a river");
        let packet: Vec<u8> = (0..100u8).collect();
        let mut wire = vec![0u8; SALT_LEN + packet.len()];
        s.obfuscate([1; 8], &packet, &mut wire);
        assert_eq!(&wire[..SALT_LEN], &[1; 8]);
        assert_ne!(&wire[SALT_LEN..], &packet[..]);
        let mut other = vec![0u8; wire.len()];
        s.obfuscate([2; 8], &packet, &mut other);
        assert_ne!(&other[SALT_LEN..], &wire[SALT_LEN..]);
        let mut back = wire.clone();
        let len = s.deobfuscate(&mut back).unwrap();
        assert_eq!(&back[..len], &packet[..]);
        let mut wrong = wire.clone();
        let len = Salamander::new(b"another").deobfuscate(&mut wrong).unwrap();
        assert_ne!(&wrong[..len], &packet[..]);
        assert_eq!(s.deobfuscate(&mut [0u8; SALT_LEN]), None);
    }

    #[test]
    fn the_mask_is_blake2b_256_of_key_then_salt() {
        // The first mask byte XORs the first packet byte: a zero packet
        // shows the mask itself.
        let s = Salamander::new(b"key");
        let mut wire = [0u8; SALT_LEN + 32];
        s.obfuscate(*b"saltsalt", &[0u8; 32], &mut wire);
        let mut hash = Blake2b::<U32>::new();
        hash.update(b"keysaltsalt");
        let expected: [u8; 32] = hash.finalize().into();
        assert_eq!(&wire[SALT_LEN..], &expected[..]);
    }
}
