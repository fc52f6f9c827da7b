//! DNS in the runtime: the resolvers of the DNS spec with their carriers
//! (direct under the socket policy, or through the route table for a split
//! spec's through_proxy servers), and the internal DNS service that answers
//! the flows routed to `dns` and the DNS inbound.

mod flows;
mod routed;
mod service;

use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::DnsSpec;

use crate::dial::Dialer;
use crate::plane::Plane;
use crate::resolve::{Direct, Dns};
pub use flows::{DnsTcpStream, DnsUdpLink};
pub use routed::Routed;
pub use service::{Service, Transport};

/// The resolvers of `spec`: what is asked directly goes out under the
/// dialer's socket policy; a split spec's through_proxy queries are routed
/// on the current `plane`, as flows of their own.
pub fn build(spec: &DnsSpec, dialer: &Dialer, plane: &Arc<ArcSwap<Plane>>) -> std::io::Result<Dns> {
    Dns::build(
        spec,
        Arc::new(Direct::new(dialer.clone())),
        Arc::new(Routed::new(plane.clone())),
    )
}

/// The output of `future` if it is ready at its first poll: a cached answer
/// is, and goes out without a task of its own.
pub fn ready_now<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.poll(&mut cx) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

/// A resolver pair that knows no server: `localhost` still resolves, to
/// loopback (RFC 6761). For tests that route and dial without DNS.
#[cfg(test)]
pub fn no_servers() -> Dns {
    let limits = Arc::new(ArcSwap::from_pointee(etemenanki_ir::spec::Limits::default()));
    let dialer = Dialer::new(etemenanki_ir::spec::SocketPolicy::default(), limits);
    let plane = Arc::new(ArcSwap::from_pointee(Plane::empty()));
    build(&DnsSpec::Single { servers: vec![] }, &dialer, &plane).unwrap()
}
