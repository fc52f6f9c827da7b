//! The server side: a QUIC endpoint on one UDP socket, the authentication
//! of each connection (once, over HTTP/3; any other request, a wrong
//! password's included, is answered as a web server would: see
//! [`masquerade`](crate::masquerade)), then proxy streams.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use quinn::{AsyncUdpSocket, Endpoint, EndpointConfig, Runtime, TokioRuntime};

use crate::congestion::{server_rates, CongestionFactory};
use crate::salamander::{Salamander, SalamanderSocket};
use crate::{auth, masquerade, tcp, transport, QuicStream};

/// What the server accepts.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub passwords: Vec<String>,
    /// Whether UDP is relayed (announced in the authentication answer).
    pub udp: bool,
    /// Bits a second this side sends at most and receives at most; 0: no
    /// limit (see [`server_rates`](crate::congestion::server_rates)).
    pub up_bps: u64,
    pub down_bps: u64,
    /// The web server a request that does not authenticate is relayed to;
    /// `None` answers 404.
    pub masquerade: Option<std::net::SocketAddr>,
}

/// Proxy streams an authenticated connection may have open at once.
const MAX_STREAMS: u32 = 1024;
/// Streams of each direction a connection may have open before it
/// authenticates: HTTP/3's requests (the masquerade's too) and its control,
/// QPACK and grease streams. quinn-proto sets up the state of every stream
/// the peer may open when it accepts a connection: with 1,024 granted at
/// once a handshake that never completes held 134 KiB, with 16 it holds
/// 49 KiB (the runtime's resident memory with 250 pending, a debug build).
const STREAMS_BEFORE_AUTH: u32 = 16;

/// A QUIC endpoint serving Hysteria 2 on one UDP socket. Each connection
/// is accepted with a transport of its own, so each has its own
/// congestion rate.
pub struct Server {
    endpoint: Endpoint,
    crypto: Arc<QuicServerConfig>,
}

impl Server {
    /// Serves on `socket` with `tls`, Salamander when `obfs` is set.
    pub fn bind(
        socket: std::net::UdpSocket,
        tls: rustls::ServerConfig,
        obfs: Option<Salamander>,
    ) -> io::Result<Server> {
        let runtime = Arc::new(TokioRuntime);
        let mut socket: Arc<dyn AsyncUdpSocket> = runtime.wrap_udp_socket(socket)?;
        if let Some(salamander) = obfs {
            socket = Arc::new(SalamanderSocket::new(socket, salamander));
        }
        let crypto = Arc::new(
            QuicServerConfig::try_from(tls)
                .map_err(|e| io::Error::other(format!("hysteria2: {e}")))?,
        );
        let endpoint = Endpoint::new_with_abstract_socket(
            EndpointConfig::default(),
            Some(quinn::ServerConfig::with_crypto(crypto.clone())),
            socket,
            runtime,
        )?;
        Ok(Server { endpoint, crypto })
    }

