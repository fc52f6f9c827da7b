//! A UDP association whose client side is a [`DatagramLink`]: packets
//! inside the client's stream (Trojan, VLESS, VMess, a Mux.Cool session),
//! each routed by the fan-out, replies sealed back to the client with their
//! source. It lives as long as the client's stream, or until nothing moves
//! for the idle timeout. Each direction holds a buffer only while a packet
//! waits in it: an idle association holds none.

use etemenanki_proto::MAX_DATAGRAM;
use std::future::{poll_fn, Future};
use std::io;
use std::net::IpAddr;
use std::ops::Range;
use std::pin::pin;
use std::task::{Context, Poll};

use etemenanki_proto::Address;
use tokio::io::ReadBuf;
use tokio::time::Instant;

use super::Shared;
use crate::buffers;
use crate::fanout::FanOut;
use crate::outbound::DatagramLink;

pub async fn relay<L: DatagramLink>(shared: &Shared, client: L, source: IpAddr) -> io::Result<()> {
    let limits = shared.limits.load_full();
    let mut association = Association {
        client,
        fanout: FanOut::new(
            shared.plane.clone(),
            shared.tag.clone(),
            Some(source),
            limits.udp_max_sublinks as usize,
        ),
        from_client: None,
        destination: Address::Ip(std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
        outgoing: None,
        to_client: None,
        incoming: None,
    };
    let idle = limits.relay_idle_timeout;
    let mut sleep = pin!(tokio::time::sleep(idle));
    poll_fn(|cx| loop {
        match association.poll_step(cx) {
            Poll::Ready(Ok(())) => sleep.as_mut().reset(Instant::now() + idle),
            // The client's stream ending is the association's end.
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                return Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
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

/// Each direction holds at most one packet, in a buffer of its own taken
/// for the receive and given back once the packet is sent.
struct Association<L> {
    client: L,
    fanout: FanOut,
    from_client: Option<Box<[u8]>>,
    /// The destination of the client's packet being sent, and its range.
    destination: Address,
    outgoing: Option<Range<usize>>,
    to_client: Option<Box<[u8]>>,
    /// The reply being sent to the client: its source and range.
    incoming: Option<(Address, usize)>,
}

impl<L: DatagramLink> Association<L> {
    /// `Ready(Ok)` when a packet moved; an error when the client's stream
    /// ended or failed, which ends the association.
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut moved = false;
        if let (Some(range), Some(buf)) = (&self.outgoing, &self.from_client) {
            if self
                .fanout
                .poll_send_to(cx, &buf[range.clone()], &self.destination)
                .is_ready()
            {
                self.outgoing = None;
                moved = true;
            }
        }
        if self.outgoing.is_none() {
            let buf = self
                .from_client
                .get_or_insert_with(|| buffers::take(MAX_DATAGRAM));
            let mut read = ReadBuf::new(buf);
            match self.client.poll_recv_from(cx, &mut read) {
                Poll::Ready(received) => {
                    let n = read.filled().len();
                    self.destination = received?;
                    self.outgoing = Some(0..n);
                    moved = true;
                }
                Poll::Pending => give(&mut self.from_client),
            }
        }
        if self.incoming.is_none() {
            let buf = self
                .to_client
                .get_or_insert_with(|| buffers::take(MAX_DATAGRAM));
            match self.fanout.poll_recv_from(cx, buf) {
                Poll::Ready((source, n)) => {
                    self.incoming = Some((source, n));
                    moved = true;
                }
                Poll::Pending => give(&mut self.to_client),
            }
        }
        if let (Some((source, n)), Some(buf)) = (&self.incoming, &self.to_client) {
            if let Poll::Ready(sent) = self.client.poll_send_to(cx, &buf[..*n], source) {
                sent?;
                self.incoming = None;
                moved = true;
            }
        }
        if moved {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// Gives a direction's buffer back while it has no packet.
fn give(buf: &mut Option<Box<[u8]>>) {
    if let Some(buf) = buf.take() {
        buffers::give(buf);
    }
}

impl<L> Drop for Association<L> {
    fn drop(&mut self) {
        give(&mut self.from_client);
        give(&mut self.to_client);
    }
}
