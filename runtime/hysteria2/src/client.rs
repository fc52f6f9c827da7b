//! The client side: one authenticated QUIC connection, TCP flows as
//! bidirectional streams, UDP sessions over QUIC datagrams.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{AsyncUdpSocket, Endpoint, EndpointConfig, Runtime, TokioRuntime};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::congestion::{send_rate, CongestionFactory};
use crate::salamander::{Salamander, SalamanderSocket};
use crate::udp::{self, Defragger, Message};
use crate::{auth, tcp, transport, QuicStream};

/// Opening a proxy stream: the most it waits for the connection to grant
/// the stream itself.
pub const OPEN_STREAM_TIMEOUT: Duration = Duration::from_secs(5);
/// Reading the server's TCPResponse, which it sends once it has dialed.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Replies queued for one UDP session before the newest are dropped.
const SESSION_QUEUE: usize = 256;

/// What a client connection needs beyond the socket and the TLS
/// configuration.
#[derive(Clone)]
pub struct ClientConfig {
    pub server_name: String,
    pub password: String,
    pub obfs: Option<Salamander>,
    /// Bits a second; 0 leaves congestion control to BBR.
    pub up_bps: u64,
    pub down_bps: u64,
    pub max_concurrent_streams: u32,
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "hysteria2: the connection behind this association is gone",
    )
}

type Sessions = Mutex<HashMap<u32, mpsc::Sender<Bytes>>>;

/// One authenticated connection, shared by every flow of an outbound
/// version. Dropping the last handle closes it.
pub struct Connection {
    quic: quinn::Connection,
    _endpoint: Endpoint,
    /// Kept: h3 closes the connection when its last request handle goes.
    _h3: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    udp: bool,
    streams: Arc<Semaphore>,
    sessions: Arc<Sessions>,
    next_session: AtomicU32,
}

/// Runs QUIC over `socket` to `server`, then authenticates.
pub async fn connect(
    socket: std::net::UdpSocket,
    server: SocketAddr,
    config: &ClientConfig,
    tls: rustls::ClientConfig,
) -> io::Result<Connection> {
    let runtime = Arc::new(TokioRuntime);
    let mut socket: Arc<dyn AsyncUdpSocket> = runtime.wrap_udp_socket(socket)?;
    if let Some(salamander) = &config.obfs {
        socket = Arc::new(SalamanderSocket::new(socket, salamander.clone()));
    }
    let endpoint =
        Endpoint::new_with_abstract_socket(EndpointConfig::default(), None, socket, runtime)?;
    let rate = Arc::new(AtomicU64::new(0));
    let mut transport = transport::config(CongestionFactory { rate: rate.clone() });
    transport.max_concurrent_bidi_streams(0u32.into());
    let crypto =
        QuicClientConfig::try_from(tls).map_err(|e| io::Error::other(format!("hysteria2: {e}")))?;
    let mut quic_config = quinn::ClientConfig::new(Arc::new(crypto));
    quic_config.transport_config(Arc::new(transport));
    let quic = endpoint
        .connect_with(quic_config, server, &config.server_name)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("hysteria2: {e}")))?
        .await?;

    let (mut driver, mut h3) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .map_err(|e| io::Error::other(format!("hysteria2: http/3: {e}")))?;
    tokio::spawn(async move {
        let _closed = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let reply = authenticate(&mut h3, config).await;
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => {
            quic.close(0u32.into(), b"");
            return Err(e);
        }
    };
    rate.store(send_rate(config.up_bps / 8, reply.rx), Ordering::Relaxed);

    let sessions = Arc::new(Sessions::default());
    let udp = reply.udp;
    if udp && quic.max_datagram_size().is_some() {
        tokio::spawn(dispatch(quic.clone(), sessions.clone()));
    }
    Ok(Connection {
        quic,
        _endpoint: endpoint,
        _h3: h3,
        udp,
        streams: Arc::new(Semaphore::new(config.max_concurrent_streams as usize)),
        sessions,
        next_session: AtomicU32::new(1),
    })
}

async fn authenticate(
    h3: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    config: &ClientConfig,
) -> io::Result<auth::Reply> {
    let h3_error = |e: &dyn std::fmt::Display| io::Error::other(format!("hysteria2: http/3: {e}"));
    let request = auth::request(&config.password, config.down_bps / 8)?;
    let mut stream = h3.send_request(request).await.map_err(|e| h3_error(&e))?;
    stream.finish().await.map_err(|e| h3_error(&e))?;
    let response = stream.recv_response().await.map_err(|e| h3_error(&e))?;
    auth::parse_reply(response.status(), response.headers())
}