    /// The next connection attempt; `None` once the endpoint is closed.
    pub async fn accept(&self) -> Option<quinn::Incoming> {
        self.endpoint.accept().await
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Completes the QUIC handshake of `incoming` and authenticates it.
    pub async fn handshake(
        &self,
        incoming: quinn::Incoming,
        config: &ServerConfig,
    ) -> io::Result<Session> {
        let rate = Arc::new(AtomicU64::new(0));
        let mut server = quinn::ServerConfig::with_crypto(self.crypto.clone());
        let mut transport = transport::config(CongestionFactory { rate: rate.clone() });
        transport
            .max_concurrent_bidi_streams(STREAMS_BEFORE_AUTH.into())
            .max_concurrent_uni_streams(STREAMS_BEFORE_AUTH.into());
        server.transport_config(Arc::new(transport));
        let quic = incoming
            .accept_with(Arc::new(server))
            .map_err(|e| {
                io::Error::new(io::ErrorKind::ConnectionAborted, format!("hysteria2: {e}"))
            })?
            .await?;
        authenticate(quic, config, &rate).await
    }
}

/// An authenticated connection.
pub struct Session {
    quic: quinn::Connection,
    /// The password it authenticated with.
    password: String,
    rates: crate::congestion::ServerRates,
    /// Kept: h3 closes the connection when it is dropped.
    _h3: h3::server::Connection<h3_quinn::Connection, Bytes>,
}

fn h3_error(e: &dyn std::fmt::Display) -> io::Error {
    io::Error::other(format!("hysteria2: http/3: {e}"))
}

/// Serves HTTP/3 on `quic` until a request authenticates; every other
/// request is answered by the masquerade. `rate` is the connection's
/// congestion rate, set from the client's announced receive rate. Until
/// then the client's datagrams are read and dropped: quinn would otherwise
/// keep them for the UDP relay (60,000 of 1,000 bytes from a client that
/// never authenticates grew the runtime by 7 MiB; dropped, by 1.5 MiB).
async fn authenticate(
    quic: quinn::Connection,
    config: &ServerConfig,
    rate: &AtomicU64,
) -> io::Result<Session> {
    let drop_datagrams = async {
        while quic.read_datagram().await.is_ok() {}
        // The connection ended: the HTTP/3 side says how.
        std::future::pending::<std::convert::Infallible>().await
    };
    tokio::select! {
        biased;
        never = drop_datagrams => match never {},
        session = serve_until_authenticated(&quic, config, rate) => session,
    }
}

async fn serve_until_authenticated(
    quic: &quinn::Connection,
    config: &ServerConfig,
    rate: &AtomicU64,
) -> io::Result<Session> {
    let mut h3 = h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(quic.clone()))
        .await
        .map_err(|e| h3_error(&e))?;
    loop {
        let Some(resolver) = h3.accept().await.map_err(|e| h3_error(&e))? else {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "hysteria2: the client left before authenticating",
            ));
        };
        let (request, mut stream) = resolver.resolve_request().await.map_err(|e| h3_error(&e))?;
        let accepted = auth::parse_request(&request).filter(|a| config.passwords.contains(&a.auth));
        let Some(attempt) = accepted else {
            let answered = tokio::time::timeout(
                masquerade::REQUEST_TIMEOUT,
                masquerade::answer(request, stream, config.masquerade),
            )
            .await;
            match answered {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("{e}"),
                Err(_) => tracing::debug!("hysteria2: masquerade: the request timed out"),
            }
            continue;
        };
        // Raised before the answer, so the client can open its proxy
        // streams the moment it is authenticated.
        quic.set_max_concurrent_bi_streams(MAX_STREAMS.into());
        let rates = server_rates(attempt.rx, config.up_bps / 8, config.down_bps / 8);
        rate.store(rates.send, Ordering::Relaxed);
        let mut response = http::Response::builder()
            .status(http::StatusCode::from_u16(auth::STATUS_OK).map_err(|e| h3_error(&e))?)
            .body(())
            .map_err(|e| h3_error(&e))?;
        *response.headers_mut() = auth::reply_headers(config.udp, Some(rates.receive));
        stream
            .send_response(response)
            .await
            .map_err(|e| h3_error(&e))?;
        stream.finish().await.map_err(|e| h3_error(&e))?;
        return Ok(Session {
            quic: quic.clone(),
            password: attempt.auth,
            rates,
            _h3: h3,
        });
    }
}

impl Session {
    /// The next proxy stream, its request not read yet; `None` once the
    /// connection has ended.
    pub async fn accept(&self) -> Option<Pending> {
        let (send, recv) = self.quic.accept_bi().await.ok()?;
        Some(Pending { send, recv })
    }

    /// The datagrams of this connection, for a UDP relay.
    pub fn connection(&self) -> &quinn::Connection {
        &self.quic
    }

    /// The password the client authenticated with.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The rates the authentication settled on.
    pub fn rates(&self) -> crate::congestion::ServerRates {
        self.rates
    }
}

/// A proxy stream whose TCPRequest is still to be read.
pub struct Pending {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
}

impl Pending {
    /// Reads the TCPRequest: the address asked for, and the stream.
    pub async fn request(mut self) -> io::Result<(String, ServerStream)> {
        let (address, ahead) = read_request(&mut self.recv).await?;
        Ok((address, QuicStream::new(self.send, self.recv, ahead, ())))
    }
}

