//! The datagram link a fan-out sub-link holds.

use std::io;
use std::task::{Context, Poll};

use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use super::freedom::ResolvingUdp;
use super::socks_udp::SocksUdp;

pub enum DatagramLink {
    /// Boxed: it holds a resolver, far larger than the other variants.
    Freedom(Box<ResolvingUdp>),
    Socks(Box<SocksUdp>),
    /// Swallows every packet and never receives: how a blocked peer's
    /// packets are dropped without harming the rest of the association.
    Blackhole,
}

impl DatagramLink {
    pub async fn send_to(&mut self, payload: &[u8], to: &Address) -> io::Result<()> {
        match self {
            DatagramLink::Freedom(udp) => udp.send_to(payload, to).await,
            DatagramLink::Socks(udp) => udp.send_to(payload, to).await,
            DatagramLink::Blackhole => Ok(()),
        }
    }

    pub fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        match self {
            DatagramLink::Freedom(udp) => udp.poll_recv_from(cx, buf).map_ok(Address::Ip),
            DatagramLink::Socks(udp) => udp.poll_recv_from(cx, buf),
            DatagramLink::Blackhole => Poll::Pending,
        }
    }
}
