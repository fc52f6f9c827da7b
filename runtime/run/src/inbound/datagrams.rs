//! A UDP association whose client side is a [`DatagramLink`]: packets
//! inside the client's stream (Trojan, VLESS, VMess), each routed by the
//! fan-out, replies sealed back to the client with their source. It lives
//! as long as the client's stream, or until nothing moves for the idle
//! timeout.

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
use crate::fanout::FanOut;
use crate::outbound::DatagramLink;

/// The largest UDP payload.
const MAX_DATAGRAM: usize = 65_535;

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
        from_client: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
        destination: Address::Ip(std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
        outgoing: None,
        to_client: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
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

/// Each direction holds at most one packet, in a buffer of its own, while
/// its send is pending.
struct Association<L> {
    client: L,
    fanout: FanOut,
    from_client: Box<[u8]>,
    /// The destination of the client's packet being sent, and its range.
    destination: Address,
    outgoing: Option<Range<usize>>,
    to_client: Box<[u8]>,
    /// The reply being sent to the client: its source and range.
    incoming: Option<(Address, usize)>,
}

impl<L: DatagramLink> Association<L> {
    /// `Ready(Ok)` when a packet moved; an error when the client's stream
    /// ended or failed, which ends the association.
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut moved = false;
        if let Some(range) = &self.outgoing {
            if self
                .fanout
                .poll_send_to(cx, &self.from_client[range.clone()], &self.destination)
                .is_ready()
            {
                self.outgoing = None;
                moved = true;
            }
        }
        if self.outgoing.is_none() {
            let mut read = ReadBuf::new(&mut self.from_client);
            if let Poll::Ready(received) = self.client.poll_recv_from(cx, &mut read) {
                let n = read.filled().len();
                self.destination = received?;
                self.outgoing = Some(0..n);
                moved = true;
            }
        }
        if self.incoming.is_none() {
            if let Poll::Ready((source, n)) = self.fanout.poll_recv_from(cx, &mut self.to_client) {
                self.incoming = Some((source, n));
                moved = true;
            }
        }
        if let Some((source, n)) = &self.incoming {
            if let Poll::Ready(sent) = self.client.poll_send_to(cx, &self.to_client[..*n], source) {
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
