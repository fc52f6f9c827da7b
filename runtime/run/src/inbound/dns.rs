//! The DNS inbound: the internal DNS service for the host itself, UDP and
//! TCP on the same port. The inbound's UDP socket answers each datagram; a
//! TCP connection (accepted and admitted like any other) is answered
//! message by message. Answers come from the service of
//! the current plane, so a DNS change reaches a reused inbound too.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BufMut;
use etemenanki_ir::spec::InboundProtocol;
use etemenanki_transport::Stream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use super::admission::{Handshaking, Shed};
use super::server::{Listens, Pump, Server};
use super::{handshake_timed_out, shed_error, Shared};
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

/// The DNS service for the host, on UDP and TCP.
pub struct Dns;

impl Server for Dns {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Dns>> {
        matches!(protocol, InboundProtocol::Dns).then_some(Ok(Dns))
    }

    fn listens(&self) -> Listens {
        Listens::StreamAndDatagrams(Pump::Dns)
    }

    /// The permit goes back once the first message is whole.
    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        handshake: Handshaking,
    ) -> io::Result<()> {
        serve_tcp(shared, client, peer, handshake).await
    }
}

/// A message's bytes go into room that grows, from this much and doubling,
/// only once they fill it: a client that announces 65,535 bytes and sends
/// one makes the connection hold 512.
const READ_ROOM: usize = 512;

/// One TCP connection: each message after its 2-byte length, answered in
/// turn, until the client closes or stays silent between messages past the
/// idle timeout. A message that has begun is a handshake: it holds a
/// handshake slot (the connection's own, `handshake`, for the first; one
/// taken at its first byte for each later one) until it is whole, and must
/// be whole within the handshake timeout of the accept (the first) or of
/// its first byte (the later ones), or the connection is closed.
pub async fn serve_tcp<S>(
    shared: &Shared,
    mut client: S,
    peer: SocketAddr,
    handshake: Handshaking,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut accepted = Some(handshake);
    let mut deadline = shared.handshake_deadline();
    let mut message = Vec::new();
    loop {
        let mut len = [0u8; 2];
        // The first message's slot is the connection's, shed with the
        // whole connection.
        let (handshake, shed, have) = match accepted.take() {
            Some(handshake) => (handshake, Shed::never(), 0),
            None => {
                let idle = shared.limits.load().relay_idle_timeout;
                let have = match tokio::time::timeout(idle, client.read(&mut len)).await {
                    Ok(Ok(0)) | Err(_) => return Ok(()),
                    Ok(Ok(n)) => n,
                    Ok(Err(e)) => return Err(e),
                };
                deadline = shared.handshake_deadline();
                match shared.admission.handshake(peer.ip(), &shared.limits.load()) {
                    Ok((handshake, shed)) => (handshake, shed, have),
                    Err(refusal) => {
                        tracing::debug!(
                            "dropping a dns connection's next message; {} (from {peer})",
                            refusal.text()
                        );
                        return Ok(());
                    }
                }
            }
        };
        let read = read_message(&mut client, &mut len, have, &mut message);
        let read = tokio::select! {
            read = tokio::time::timeout_at(deadline, read) => read,
            () = shed => return Err(shed_error()),
        };
        match read {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(handshake_timed_out(shared.limits.load().handshake_timeout)),
        }
        drop(handshake);
        let Some(service) = service(shared) else {
            return Ok(());
        };
        let Some(answer) = service.answer(&message, Transport::Tcp).await else {
            return Ok(());
        };
        message.clear();
        message.shrink_to(READ_ROOM);
        let len = u16::try_from(answer.len()).unwrap_or(u16::MAX);
        client.write_all(&len.to_be_bytes()).await?;
        client.write_all(&answer[..usize::from(len)]).await?;
        client.flush().await?;
    }
}

