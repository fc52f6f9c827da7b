//! The tunnel as smoltcp's network device: an IP packet smoltcp transmits
//! is sealed by boringtun and sent on the tunnel's UDP socket at once; a
//! packet the peer sent is opened into the one inbound slot smoltcp then
//! consumes. Every buffer is allocated once per tunnel.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use boringtun::noise::{Tunn, TunnResult};
use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use tokio::net::UdpSocket;

/// WireGuard's data message overhead: header, counter and tag, plus up to
/// 15 bytes of padding to a multiple of 16.
const SEAL_OVERHEAD: usize = 32 + 16;
/// The smallest buffer boringtun writes a handshake initiation into.
const HANDSHAKE_INIT_LEN: usize = 148;
/// The largest datagram read from the peer (and so the largest packet
/// opened): UDP's own limit, so no datagram is ever cut.
pub(crate) const DATAGRAM: usize = 65_536;

pub(crate) struct Link {
    pub(crate) inbox: Inbox,
    pub(crate) egress: Egress,
    mtu: usize,
}

/// The packet the peer sent, opened, waiting for smoltcp.
pub(crate) struct Inbox {
    pub(crate) buf: Box<[u8]>,
    pub(crate) len: Option<usize>,
}

/// The sending half: boringtun's tunnel state, the socket and the two
/// buffers a packet is sealed through.
pub(crate) struct Egress {
    pub(crate) tunn: Box<Tunn>,
    udp: Arc<UdpSocket>,
    reserved: Option<[u8; 3]>,
    plain: Box<[u8]>,
    sealed: Box<[u8]>,
    /// A sealed packet the socket would not take: smoltcp gets no transmit
    /// token until the driver has sent it.
    blocked: Option<usize>,
    /// The first send error other than a full socket: the driver stops
    /// on it (a refused port is how a dead peer shows).
    pub(crate) failed: Option<io::Error>,
}

impl Link {
    pub(crate) fn new(
        tunn: Tunn,
        udp: Arc<UdpSocket>,
        mtu: u16,
        reserved: Option<[u8; 3]>,
    ) -> Link {
        let mtu = usize::from(mtu);
        Link {
            inbox: Inbox {
                buf: vec![0; DATAGRAM].into_boxed_slice(),
                len: None,
            },
            egress: Egress {
                tunn: Box::new(tunn),
                udp,
                reserved,
                plain: vec![0; mtu].into_boxed_slice(),
                sealed: vec![0; (mtu + SEAL_OVERHEAD).max(HANDSHAKE_INIT_LEN)].into_boxed_slice(),
                blocked: None,
                failed: None,
            },
            mtu,
        }
    }
}

impl Egress {
    /// Whether a sealed packet waits for room in the socket.
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Sends the packet that was waiting, if the socket takes it now.
    pub(crate) fn retry(&mut self) {
        if let Some(len) = self.blocked.take() {
            if !self.put_sealed(len) {
                self.blocked = Some(len);
            }
        }
    }

    /// Seals the packet in `plain[..len]` and sends it.
    fn seal_and_send(&mut self, len: usize) {
        let Egress {
            tunn,
            plain,
            sealed,
            ..
        } = self;
        let sealed_len = match tunn.encapsulate(&plain[..len], sealed) {
            TunnResult::WriteToNetwork(packet) => packet.len(),
            TunnResult::Err(e) => {
                tracing::debug!("wireguard: cannot seal a packet: {e:?}");
                return;
            }
            // Queued inside the tunnel until a handshake completes.
            _ => return,
        };
        if !self.put_sealed(sealed_len) {
            self.blocked = Some(sealed_len);
        }
    }

    /// Sends `sealed[..len]`; false when the socket is full.
    fn put_sealed(&mut self, len: usize) -> bool {
        let Egress {
            udp,
            reserved,
            sealed,
            failed,
            ..
        } = self;
        put(udp, *reserved, &mut sealed[..len], failed)
    }

