//! What every outbound protocol is: built from its spec, it opens a TCP
//! flow as a stream and a UDP flow as a datagram link. Each protocol is one
//! module implementing [`Protocol`], registered on one line of the registry
//! (outbound/mod.rs), which generates the closed enums the runtime holds
//! ([`super::OutboundStream`], [`super::OutboundDatagram`]): dispatch is a
//! match, never a `Box<dyn>` on the data path.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{OutboundProtocol, Upstream};
use etemenanki_proto::Address;
use etemenanki_transport::Connector;
use tokio::io::ReadBuf;

use super::link::DatagramLink;
use crate::dial::Dialer;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::relay::Relayed;
use crate::resolve::Dns;

/// What a protocol is built with, beside its spec.
pub struct Build<'a> {
    pub dialer: &'a Dialer,
    pub dns: &'a Dns,
}

impl Build<'_> {
    /// The connector to a proxy's upstream, which resolves the server with
    /// the servers' resolver.
    pub fn connector(&self, upstream: &Upstream) -> io::Result<Connector> {
        Connector::build(upstream, self.dialer.clone(), self.dns.servers.clone())
    }
}

pub trait Protocol: Sized + Send + Sync + 'static {
    /// What a TCP flow opened on it is relayed to.
    type Stream: Relayed + Send + 'static;
    /// What a UDP flow opened on it carries.
    type Datagram: DatagramLink + Send + 'static;

    /// The outbound `protocol` describes when it is this protocol's; opens
    /// no socket.
    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Self>>;

    /// Opens a TCP flow to `destination`. `resolved` holds the addresses
    /// routing resolved a name to, if it did: a direct dial goes to those
    /// and looks nothing up again; a proxy sends the name as it was. A
    /// direct dial that looks a name up itself refuses it, before any
    /// connect, if one of its addresses is among `own` inbounds.
    fn connect(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send;

    /// Opens a UDP link. `toward` is where the packet that opens it goes:
    /// the one target of a VLESS or VMess link, which carries no other;
    /// the other links address every packet on its own. A direct link
    /// drops a packet to a name it resolves to one of the own inbounds of
    /// the current `plane`.
    fn associate(
        &self,
        toward: &Address,
        plane: Arc<ArcSwap<Plane>>,
    ) -> impl Future<Output = io::Result<Self::Datagram>> + Send;
}

/// A protocol whose state is large is registered boxed, so the enum of
/// every outbound stays as small as the others.
impl<P: Protocol> Protocol for Box<P> {
    type Stream = P::Stream;
    type Datagram = P::Datagram;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Self>> {
        P::build(protocol, with).map(|built| built.map(Box::new))
    }

    fn connect(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
        own: &OwnInbounds,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send {
        (**self).connect(destination, resolved, own)
    }

    fn associate(
        &self,
        toward: &Address,
        plane: Arc<ArcSwap<Plane>>,
    ) -> impl Future<Output = io::Result<Self::Datagram>> + Send {
        (**self).associate(toward, plane)
    }
}

/// The datagram link of a protocol that carries none.
impl DatagramLink for Infallible {
    fn poll_send_to(&mut self, _: &mut Context<'_>, _: &[u8], _: &Address) -> Poll<io::Result<()>> {
        match *self {}
    }

    fn poll_recv_from(
        &mut self,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        match *self {}
    }
}

impl<L: DatagramLink + ?Sized> DatagramLink for Box<L> {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        (**self).poll_send_to(cx, payload, to)
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        (**self).poll_recv_from(cx, buf)
    }
}
