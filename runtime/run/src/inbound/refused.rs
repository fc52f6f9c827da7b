//! What a client that fails a proxy protocol's authentication gets, so a
//! prober learns nothing the real servers would not tell it: relayed, with
//! every byte it sent, to the inbound's fallback (a web server, as
//! trojan-gfw's `remote_addr` and Xray's `fallbacks` do), or, without one,
//! nothing at all: its bytes read and dropped until the handshake deadline,
//! then the connection closed, as v2ray and shadowsocks-rust do.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::Shared;
use crate::drain::Drain;
use crate::relay::{relay, Relayed};

/// Serves a refused client: `read` is what it sent, `reason` the core's
/// word for the log, `deadline` the end of its handshake window.
pub async fn refused<C: Relayed>(
    shared: &Shared,
    mut client: C,
    read: Vec<u8>,
    reason: &'static str,
    fallback: Option<SocketAddr>,
    deadline: Instant,
) -> io::Result<()> {
    let name = shared.spec.protocol.name();
    let Some(fallback) = fallback else {
        hold(&mut client, deadline).await;
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name}: {reason}; held until the handshake deadline"),
        ));
    };
    let mut web = shared.dialer.connect(fallback).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{name}: {reason}; the fallback {fallback} failed: {e}"),
        )
    })?;
    web.write_all(&read).await?;
    // The fallback is no outbound of the plane: nothing drains it but the
    // inbound's own end.
    let mut guard = Drain::default().guard();
    let idle = shared.limits.load().relay_idle_timeout;
    relay(&mut client, &mut web, idle, &mut guard).await?;
    tracing::debug!("{name}: {reason}; relayed to the fallback {fallback}");
    Ok(())
}

/// Reads and drops what the client sends until `deadline` or its end.
async fn hold<C: AsyncRead + Unpin>(client: &mut C, deadline: Instant) {
    let mut sink = [0u8; 2048];
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, client.read(&mut sink)).await {
        if n == 0 {
            return;
        }
    }
}