async fn read_request(recv: &mut quinn::RecvStream) -> io::Result<(String, Vec<u8>)> {
    let limit = 8 + 8 + tcp::MAX_ADDRESS_LEN as usize + 8 + tcp::MAX_PADDING_LEN as usize;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some((address, used)) = tcp::decode_request(&buf)? {
            buf.drain(..used);
            return Ok((address, buf));
        }
        if buf.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "hysteria2: the request is too long",
            ));
        }
        match recv.read(&mut chunk).await? {
            Some(n) => buf.extend_from_slice(&chunk[..n]),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "hysteria2: the client closed the stream before its request",
                ))
            }
        }
    }
}

/// A proxy stream the server accepted: answered with [`respond`] once the
/// destination is dialed (or refused), then relayed.
///
/// [`respond`]: ServerStream::respond
/// A proxied stream on the server, its request read.
pub type ServerStream = QuicStream<()>;

impl ServerStream {
    /// Writes the TCPResponse: `ok`, or a refusal with `message`, after
    /// which the stream is closed.
    pub async fn respond(&mut self, ok: bool, message: &str) -> io::Result<()> {
        let mut out = Vec::with_capacity(3 + message.len());
        tcp::encode_response(ok, message, &[], &mut out);
        self.send.write_all(&out).await?;
        if !ok {
            let _ = self.send.finish();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{self, ClientConfig};
    use crate::tls::{self, Verify};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PASSWORD: &str = "right";

    fn tls_server() -> rustls::ServerConfig {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        tls::server_config(
            cert.cert.pem().as_bytes(),
            cert.key_pair.serialize_pem().as_bytes(),
            &["h3".into()],
        )
        .unwrap()
    }

    /// A server on 127.0.0.1 that echoes every stream it accepts, refusing
    /// streams to port 9 with "closed port".
    fn serve(obfs: Option<Salamander>) -> std::net::SocketAddr {
        serve_masquerading(obfs, None)
    }

    fn serve_masquerading(
        obfs: Option<Salamander>,
        masquerade: Option<std::net::SocketAddr>,
    ) -> std::net::SocketAddr {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let server = Arc::new(Server::bind(socket, tls_server(), obfs).unwrap());
        let config = ServerConfig {
            passwords: vec![PASSWORD.into()],
            udp: true,
            up_bps: 0,
            down_bps: 0,
            masquerade,
        };
        tokio::spawn(async move {
            while let Some(incoming) = server.accept().await {
                let (config, server) = (config.clone(), server.clone());
                tokio::spawn(async move {
                    let Ok(session) = server.handshake(incoming, &config).await else {
                        return;
                    };
                    while let Some(pending) = session.accept().await {
                        tokio::spawn(async move {
                            let Ok((address, mut stream)) = pending.request().await else {
                                return;
                            };
                            if address.ends_with(":9") {
                                let _ = stream.respond(false, "closed port").await;
                                return;
                            }
                            stream.respond(true, "").await.unwrap();
                            let mut buf = [0u8; 4096];
                            loop {
                                match stream.read(&mut buf).await {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => stream.write_all(&buf[..n]).await.unwrap(),
                                }
                            }
                            let _ = stream.shutdown().await;
                        });
                    }
                });
            }
        });
        addr
    }

    fn client_config(password: &str, obfs: Option<Salamander>) -> ClientConfig {
        ClientConfig {
            server_name: "localhost".into(),
            password: password.into(),
            obfs,
            up_bps: 0,
            down_bps: 0,
            max_concurrent_streams: 2,
        }
    }

    async fn dial(
        server: std::net::SocketAddr,
        config: &ClientConfig,
    ) -> io::Result<client::Connection> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tls = tls::client_config(&Verify::Insecure, &["h3".into()]).unwrap();
        client::connect(socket, server, config, tls).await
    }

    async fn echo_through(connection: &Arc<client::Connection>) {
        let mut stream = connection.open_tcp("example.com:80").await.unwrap();
        let payload: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        stream.write_all(&payload).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut back = Vec::new();
        stream.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, payload);
    }

