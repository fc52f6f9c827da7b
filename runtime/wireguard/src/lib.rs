//! The WireGuard outbound's tunnel, in userspace.
//!
//! boringtun's `noise::Tunn` runs the protocol (handshake, transport
//! data, cookies, timers) between caller-owned buffers, with no TUN
//! device; smoltcp terminates the flows routed into the tunnel as its
//! TCP/IP stack. One UDP socket connected to the endpoint and one driver
//! task per tunnel; the tunnel is started by its outbound's first flow,
//! and starting it sends nothing: the first packet a flow sends brings the
//! handshake.

mod connector;
mod link;
pub mod slot;
mod stream;
mod tunnel;
mod udp;

pub use connector::{WgConnector, TCP_CONNECT_ATTEMPT_TIMEOUT};
pub use stream::WgStream;
pub use tunnel::Tunnel;
pub use udp::WgUdp;
