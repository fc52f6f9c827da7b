//! blackhole: a stream that reads its end at once and swallows every
//! write, a link that swallows every packet and never receives: how a
//! blocked flow ends without harming the rest of its association.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_proto::Address;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::link::DatagramLink;
use super::protocol::{Build, Protocol};
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::Relayed;

pub struct Blackhole;

impl Protocol for Blackhole {
    type Stream = Blackhole;
    type Datagram = Blackhole;

    fn build(protocol: &OutboundProtocol, _: &Build) -> Option<io::Result<Self>> {
        matches!(protocol, OutboundProtocol::Blackhole).then_some(Ok(Blackhole))
    }

    async fn connect(
        &self,
        _: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Blackhole> {
        Ok(Blackhole)
    }

    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Blackhole> {
        Ok(Blackhole)
    }
}

impl AsyncRead for Blackhole {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Blackhole {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Relayed for Blackhole {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
}

impl DatagramLink for Blackhole {
    fn poll_send_to(&mut self, _: &mut Context<'_>, _: &[u8], _: &Address) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_recv_from(
        &mut self,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        Poll::Pending
    }
}
