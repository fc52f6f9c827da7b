//! SOCKS5 UDP ASSOCIATE: a relay socket that hears only the control
//! connection's client, and a fan-out that routes every packet.

use etemenanki_proto::MAX_DATAGRAM;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use etemenanki_proto::socks::{
    parse_datagram_into, status, write_datagram_header, ExpectedSender, Request,
};
use etemenanki_proto::Address;
use etemenanki_transport::Stream;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::handshake::unspecified;
use super::Shared;
use crate::buffers;
use crate::fanout::FanOut;

/// Room for the longest SOCKS5 UDP header (a 255-byte domain) before a reply.
const HEADROOM: usize = 3 + 1 + 1 + 255 + 2;

/// A reply's buffer: its header's room, then the payload.
const REPLY_BUF: usize = HEADROOM + MAX_DATAGRAM;

pub async fn associate(
    shared: &Shared,
    mut control: Stream,
    peer: SocketAddr,
    request: Request,
) -> io::Result<()> {
    let relay_ip = control.local_addr()?.ip();
    let expected = match ExpectedSender::new(Some(peer.ip()), &request.destination, relay_ip) {
        Ok(expected) => expected,
        Err(not_allowed) => {
            control
                .write_all(&request.reply(status::NOT_ALLOWED, unspecified()))
                .await?;
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                not_allowed.to_string(),
            ));
        }
    };
    let hub = UdpSocket::bind(SocketAddr::new(relay_ip, 0)).await?;
    control
        .write_all(&request.reply(status::SUCCEEDED, hub.local_addr()?))
        .await?;
    control.flush().await?;

    let limits = shared.limits.load_full();
    let fanout = FanOut::new(
        shared.plane.clone(),
        shared.tag.clone(),
        Some(peer.ip()),
        limits.udp_max_sublinks as usize,
    );
    let mut association = Association {
        control,
        hub,
        expected,
        fanout,
        destination: Address::Ip(SocketAddr::from(([0, 0, 0, 0], 0))),
        outgoing: None,
        incoming: None,
        header: Vec::with_capacity(HEADROOM),
        client: None,
    };
    let idle = limits.relay_idle_timeout;
    let mut sleep = pin!(tokio::time::sleep(idle));
    poll_fn(|cx| loop {
        match association.poll_step(cx) {
            Poll::Ready(Step::Ended) => return Poll::Ready(Ok(())),
            Poll::Ready(Step::Moved) => sleep.as_mut().reset(Instant::now() + idle),
            Poll::Ready(Step::Again) => {}
            Poll::Pending => {
                return match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Ok(())),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    })
    .await
}

/// What one pass over an association did.
enum Step {
    /// A packet moved one way or the other.
    Moved,
    /// Something was read that moves nothing (a stranger's datagram, a
    /// byte on the control connection): look again, without counting it as
    /// activity.
    Again,
    /// The control connection closed: the association lives as long as it.
    Ended,
}

/// One SOCKS association: its control connection, the relay socket it
/// hears its client on, and the fan-out behind it. Each direction holds at
/// most one packet, in a buffer it takes from the thread's spares when a
/// packet arrives and gives back once the packet is sent, so an idle
/// association holds none.
struct Association {
    control: Stream,
    hub: UdpSocket,
    expected: ExpectedSender,
    fanout: FanOut,
    /// The destination of the client packet being sent (kept from packet
    /// to packet, so its name buffer is reused).
    destination: Address,
    /// The client packet being sent, and its payload's range.
    outgoing: Option<(Box<[u8]>, Range<usize>)>,
    /// The reply being sent to the client, and its range.
    incoming: Option<(Box<[u8]>, Range<usize>)>,
    header: Vec<u8>,
    /// The client's address, once its first datagram came.
    client: Option<SocketAddr>,
}

impl Association {
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        let mut control_byte = [0u8; 1];
        let mut read = ReadBuf::new(&mut control_byte);
        match Pin::new(&mut self.control).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Step::Ended),
            Poll::Ready(Err(_)) => return Poll::Ready(Step::Ended),
            // Bytes on the control connection mean nothing; look again.
            Poll::Ready(Ok(())) => return Poll::Ready(Step::Again),
            Poll::Pending => {}
        }
        let mut moved = false;
        let mut again = false;
        // Client to the fan-out: a packet routed and sent, or still pending.
        if let Some((packet, range)) = &self.outgoing {
            if self
                .fanout
                .poll_send_to(cx, &packet[range.clone()], &self.destination)
                .is_ready()
            {
                if let Some((packet, _)) = self.outgoing.take() {
                    buffers::give(packet);
                }
                moved = true;
            }
        }
        while self.outgoing.is_none() {
            match self.hub.poll_recv_ready(cx) {
                Poll::Pending => break,
                // The client is gone if its relay socket fails.
                Poll::Ready(Err(_)) => return Poll::Ready(Step::Ended),
                Poll::Ready(Ok(())) => {}
            }
            let mut packet = buffers::take(MAX_DATAGRAM);
            let (n, from) = match self.hub.try_recv_from(&mut packet) {
                Ok(received) => received,
                // Readiness was stale: wait for the next.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    buffers::give(packet);
                    continue;
                }
                Err(_) => {
                    buffers::give(packet);
                    return Poll::Ready(Step::Ended);
                }
            };
            again = true;
            // Anyone but the client is dropped before parsing, and does
            // not keep the association alive.
            let parsed = match self.expected.admits(from) {
                true => parse_datagram_into(&packet[..n], &mut self.destination).ok(),
                false => None,
            };
            match parsed {
                Some(start) => {
                    self.expected.pin(from);
                    self.client = Some(from);
                    self.outgoing = Some((packet, start..n));
                    moved = true;
                }
                None => buffers::give(packet),
            }
            break;
        }
        // The fan-out to the client: a reply framed with its source.
        if self.incoming.is_none() {
            let mut reply = buffers::take(REPLY_BUF);
            match self.fanout.poll_recv_from(cx, &mut reply[HEADROOM..]) {
                Poll::Ready((source, n)) if self.client.is_some() => {
                    self.header.clear();
                    write_datagram_header(&source, &mut self.header);
                    let start = HEADROOM - self.header.len();
                    reply[start..HEADROOM].copy_from_slice(&self.header);
                    self.incoming = Some((reply, start..HEADROOM + n));
                    moved = true;
                }
                Poll::Ready(_) => {
                    buffers::give(reply);
                    moved = true;
                }
                Poll::Pending => buffers::give(reply),
            }
        }
        if let (Some((reply, range)), Some(client)) = (&self.incoming, self.client) {
            if let Poll::Ready(sent) = self.hub.poll_send_to(cx, &reply[range.clone()], client) {
                if let Err(e) = sent {
                    tracing::debug!("socks udp: reply to {client} failed: {e}");
                }
                if let Some((reply, _)) = self.incoming.take() {
                    buffers::give(reply);
                }
                moved = true;
            }
        }
        if moved {
            Poll::Ready(Step::Moved)
        } else if again {
            Poll::Ready(Step::Again)
        } else {
            Poll::Pending
        }
    }
}
