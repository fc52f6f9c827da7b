//! Routing a TCP flow on the current plane and dialing it.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_proto::Address;

use crate::drain::Guard;
use crate::outbound::{Outbound, OutboundStream};
use crate::plane::Plane;
use crate::route::route_stream;

/// A decoded request: where the client wants to go and what routes it.
pub struct Flow {
    pub destination: Address,
    /// The domain sniffed from the first bytes: it only routes; the dial
    /// still goes to `destination`.
    pub sniffed: Option<String>,
    pub source: Option<IpAddr>,
}

/// A dialed flow, guarded by the version of the outbound it was opened on
/// (for a balanced flow, its member's). It holds that version, so whatever
/// the version shares among its flows (a QUIC connection, a tunnel) lives
/// as long as the flow, even after a reload replaced it under a `keep`
/// drain.
pub struct Opened {
    pub stream: OutboundStream,
    pub guard: Guard,
    pub outbound: Arc<Outbound>,
}

/// Routes `flow` and dials it on the chosen outbound (a balancer picks its
/// member here, so a member that went down is skipped from the next flow).
pub async fn open_stream(
    plane: &ArcSwap<Plane>,
    inbound_tag: &str,
    flow: &Flow,
) -> io::Result<Opened> {
    // Routing and dialing resolve names, whose futures are kilobytes: one
    // allocation holds them while they run, so no caller's task carries
    // them for its connection's whole life.
    Box::pin(async move {
        // One plane for the routing and the dial's own-inbound check.
        let plane = plane.load_full();
        let (outbound, resolved) = route_stream(&plane, inbound_tag, flow).await?;
        let guard = outbound.drain.guard();
        let stream = outbound
            .connect_stream(&flow.destination, resolved.as_deref(), plane.own_inbounds())
            .await?;
        Ok(Opened {
            stream,
            guard,
            outbound,
        })
    })
    .await
}