/// Delivers each arriving datagram to its session; when the connection
/// ends, the sessions' queues close and their links fail.
async fn dispatch(quic: quinn::Connection, sessions: Arc<Sessions>) {
    while let Ok(datagram) = quic.read_datagram().await {
        let Some(id) = datagram.get(..4) else {
            continue;
        };
        let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        let sessions = sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(queue) = sessions.get(&id) {
            let _full_or_gone = queue.try_send(datagram);
        }
    }
    sessions.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

impl Connection {
    /// Whether the connection still runs.
    pub fn is_alive(&self) -> bool {
        self.quic.close_reason().is_none()
    }

    /// Opens a proxy stream to `address` (`host:port`) and waits for the
    /// server's answer.
    pub async fn open_tcp(self: &Arc<Self>, address: &str) -> io::Result<TcpStream> {
        let permit = self.streams.clone().try_acquire_owned().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "hysteria2: connection is at its concurrent-stream limit",
            )
        })?;
        let timed_out = || {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "hysteria2: opening a stream timed out",
            )
        };
        let (mut send, mut recv) = tokio::time::timeout(OPEN_STREAM_TIMEOUT, self.quic.open_bi())
            .await
            .map_err(|_| timed_out())??;
        let mut request = Vec::with_capacity(address.len() + 600);
        tcp::encode_request(address, auth::padding().as_bytes(), &mut request);
        send.write_all(&request).await?;
        let mut ahead = request;
        ahead.clear();
        let answer = tokio::time::timeout(RESPONSE_TIMEOUT, read_response(&mut recv, &mut ahead))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "hysteria2: the server did not answer the stream",
                )
            })??;
        if !answer.ok {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "hysteria2: the server refused the stream: {}",
                    answer.message
                ),
            ));
        }
        Ok(QuicStream::new(send, recv, ahead, (permit, self.clone())))
    }

    /// Opens a UDP session, refused when the server does not relay UDP or
    /// offered no QUIC datagrams.
    pub fn open_udp(self: &Arc<Self>) -> io::Result<UdpSession> {
        if !self.udp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "hysteria2: the server does not relay UDP",
            ));
        }
        if self.quic.max_datagram_size().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "hysteria2: the server did not offer QUIC datagrams",
            ));
        }
        let (queue, replies) = mpsc::channel(SESSION_QUEUE);
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_alive() {
            return Err(gone());
        }
        let id = loop {
            let id = self.next_session.fetch_add(1, Ordering::Relaxed);
            if !sessions.contains_key(&id) {
                break id;
            }
        };
        sessions.insert(id, queue);
        drop(sessions);
        Ok(UdpSession {
            connection: self.clone(),
            id,
            replies,
            defragger: Defragger::default(),
            packet_id: 0,
            out: BytesMut::with_capacity(1500),
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.quic.close(0u32.into(), b"");
    }
}

/// Reads the TCPResponse through `buf`, which is left holding the bytes
/// that came after it: the stream's first data.
async fn read_response(
    recv: &mut quinn::RecvStream,
    buf: &mut Vec<u8>,
) -> io::Result<tcp::Response> {
    let limit = 1 + 8 + tcp::MAX_MESSAGE_LEN as usize + 8 + tcp::MAX_PADDING_LEN as usize;
    let mut chunk = [0u8; 1024];
    loop {
        if let Some((response, used)) = tcp::decode_response(buf)? {
            buf.drain(..used);
            return Ok(response);
        }
        if buf.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "hysteria2: the server's response is too long",
            ));
        }
        match recv.read(&mut chunk).await? {
            Some(n) => buf.extend_from_slice(&chunk[..n]),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "hysteria2: the server closed the stream before answering",
                ))
            }
        }
    }
}

/// A TCP flow: one bidirectional stream, its answer read; it holds its
/// place under the stream limit and the connection.
pub type TcpStream = QuicStream<(OwnedSemaphorePermit, Arc<Connection>)>;

/// A UDP session: datagrams to any address, replies from any.
pub struct UdpSession {
    connection: Arc<Connection>,
    id: u32,
    replies: mpsc::Receiver<Bytes>,
    defragger: Defragger,
    packet_id: u16,
    /// The message being built; its storage comes back once quinn has
    /// sent what it handed over.
    out: BytesMut,
}

impl UdpSession {
    /// Sends `payload` to `address` (`host:port`), in fragments when it
    /// exceeds a datagram. One that cannot be carried is dropped.
    pub fn send(&mut self, address: &str, payload: &[u8]) -> io::Result<()> {
        let quic = &self.connection.quic;
        let Some(max) = quic.max_datagram_size() else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "hysteria2: the server did not offer QUIC datagrams",
            ));
        };
        let Some((chunk, count)) = udp::fragments(address.len(), payload.len(), max) else {
            return Ok(());
        };
        self.packet_id = self.packet_id.wrapping_add(1);
        for i in 0..usize::from(count) {
            let part =
                &payload[(i * chunk).min(payload.len())..((i + 1) * chunk).min(payload.len())];
            let message = Message {
                session_id: self.id,
                packet_id: if count == 1 { 0 } else { self.packet_id },
                frag_id: i as u8,
                frag_count: count,
                address,
                payload: part,
            };
            udp::encode(&message, &mut self.out);
            match quic.send_datagram(self.out.split().freeze()) {
                Ok(()) | Err(quinn::SendDatagramError::TooLarge) => {}
                Err(quinn::SendDatagramError::ConnectionLost(_)) => return Err(gone()),
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("hysteria2: {e}"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// The next whole reply: `deliver` gets its source (`host:port`) and
    /// payload. Fails once the connection is gone.
    pub fn poll_recv<R>(
        &mut self,
        cx: &mut Context<'_>,
        mut deliver: impl FnMut(&str, &[u8]) -> Option<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let Some(datagram) = ready!(self.replies.poll_recv(cx)) else {
                return Poll::Ready(Err(gone()));
            };
            let Some(message) = udp::parse(&datagram) else {
                continue;
            };
            if message.session_id != self.id {
                continue;
            }
            if let Some((address, payload)) = self.defragger.push(&message) {
                if let Some(r) = deliver(address, payload) {
                    return Poll::Ready(Ok(r));
                }
            }
        }
    }
}

impl Drop for UdpSession {
    fn drop(&mut self) {
        self.connection
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}
