//! The DNS inbound: the internal DNS service for the host itself, UDP and
//! TCP on the same port. The inbound's UDP socket answers each datagram; a
//! TCP connection (accepted and admitted like any other) is answered
//! message by message. Answers come from the service of
//! the current plane, so a DNS change reaches a reused inbound too.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use super::Shared;
use crate::dns::{ready_now, Service, Transport};
use crate::resolve::MAX_MESSAGE;

/// Datagrams answered at once; more wait in the socket's buffer.
const MAX_IN_FLIGHT: usize = 1024;
/// Datagrams read in one go once the socket is readable.
const BATCH: usize = 64;

fn service(shared: &Shared) -> Option<Service> {
    shared.plane.load().dns_service().cloned()
}

/// Answers every datagram on the inbound's UDP socket (bound on the
/// listener's port, and handed over on a reload as a Shadowsocks inbound's
/// is).
pub async fn serve_udp(shared: Arc<Shared>, socket: UdpSocket) {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut answering: JoinSet<Option<(Vec<u8>, SocketAddr)>> = JoinSet::new();
    loop {
        tokio::select! {
            readable = socket.readable(), if answering.len() < MAX_IN_FLIGHT => {
                if let Err(e) = readable {
                    tracing::debug!("inbound {}: udp socket failed: {e}", shared.tag);
                    continue;
                }
                let Some(service) = service(&shared) else { continue };
                // Every datagram already queued, up to a batch, before
                // waiting again.
                for _ in 0..BATCH {
                    let (n, peer) = match socket.try_recv_from(&mut buf) {
                        Ok(received) => received,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            tracing::debug!("inbound {}: udp receive failed: {e}", shared.tag);
                            break;
                        }
                    };
                    // A cached answer is ready at once: sent from here,
                    // with no task and no copy of the query.
                    let answered = {
                        let answer = std::pin::pin!(service.answer(&buf[..n], Transport::Udp));
                        ready_now(answer)
                    };
                    match answered {
                        Some(Some(answer)) => send(&socket, &answer, peer, &shared.tag).await,
                        Some(None) => {}
                        None => {
                            let query = buf[..n].to_vec();
                            let service = service.clone();
                            answering.spawn(async move {
                                Some((service.answer(&query, Transport::Udp).await?, peer))
                            });
                            if answering.len() >= MAX_IN_FLIGHT {
                                break;
                            }
                        }
                    }
                }
            }
            Some(joined) = answering.join_next() => {
                if let Ok(Some((answer, peer))) = joined {
                    send(&socket, &answer, peer, &shared.tag).await;
                }
            }
        }
    }
}

async fn send(socket: &UdpSocket, answer: &[u8], peer: SocketAddr, tag: &str) {
    let sent = match socket.try_send_to(answer, peer) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => socket.send_to(answer, peer).await,
        sent => sent,
    };
    if let Err(e) = sent {
        tracing::debug!("inbound {tag}: answering {peer} failed: {e}");
    }
}
/// One TCP connection: each message after its 2-byte length, answered in
/// turn, until the client closes or stays silent past the idle timeout.
pub async fn serve_tcp(
    shared: &Shared,
    mut client: etemenanki_transport::Stream,
) -> io::Result<()> {
    let idle = shared.limits.load().relay_idle_timeout;
    let mut query = vec![0u8; MAX_MESSAGE];
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(idle, client.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        let len = usize::from(u16::from_be_bytes(len));
        client.read_exact(&mut query[..len]).await?;
        let Some(service) = service(shared) else {
            return Ok(());
        };
        let Some(answer) = service.answer(&query[..len], Transport::Tcp).await else {
            return Ok(());
        };
        let len = u16::try_from(answer.len()).unwrap_or(u16::MAX);
        client.write_all(&len.to_be_bytes()).await?;
        client.write_all(&answer[..usize::from(len)]).await?;
        client.flush().await?;
    }
}