/// Reads one message into `message` (which holds what of it was read
/// already): the rest of its length, of which `len` holds `have` bytes,
/// then its bytes as they arrive. `false` when the client closed before the
/// length was whole.
async fn read_message<R: AsyncRead + Unpin>(
    client: &mut R,
    len: &mut [u8; 2],
    have: usize,
    message: &mut Vec<u8>,
) -> io::Result<bool> {
    match client.read_exact(&mut len[have..]).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = usize::from(u16::from_be_bytes(*len));
    while message.len() < len {
        let want = len - message.len();
        if message.len() == message.capacity() {
            message.reserve(want.min(READ_ROOM));
        }
        if client.read_buf(&mut (&mut *message).limit(want)).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the client closed the connection inside a dns message",
            ));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use arc_swap::ArcSwap;
    use etemenanki_ir::spec::{InboundProtocol, InboundSpec, Limits, SocketPolicy};
    use tokio::io::{duplex, DuplexStream};
    use tokio::task::JoinHandle;
    use tokio::time::Instant;

    use super::*;
    use crate::dial::Dialer;
    use crate::inbound::Inbound;
    use crate::plane::Plane;

    const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 5353);
    const HANDSHAKE: Duration = Duration::from_secs(10);

    /// A DNS inbound answering from a service that knows only `localhost`,
    /// with one handshake slot.
    fn inbound() -> Inbound {
        let limits = Limits {
            handshake_timeout: HANDSHAKE,
            max_handshakes: 1,
            max_handshakes_per_source: 1,
            ..Limits::default()
        };
        let limits = Arc::new(ArcSwap::from_pointee(limits));
        let service = Service::new(crate::dns::no_servers().destinations);
        let plane = Arc::new(ArcSwap::from_pointee(
            Plane::empty().with_dns_service(service),
        ));
        let spec = InboundSpec {
            tag: "dns-in".into(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            sniff: false,
            protocol: InboundProtocol::Dns,
        };
        let dialer = Dialer::new(SocketPolicy::default(), limits.clone());
        Inbound::bind(&spec, limits, plane, dialer, None).unwrap()
    }

    /// A connection from [`PEER`] admitted and served on a task of its own,
    /// and the client's end.
    fn connection(inbound: &Inbound) -> (DuplexStream, JoinHandle<io::Result<()>>) {
        let shared = inbound.shared.clone();
        let (_session, handshake, _) = shared
            .admission
            .admit(PEER.ip(), &shared.limits.load())
            .unwrap();
        let (client, server) = duplex(64 * 1024);
        let served = tokio::spawn(async move { serve_tcp(&shared, server, PEER, handshake).await });
        (client, served)
    }

    /// Whether another handshake from [`PEER`] would be admitted now.
    fn slot_free(inbound: &Inbound) -> bool {
        let shared = &inbound.shared;
        shared
            .admission
            .handshake(PEER.ip(), &shared.limits.load())
            .is_ok()
    }

    /// `localhost.` A with id `id`, framed with its length (RFC 1035 4.1
    /// and 4.2.2).
    fn framed_query(id: u16) -> Vec<u8> {
        let mut query = id.to_be_bytes().to_vec();
        query.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        query.extend_from_slice(b"\x09localhost\x00\x00\x01\x00\x01");
        let mut framed = (query.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&query);
        framed
    }

    /// Reads one framed answer and checks that it answers `id`.
    async fn answered(client: &mut DuplexStream, id: u16) {
        let mut len = [0u8; 2];
        client.read_exact(&mut len).await.unwrap();
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer[..2], id.to_be_bytes());
        assert!(answer.windows(4).any(|w| w == [127, 0, 0, 1]), "{answer:?}");
    }

    /// How the connection ended, and after how long; a bound far past
    /// every timeout, so a connection held forever fails the test.
    async fn ended(
        served: JoinHandle<io::Result<()>>,
        since: Instant,
    ) -> (io::Result<()>, Duration) {
        let ended = tokio::time::timeout(Duration::from_secs(3600), served)
            .await
            .expect("the connection was never closed")
            .unwrap();
        (ended, since.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_tcp_connection_is_closed_at_the_handshake_deadline_of_its_accept() {
        let inbound = inbound();
        let start = Instant::now();
        let (_client, served) = connection(&inbound);
        let (ended, after) = ended(served, start).await;
        assert_eq!(ended.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(after, HANDSHAKE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tcp_message_announced_long_and_left_partial_is_closed_at_the_handshake_deadline() {
        let inbound = inbound();
        let start = Instant::now();
        let (mut client, served) = connection(&inbound);
        client.write_all(&[0xff, 0xff, 0]).await.unwrap();
        let (ended, after) = ended(served, start).await;
        let error = ended.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(error.to_string(), "inbound handshake timed out after 10s");
        assert_eq!(after, HANDSHAKE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_tcp_message_must_be_whole_within_the_handshake_timeout_of_its_first_byte() {
        let inbound = inbound();
        let (mut client, served) = connection(&inbound);
        client.write_all(&framed_query(1)).await.unwrap();
        answered(&mut client, 1).await;
        // Silence between messages is bounded by the idle timeout only.
        tokio::time::sleep(HANDSHAKE * 10).await;
        client.write_all(&framed_query(2)).await.unwrap();
        answered(&mut client, 2).await;
        tokio::time::sleep(HANDSHAKE * 10).await;
        let begun = Instant::now();
        let third = framed_query(3);
        client.write_all(&third[..1]).await.unwrap();
        tokio::time::sleep(HANDSHAKE / 2).await;
        client.write_all(&third[1..5]).await.unwrap();
        let (ended, after) = ended(served, begun).await;
        assert_eq!(ended.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(after, HANDSHAKE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_partial_tcp_message_holds_a_handshake_slot_and_a_whole_one_gives_it_back() {
        let inbound = inbound();
        let (mut client, served) = connection(&inbound);
        let query = framed_query(1);
        client.write_all(&query[..1]).await.unwrap();
        tokio::task::yield_now().await;
        assert!(
            !slot_free(&inbound),
            "the first message holds the accept's slot"
        );
        client.write_all(&query[1..]).await.unwrap();
        answered(&mut client, 1).await;
        assert!(slot_free(&inbound), "a whole message gives it back");

        let query = framed_query(2);
        client.write_all(&query[..3]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            !slot_free(&inbound),
            "a later message takes one at its first byte"
        );
        client.write_all(&query[3..]).await.unwrap();
        answered(&mut client, 2).await;
        assert!(slot_free(&inbound));

        // With the only slot taken elsewhere, the next message is
        // not read: the connection is closed.
        let held = inbound
            .shared
            .admission
            .handshake(PEER.ip(), &inbound.shared.limits.load())
            .unwrap();
        client.write_all(&framed_query(3)).await.unwrap();
        let (ended, _) = ended(served, Instant::now()).await;
        assert!(ended.is_ok());
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "no answer: {rest:?}");
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_partial_message_is_buffered_as_it_arrives_not_at_its_announced_length() {
        let (mut client, mut server) = duplex(64 * 1024);
        client.write_all(&[0xff, 0xff, 7]).await.unwrap();
        let mut message = Vec::new();
        let mut len = [0u8; 2];
        let read = read_message(&mut server, &mut len, 0, &mut message);
        assert!(tokio::time::timeout(HANDSHAKE, read).await.is_err());
        assert_eq!(message, [7]);
        assert!(message.capacity() <= READ_ROOM, "{}", message.capacity());
        // The rest comes in, read into room grown as it arrives.
        let rest = vec![8u8; 0xffff - 1];
        let read = tokio::spawn(async move {
            let whole = read_message(&mut server, &mut len, 2, &mut message).await;
            whole.map(|whole| (whole, message))
        });
        client.write_all(&rest).await.unwrap();
        let (whole, message) = read.await.unwrap().unwrap();
        assert!(whole);
        assert_eq!(message.len(), 0xffff);
    }
}
