//! TCP keepalive on proxy connections, set on every socket a proxy client
//! dials, once connected and before its transport is layered: Linux waits
//! two hours before its first probe, and a proxy's peers routinely vanish
//! without a FIN, after a mobile NAT rebind for one.

use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};

/// Silence before the first probe.
pub const TCP_KEEPALIVE_IDLE: Duration = Duration::from_secs(120);
/// Between two probes.
pub const TCP_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// Unanswered probes before the connection is given up.
pub const TCP_KEEPALIVE_RETRIES: u32 = 3;

/// Sets the schedule on `socket`. A platform that rejects the options is
/// not an error: the connection works without them.
pub fn set_keepalive(socket: SockRef<'_>) {
    let schedule = TcpKeepalive::new()
        .with_time(TCP_KEEPALIVE_IDLE)
        .with_interval(TCP_KEEPALIVE_INTERVAL)
        .with_retries(TCP_KEEPALIVE_RETRIES);
    if let Err(e) = socket.set_tcp_keepalive(&schedule) {
        tracing::debug!("could not enable TCP keepalive: {e}");
    }
}
