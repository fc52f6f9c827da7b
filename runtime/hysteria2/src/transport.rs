//! The QUIC transport parameters both sides run with: hysteria's flow
//! control windows, idle timeout and keep-alive.

use std::sync::Arc;
use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};

use crate::congestion::CongestionFactory;

/// hysteria's defaults: 8 MiB a stream, 20 MiB a connection.
const STREAM_RECEIVE_WINDOW: u32 = 8 * 1024 * 1024;
const CONNECTION_RECEIVE_WINDOW: u32 = 20 * 1024 * 1024;
const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Datagrams buffered on each side before the oldest are dropped.
const DATAGRAM_BUFFER: usize = 4 * 1024 * 1024;

pub fn config(congestion: CongestionFactory) -> TransportConfig {
    let mut transport = TransportConfig::default();
    transport
        .stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_RECEIVE_WINDOW))
        .send_window(u64::from(CONNECTION_RECEIVE_WINDOW))
        .max_idle_timeout(IdleTimeout::try_from(MAX_IDLE_TIMEOUT).ok())
        .keep_alive_interval(Some(KEEP_ALIVE))
        .datagram_receive_buffer_size(Some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER)
        .congestion_controller_factory(Arc::new(congestion));
    transport
}