    /// Runs boringtun's timers: handshake retries, keepalives, rekeys.
    /// `Err` once the tunnel has expired: no handshake completed in time.
    pub(crate) fn timers(&mut self) -> io::Result<()> {
        let Egress {
            tunn,
            udp,
            reserved,
            sealed,
            failed,
            ..
        } = self;
        match tunn.update_timers(sealed) {
            TunnResult::WriteToNetwork(packet) => {
                put(udp, *reserved, packet, failed);
                Ok(())
            }
            TunnResult::Err(boringtun::noise::errors::WireGuardError::ConnectionExpired) => Err(
                io::Error::new(io::ErrorKind::TimedOut, "wireguard: handshake expired"),
            ),
            _ => Ok(()),
        }
    }
}

/// What opening one datagram from the peer gave.
pub(crate) enum Opened {
    /// An IP packet, now in the inbox.
    Packet,
    /// Nothing for smoltcp: a handshake message, a keepalive, or a
    /// datagram that did not authenticate.
    Nothing,
}

impl Link {
    /// Opens `datagram` from the peer at `from`. Handshake answers and the
    /// packets boringtun queued behind a handshake go out at once.
    pub(crate) fn open(&mut self, from: IpAddr, datagram: &mut [u8]) -> Opened {
        let Link { inbox, egress, .. } = self;
        if egress.reserved.is_some() {
            if let Some(header) = datagram.get_mut(1..4) {
                header.fill(0);
            }
        }
        match egress
            .tunn
            .decapsulate(Some(from), datagram, &mut inbox.buf)
        {
            TunnResult::WriteToTunnelV4(packet, _) | TunnResult::WriteToTunnelV6(packet, _) => {
                inbox.len = Some(packet.len());
                Opened::Packet
            }
            TunnResult::WriteToNetwork(packet) => {
                put(&egress.udp, egress.reserved, packet, &mut egress.failed);
                // What boringtun held back for the session, one at a time.
                for _ in 0..MAX_FLUSHED {
                    match egress.tunn.decapsulate(None, &[], &mut inbox.buf) {
                        TunnResult::WriteToNetwork(packet) => {
                            put(&egress.udp, egress.reserved, packet, &mut egress.failed);
                        }
                        _ => break,
                    }
                }
                Opened::Nothing
            }
            TunnResult::Err(e) => {
                tracing::trace!("wireguard: dropping a datagram: {e:?}");
                Opened::Nothing
            }
            TunnResult::Done => Opened::Nothing,
        }
    }
}

/// boringtun holds at most this many packets behind a handshake.
const MAX_FLUSHED: usize = 256;

/// Sends one sealed datagram with the reserved bytes written into its
/// header; false when the socket has no room. Any other error drops it
/// and is kept for the driver.
fn put(
    udp: &UdpSocket,
    reserved: Option<[u8; 3]>,
    packet: &mut [u8],
    failed: &mut Option<io::Error>,
) -> bool {
    if let (Some(bytes), Some(header)) = (reserved, packet.get_mut(1..4)) {
        header.copy_from_slice(&bytes);
    }
    match udp.try_send(packet) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(e) => {
            failed.get_or_insert(e);
            true
        }
    }
}

impl phy::Device for Link {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        if self.inbox.len.is_none() || self.egress.is_blocked() {
            return None;
        }
        Some((
            RxToken {
                inbox: &mut self.inbox,
            },
            TxToken {
                egress: &mut self.egress,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_>> {
        if self.egress.is_blocked() {
            return None;
        }
        Some(TxToken {
            egress: &mut self.egress,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        // WireGuard authenticates every packet: checksums are computed for
        // the peer, and not verified again here.
        caps.checksum.ipv4 = Checksum::Tx;
        caps.checksum.tcp = Checksum::Tx;
        caps.checksum.udp = Checksum::Tx;
        caps
    }
}

pub(crate) struct RxToken<'a> {
    inbox: &'a mut Inbox,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let len = self.inbox.len.take().unwrap_or(0);
        f(&self.inbox.buf[..len])
    }
}

pub(crate) struct TxToken<'a> {
    egress: &'a mut Egress,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // smoltcp never asks for more than the MTU it was given.
        let len = len.min(self.egress.plain.len());
        let result = f(&mut self.egress.plain[..len]);
        self.egress.seal_and_send(len);
        result
    }
}
