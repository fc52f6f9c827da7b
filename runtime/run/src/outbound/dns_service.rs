//! The internal DNS service as a route target (`dns`): a TCP flow to it is
//! answered as DNS over TCP, a UDP flow packet by packet. Built with the
//! DNS spec, never from an outbound spec.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_proto::Address;

use super::protocol::{Build, Protocol};
use crate::dns::{DnsTcpStream, DnsUdpLink, Service};
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::Relayed;

impl Protocol for Service {
    type Stream = Box<DnsTcpStream>;
    type Datagram = Box<DnsUdpLink>;

    fn build(_: &OutboundProtocol, _: &Build) -> Option<io::Result<Service>> {
        None
    }

    async fn connect(
        &self,
        _: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Box<DnsTcpStream>> {
        Ok(Box::new(DnsTcpStream::new(self.clone())))
    }

    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<DnsUdpLink>> {
        Ok(Box::new(DnsUdpLink::new(self.clone())))
    }
}

/// Answered in the process: no socket under it.
impl Relayed for DnsTcpStream {
    fn plain_tcp(&mut self) -> Option<&mut tokio::net::TcpStream> {
        None
    }
}
