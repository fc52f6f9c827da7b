//! vless: a tunnel per TCP flow over the upstream's transport, the request
//! header written at dial and the response header skipped on the first
//! read ([`VlessStream`]); and per fan-out sub-link a UDP request to the
//! one target of the packet that opened it, its packets length-prefixed
//! inside the stream.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_ir::spec::Uuid;
use etemenanki_proto::vless::{Request, UdpFraming};
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};

use super::handshake::dial;
use super::protocol::{Build, Protocol};
use super::vless_stream::VlessStream;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::stream_datagrams::StreamDatagrams;

/// The VLESS client's buffer: each of a UDP link's two
/// buffers. A packet of more than `VLESS_BUF - 2` payload bytes does not
/// fit.
pub const VLESS_BUF: usize = 16 * 1024;

pub type VlessUdp = StreamDatagrams<Stream, UdpFraming, VLESS_BUF>;

pub struct Vless {
    connector: Connector,
    id: [u8; 16],
}

impl Vless {
    pub fn new(connector: Connector, id: &Uuid) -> Vless {
        Vless {
            connector,
            id: id.0,
        }
    }
}

impl Protocol for Vless {
    type Stream = VlessStream;
    type Datagram = Box<VlessUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Vless>> {
        let OutboundProtocol::Vless { upstream, id } = protocol else {
            return None;
        };
        Some(
            with.connector(upstream)
                .map(|connector| Vless::new(connector, id.expose())),
        )
    }

    /// Dials the server and writes the request. VLESS answers nothing
    /// before the target's first bytes, so the dial resolves once the
    /// request is flushed: an unreachable server, a refused connection and
    /// a failed TLS or WebSocket handshake fail it; an unknown id closes
    /// the stream, which its first read reports.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<VlessStream> {
        let mut codec = Request::tcp(&self.id, destination);
        // The request opens without reading, so nothing was read ahead;
        // over a WebSocket with early data it rides in the upgrade.
        let (stream, (), _) = dial(&self.connector, &mut codec).await?;
        Ok(VlessStream::new(stream))
    }

    /// Opens a UDP request to `target`, the destination of the packet that
    /// opens the sub-link: every packet goes there and every reply is
    /// attributed to it, whatever address a later packet names.
    async fn associate(
        &self,
        target: &Address,
        _: Arc<ArcSwap<Plane>>,
    ) -> io::Result<Box<VlessUdp>> {
        let mut codec = Request::udp(&self.id, target);
        let (stream, (), ahead) = dial(&self.connector, &mut codec).await?;
        StreamDatagrams::new(stream, UdpFraming::new(target.clone()), &ahead).map(Box::new)
    }
}