    #[tokio::test]
    async fn ours_against_ours_authenticates_once_and_carries_streams() {
        let server = serve(None);
        let connection = Arc::new(dial(server, &client_config(PASSWORD, None)).await.unwrap());
        echo_through(&connection).await;
        echo_through(&connection).await;
        let refused = connection.open_tcp("example.com:9").await.err().unwrap();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(
            refused.to_string(),
            "hysteria2: the server refused the stream: closed port"
        );
        let held = (
            connection.open_tcp("example.com:80").await.unwrap(),
            connection.open_tcp("example.com:80").await.unwrap(),
        );
        let full = connection.open_tcp("example.com:80").await.err().unwrap();
        assert_eq!(
            full.to_string(),
            "hysteria2: connection is at its concurrent-stream limit"
        );
        drop(held);
        assert!(connection.open_udp().is_ok());
    }

    #[tokio::test]
    async fn ours_against_ours_with_salamander() {
        let key = Salamander::new(b"obfs");
        let server = serve(Some(key.clone()));
        let connection = Arc::new(
            dial(server, &client_config(PASSWORD, Some(key)))
                .await
                .unwrap(),
        );
        echo_through(&connection).await;
    }

    #[tokio::test]
    async fn a_wrong_password_is_answered_404_like_any_web_server() {
        let server = serve(None);
        let err = dial(server, &client_config("wrong", None))
            .await
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            err.to_string(),
            "hysteria2: authentication failed: the server answered 404"
        );
    }

    /// A web server of the test's own: it reads one request head, hands it
    /// to the test, and answers `answer`.
    async fn web_server(
        answer: &'static [u8],
    ) -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (heads, seen) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            for _ in 0..4 {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(byte[0]);
                }
                let _ = heads
                    .send(String::from_utf8_lossy(&head).into_owned())
                    .await;
                let _ = conn.write_all(answer).await;
                let _ = conn.shutdown().await;
            }
        });
        (addr, seen)
    }

    /// A plain HTTP/3 client connected to `server`: its QUIC connection
    /// and its request sender.
    async fn h3_client(
        server: std::net::SocketAddr,
    ) -> (
        quinn::Connection,
        h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    ) {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let tls = tls::client_config(&Verify::Insecure, &["h3".into()]).unwrap();
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let quic = endpoint
            .connect(server, "localhost")
            .unwrap()
            .await
            .unwrap();
        let (mut driver, h3) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _closed = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        (quic, h3)
    }

    /// Sends `request` over plain HTTP/3 to `server`: the status, the
    /// headers and the body it got.
    async fn h3_request(
        server: std::net::SocketAddr,
        request: http::Request<()>,
    ) -> (http::StatusCode, http::HeaderMap, Vec<u8>) {
        use bytes::Buf;
        let (_quic, mut h3) = h3_client(server).await;
        let mut stream = h3.send_request(request).await.unwrap();
        stream.finish().await.unwrap();
        let response = stream.recv_response().await.unwrap();
        let mut body = Vec::new();
        while let Some(mut data) = stream.recv_data().await.unwrap() {
            while data.has_remaining() {
                let chunk = data.chunk();
                body.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
        (response.status(), response.headers().clone(), body)
    }

    #[tokio::test]
    async fn a_wrong_password_gets_the_masquerades_page() {
        let page: &[u8] = b"HTTP/1.1 200 OK\r\nServer: tiny\r\nConnection: close\r\nContent-Length: 19\r\n\r\n<h1>it works!</h1>\n";
        let (web, mut heads) = web_server(page).await;
        let server = serve_masquerading(None, Some(web));
        let wrong = auth::request("wrong", 0).unwrap();
        let (status, headers, body) = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            h3_request(server, wrong),
        )
        .await
        .unwrap();
        assert_eq!(status, http::StatusCode::OK);
        assert_eq!(body, b"<h1>it works!</h1>\n");
        assert_eq!(headers["server"], "tiny");
        assert!(!headers.contains_key("connection"));
        let head = heads.recv().await.unwrap();
        assert!(
            head.starts_with("POST /auth HTTP/1.1\r\nHost: hysteria\r\n"),
            "{head}"
        );

        // Our client, refused the same way, fails as against any web server.
        let err = dial(server, &client_config("wrong", None))
            .await
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "hysteria2: authentication failed: the server answered 200"
        );
    }

    #[tokio::test]
    async fn any_other_request_is_relayed_too_chunked_answers_included() {
        let page: &[u8] =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnope\r\n0\r\n\r\n";
        let (web, mut heads) = web_server(page).await;
        let server = serve_masquerading(None, Some(web));
        let get = http::Request::get("https://example.com/robots.txt")
            .body(())
            .unwrap();
        let (status, _, body) = h3_request(server, get).await;
        assert_eq!(
            (status, body.as_slice()),
            (http::StatusCode::NOT_FOUND, &b"nope"[..])
        );
        let head = heads.recv().await.unwrap();
        assert!(
            head.starts_with("GET /robots.txt HTTP/1.1\r\nHost: example.com\r\n"),
            "{head}"
        );
        // The right password still authenticates on the same server.
        let connection = Arc::new(dial(server, &client_config(PASSWORD, None)).await.unwrap());
        echo_through(&connection).await;
    }

    #[tokio::test]
    async fn a_masquerade_that_is_down_is_a_502() {
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let web = gone.local_addr().unwrap();
        drop(gone);
        let server = serve_masquerading(None, Some(web));
        let get = http::Request::get("https://example.com/").body(()).unwrap();
        let (status, _, body) = h3_request(server, get).await;
        assert_eq!(status, http::StatusCode::BAD_GATEWAY);
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn datagrams_sent_before_authentication_are_read_and_dropped() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let server = Server::bind(socket, tls_server(), None).unwrap();
        let config = ServerConfig {
            passwords: vec![PASSWORD.into()],
            udp: true,
            up_bps: 0,
            down_bps: 0,
            masquerade: None,
        };
        // The first datagram the authenticated session reads, and the
        // session, kept open.
        let first = tokio::spawn(async move {
            let incoming = server.accept().await.unwrap();
            let session = server.handshake(incoming, &config).await.unwrap();
            let datagram = session.connection().read_datagram().await.unwrap();
            (datagram, session)
        });
        let (quic, mut h3) = h3_client(addr).await;
        // A wrong password first: still not authenticated.
        for i in 0..64 {
            quic.send_datagram(format!("early {i}").into()).unwrap();
        }
        let mut wrong = h3
            .send_request(auth::request("wrong", 0).unwrap())
            .await
            .unwrap();
        wrong.finish().await.unwrap();
        assert_eq!(wrong.recv_response().await.unwrap().status(), 404);
        for i in 64..128 {
            quic.send_datagram(format!("early {i}").into()).unwrap();
        }
        let mut right = h3
            .send_request(auth::request(PASSWORD, 0).unwrap())
            .await
            .unwrap();
        right.finish().await.unwrap();
        let status = right.recv_response().await.unwrap().status();
        assert_eq!(status.as_u16(), auth::STATUS_OK);
        quic.send_datagram(Bytes::from_static(b"late")).unwrap();
        let (first, _session) = tokio::time::timeout(std::time::Duration::from_secs(10), first)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&first), "late");
    }

    #[tokio::test]
    async fn a_connection_may_open_sixteen_streams_before_it_authenticates_and_1024_after() {
        let server = serve(None);
        let wait = std::time::Duration::from_secs(10);
        let (quic, _h3) = h3_client(server).await;
        let mut held = Vec::new();
        for _ in 0..STREAMS_BEFORE_AUTH {
            held.push(quic.open_bi().await.unwrap());
        }
        let more = tokio::time::timeout(std::time::Duration::from_millis(300), quic.open_bi());
        assert!(more.await.is_err(), "a 17th stream before authentication");

        let (quic, mut h3) = h3_client(server).await;
        let mut auth = h3
            .send_request(auth::request(PASSWORD, 0).unwrap())
            .await
            .unwrap();
        auth.finish().await.unwrap();
        let status = auth.recv_response().await.unwrap().status();
        assert_eq!(status.as_u16(), auth::STATUS_OK);
        // The authentication took one of the 1,024.
        let opened = tokio::time::timeout(wait, async {
            let mut held = Vec::new();
            for _ in 1..MAX_STREAMS {
                held.push(quic.open_bi().await.unwrap());
            }
            held.len()
        });
        assert_eq!(opened.await.unwrap(), 1023);
    }
}
