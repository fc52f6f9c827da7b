//! The datagram links a fan-out sub-link holds, polled: a send that cannot
//! go now returns `Pending` instead of holding up the association.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use etemenanki_proto::Address;
use tokio::io::ReadBuf;

/// What every datagram link does: send a packet to its own address, and
/// receive the next one with its source.
pub trait DatagramLink {
    /// Sends `payload` to `to`; `Ready(Ok)` once it is sent (or dropped, as
    /// a lossy link drops what cannot be delivered).
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>>;

    /// The next datagram, copied into `buf` (truncated if it does not fit,
    /// as UDP does), and its source.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>>;
}

/// A datagram's source as a link compares it with its server's address:
/// IPv4-mapped IPv6 addresses compare as the IPv4 address they carry.
pub(super) fn endpoint(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(etemenanki_proto::socks::canonical(addr.ip()), addr.port())
}

/// An open in flight; the fan-out polls it beside the links already open,
/// so an open that takes round trips never stalls another sub-link.
pub type DatagramFuture = Pin<Box<dyn Future<Output = io::Result<super::OutboundDatagram>> + Send>>;
