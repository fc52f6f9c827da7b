//! The acceptor on loopback against the client [`Connector`] of every
//! shape, with and without TLS, and against clients that misbehave.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::{
    AddressFamily, DnsSpec, Host, HostPort, SocketPolicy, StreamShape, TlsSpec, TransportSpec,
    Upstream, WsEarlyData,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;
use crate::dial::Dialer;
use crate::keepalive::{TCP_KEEPALIVE_IDLE, TCP_KEEPALIVE_INTERVAL};
use crate::resolve::Dns;
use crate::tls::tests::{client_spec, custom_ca, pki, NAME};
use crate::Connector;

const MIB: usize = 1024 * 1024;

fn limits(handshake: Duration) -> Limits {
    Limits {
        handshake_timeout: handshake,
        ..Limits::default()
    }
}

/// A listener on loopback whose every accepted socket goes through
/// `acceptor`; what each became comes out of the channel.
async fn serve(
    acceptor: Acceptor,
    limits: Limits,
) -> (SocketAddr, mpsc::UnboundedReceiver<io::Result<Accepted>>) {
    let socket = listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let listener = TcpListener::from_std(std::net::TcpListener::from(socket)).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let acceptor = Arc::new(acceptor);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (acceptor, tx, limits) = (acceptor.clone(), tx.clone(), limits.clone());
            tokio::spawn(async move {
                let _ = tx.send(acceptor.accept(socket, &limits).await);
            });
        }
    });
    (addr, rx)
}

/// Echoes every stream the socket yields until its reader ends, then shuts
/// it down; for gRPC, every call on the connection.
fn echo_all(accepted: Accepted) {
    match accepted {
        Accepted::Stream(stream) => {
            tokio::spawn(echo(stream));
        }
        Accepted::Grpc(mut connection) => {
            tokio::spawn(async move {
                while let Some(Ok(stream)) = connection.next().await {
                    tokio::spawn(echo(stream));
                }
            });
        }
    }
}

/// Writes back each read before reading on, so what was read before the
/// peer's shutdown is written before ours.
async fn echo(mut stream: Stream) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
                let _ = stream.flush().await;
            }
        }
    }
    let _ = stream.shutdown().await;
}

fn connector(port: u16, shape: StreamShape, tls: Option<TlsSpec>) -> Connector {
    let dialer = Dialer::new(
        SocketPolicy::default(),
        Arc::new(ArcSwap::from_pointee(Limits::default())),
    );
    let direct: Arc<dyn crate::resolve::Carrier> =
        Arc::new(crate::resolve::Direct::new(dialer.clone()));
    let dns = Dns::build(&DnsSpec::Single { servers: vec![] }, direct.clone(), direct).unwrap();
    let upstream = Upstream {
        server: HostPort {
            host: Host::Ip("127.0.0.1".parse().unwrap()),
            port,
        },
        transport: TransportSpec {
            shape,
            tls,
            address_family: AddressFamily::Auto,
        },
    };
    Connector::build(&upstream, dialer, dns.servers.clone()).unwrap()
}

fn ws_path(path: &str, early_data: Option<WsEarlyData>) -> StreamShape {
    StreamShape::Ws {
        path: path.into(),
        host: "cdn.example".into(),
        early_data,
    }
}

fn grpc_service(service_name: &str) -> StreamShape {
    StreamShape::Grpc {
        service_name: service_name.into(),
        authority: "grpc.example".into(),
    }
}

/// A server and a client of one shape, over TLS when `tls` is set.
struct Pair {
    server: ServerShape,
    client: StreamShape,
    tls: bool,
}

fn pairs() -> Vec<Pair> {
    let mut pairs = Vec::new();
    for tls in [false, true] {
        pairs.push(Pair {
            server: ServerShape::Tcp,
            client: if tls {
                StreamShape::Tls
            } else {
                StreamShape::Tcp
            },
            tls,
        });
        pairs.push(Pair {
            server: ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            client: ws_path("/ws?ed=2048", None),
            tls,
        });
        pairs.push(Pair {
            server: ServerShape::Grpc {
                service_name: "tunnel.Svc".into(),
            },
            client: grpc_service("tunnel.Svc"),
            tls,
        });
    }
    pairs
}

/// The acceptor and the connector of `pair`, the client trusting the
/// server's certificate.
async fn start(
    pair: &Pair,
    limits: Limits,
) -> (Connector, mpsc::UnboundedReceiver<io::Result<Accepted>>) {
    let pki = pki();
    let server_tls = pair.tls.then_some(&pki.server);
    let acceptor = Acceptor::build(&pair.server, server_tls).unwrap();
    let (addr, accepted) = serve(acceptor, limits).await;
    let client_tls = pair
        .tls
        .then(|| client_spec(NAME, custom_ca(&pki.ca_pem), &[]));
    (
        connector(addr.port(), pair.client.clone(), client_tls),
        accepted,
    )
}

pub(crate) fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| ((i * 7 + seed) % 251) as u8)
        .collect()
}

/// Writes `data` in pieces and shuts down, while reading everything back.
pub(crate) async fn round_trip<S: AsyncRead + AsyncWrite + Send + 'static>(
    stream: S,
    data: Vec<u8>,
) -> Vec<u8> {
    let (mut read, mut write) = tokio::io::split(stream);
    let writer = tokio::spawn(async move {
        for piece in data.chunks(10_000) {
            write.write_all(piece).await.unwrap();
        }
        write.flush().await.unwrap();
        write.shutdown().await.unwrap();
        write
    });
    let mut back = Vec::new();
    read.read_to_end(&mut back).await.unwrap();
    drop(writer.await.unwrap());
    back
}

fn kind(pair: &Pair) -> String {
    format!(
        "{}{}",
        pair.client.name(),
        if pair.tls { "+tls" } else { "" }
    )
}

#[tokio::test]
async fn accepted_sockets_have_nagle_off_and_keepalive_on() {
    let socket = listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let listener = TcpListener::from_std(std::net::TcpListener::from(socket)).unwrap();
    let _client = TcpStream::connect(addr).await.unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    let Accepted::Stream(mut stream) = Acceptor::build(&ServerShape::Tcp, None)
        .unwrap()
        .accept(accepted, &Limits::default())
        .await
        .unwrap()
    else {
        panic!("a tcp acceptor yields one stream");
    };
    let socket = SockRef::from(&*stream.as_plain_tcp().unwrap());
    assert!(
        socket.tcp_nodelay().unwrap(),
        "TCP_NODELAY on the accepted side"
    );
    assert!(
        socket.keepalive().unwrap(),
        "SO_KEEPALIVE on the accepted side"
    );
    assert_eq!(socket.tcp_keepalive_time().unwrap(), TCP_KEEPALIVE_IDLE);
    assert_eq!(
        socket.tcp_keepalive_interval().unwrap(),
        TCP_KEEPALIVE_INTERVAL
    );
}

#[tokio::test]
async fn every_shape_with_and_without_tls_carries_a_mebibyte_each_way() {
    for pair in pairs() {
        let (connector, mut accepted) = start(&pair, Limits::default()).await;
        let (client, accepted) = tokio::join!(connector.connect(), accepted.recv());
        echo_all(accepted.unwrap().unwrap());
        let data = pattern(2 * MIB, 3);
        let back = round_trip(client.unwrap(), data.clone()).await;
        assert_eq!(back.len(), data.len(), "{}", kind(&pair));
        assert!(
            back == data,
            "{}: the bytes came back in order",
            kind(&pair)
        );
    }
}

#[tokio::test]
async fn the_acceptor_picks_the_shapes_alpn_when_the_plan_names_none() {
    let pki = pki();
    let offer = client_spec(NAME, custom_ca(&pki.ca_pem), &["h2", "http/1.1"]);
    let client = crate::tls::TlsConnector::build(&offer, &[]).unwrap();
    for (shape, alpn) in [
        (ServerShape::Tcp, None),
        (
            ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            Some(&b"http/1.1"[..]),
        ),
        (
            ServerShape::Grpc {
                service_name: "svc".into(),
            },
            Some(b"h2"),
        ),
    ] {
        let acceptor = Acceptor::build(&shape, Some(&pki.server)).unwrap();
        let (addr, _accepted) = serve(acceptor, Limits::default()).await;
        let tcp = TcpStream::connect(addr).await.unwrap();
        let tls = client.connect(tcp).await.unwrap();
        assert_eq!(
            tls.ssl().unwrap().selected_alpn_protocol(),
            alpn,
            "{shape:?}"
        );
    }
}

#[tokio::test]
async fn a_shutdown_reaches_the_peer_as_the_end_of_its_reads() {
    for pair in pairs() {
        let (connector, mut accepted) = start(&pair, Limits::default()).await;
        let (client, accepted) = tokio::join!(connector.connect(), accepted.recv());
        let mut client = client.unwrap();
        let mut server = match accepted.unwrap().unwrap() {
            Accepted::Stream(stream) => stream,
            Accepted::Grpc(mut connection) => {
                let stream = connection.next().await.unwrap().unwrap();
                tokio::spawn(async move { while connection.next().await.is_some() {} });
                stream
            }
        };
        // The client's half first: the server reads it to its end.
        client.write_all(b"request").await.unwrap();
        client.flush().await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"request", "{}", kind(&pair));
        // The other direction runs on after it, over a WebSocket too: its
        // close frame answers the client's only when the server shuts down.
        let answer = pattern(MIB, 5);
        let mut back = Vec::new();
        let (_, read) = tokio::join!(
            async {
                server.write_all(&answer).await.unwrap();
                server.flush().await.unwrap();
                server.shutdown().await.unwrap();
            },
            client.read_to_end(&mut back)
        );
        read.unwrap();
        assert!(
            back == answer,
            "{}: the answer after the half-close",
            kind(&pair)
        );
    }
}

#[tokio::test]
async fn a_server_shutdown_over_ws_is_a_close_frame_the_client_reads_as_the_end() {
    for tls in [false, true] {
        let pair = Pair {
            server: ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            client: ws_path("/ws", None),
            tls,
        };
        let (connector, mut accepted) = start(&pair, Limits::default()).await;
        let (client, accepted) = tokio::join!(connector.connect(), accepted.recv());
        let mut client = client.unwrap();
        let Accepted::Stream(mut server) = accepted.unwrap().unwrap() else {
            panic!("ws yields one stream");
        };
        let answer = pattern(MIB, 9);
        let mut back = Vec::new();
        let (_, read) = tokio::join!(
            async {
                server.write_all(&answer).await.unwrap();
                server.shutdown().await.unwrap();
            },
            client.read_to_end(&mut back)
        );
        read.unwrap();
        assert!(back == answer, "{}", kind(&pair));
    }
}

#[tokio::test]
async fn ws_early_data_arrives_as_the_streams_first_bytes() {
    for tls in [false, true] {
        let early = WsEarlyData {
            max: 2048,
            header: "Sec-WebSocket-Protocol".into(),
        };
        let pair = Pair {
            server: ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            client: ws_path("/ws?ed=2048", Some(early)),
            tls,
        };
        let (connector, mut accepted) = start(&pair, Limits::default()).await;
        let first = pattern(3000, 1);
        let (client, accepted) = tokio::join!(connector.connect_sending(&first), accepted.recv());
        let (mut client, sent) = client.unwrap();
        assert_eq!(sent, 2048, "the allowance rode in the upgrade");
        client.write_all(&first[sent..]).await.unwrap();
        client.write_all(b" and after").await.unwrap();
        client.shutdown().await.unwrap();
        let Accepted::Stream(mut server) = accepted.unwrap().unwrap() else {
            panic!("ws yields one stream");
        };
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), first.len() + 10);
        assert!(got[..first.len()] == first[..], "the early bytes first");
        assert_eq!(&got[first.len()..], b" and after");
    }
}

#[tokio::test]
async fn a_wrong_ws_path_gets_a_404_and_no_websocket() {
    let pair = Pair {
        server: ServerShape::Ws {
            path: "/ws".into(),
            host: None,
        },
        client: ws_path("/elsewhere", None),
        tls: false,
    };
    let (connector, mut accepted) = start(&pair, Limits::default()).await;
    let (client, accepted) = tokio::join!(connector.connect(), accepted.recv());
    let error = client.err().unwrap();
    assert_eq!(
        error.to_string(),
        "websocket: the server answered the upgrade with 404"
    );
    let error = accepted.unwrap().err().unwrap();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert_eq!(error.to_string(), "websocket: no upgrade at \"/elsewhere\"");
}

#[tokio::test]
async fn a_ws_upgrade_naming_the_host_is_served_and_another_host_refused_as_a_wrong_path() {
    let server = ServerShape::Ws {
        path: "/ws".into(),
        host: Some("cdn.example".into()),
    };
    for tls in [false, true] {
        for (host, served) in [
            ("cdn.example", true),
            ("CDN.example", true),
            ("other.example", false),
        ] {
            let pair = Pair {
                server: server.clone(),
                client: StreamShape::Ws {
                    path: "/ws".into(),
                    host: host.into(),
                    early_data: None,
                },
                tls,
            };
            let (connector, mut accepted) = start(&pair, Limits::default()).await;
            let (client, accepted) = tokio::join!(connector.connect(), accepted.recv());
            let accepted = accepted.unwrap();
            if served {
                echo_all(accepted.unwrap());
                let data = pattern(64 * 1024, 2);
                let back = round_trip(client.unwrap(), data.clone()).await;
                assert!(back == data, "{host} over {}", kind(&pair));
                continue;
            }
            assert_eq!(
                client.err().unwrap().to_string(),
                "websocket: the server answered the upgrade with 404",
                "{host} over {}",
                kind(&pair)
            );
            let error = accepted.err().unwrap();
            assert_eq!(error.kind(), io::ErrorKind::NotFound);
            assert_eq!(
                error.to_string(),
                format!("websocket: no upgrade for Host {host:?}")
            );
        }
    }
}

/// Reads one HTTP answer from `tcp`: its head, then as many bytes as its
/// Content-Length says (the bytes of a 101 end at its head).
async fn read_answer(tcp: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(
            tcp.read(&mut byte).await.unwrap(),
            1,
            "the answer ended early"
        );
        answer.push(byte[0]);
    }
    let head = String::from_utf8(answer.clone()).unwrap();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: "))
        .map_or(0, |n| n.parse().unwrap());
    let mut body = vec![0u8; length];
    tcp.read_exact(&mut body).await.unwrap();
    answer.extend_from_slice(&body);
    String::from_utf8(answer).unwrap()
}

/// `answer` with its Date line's value replaced by `*`.
fn undated(answer: &str) -> String {
    answer
        .split("\r\n")
        .map(|line| {
            if line.starts_with("Date: ") {
                "Date: *"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

const UPGRADE: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                       Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

#[tokio::test]
async fn a_prober_gets_the_same_bytes_for_a_wrong_host_as_for_a_wrong_path() {
    let acceptor = Acceptor::build(
        &ServerShape::Ws {
            path: "/ws".into(),
            host: Some("cdn.example".into()),
        },
        None,
    )
    .unwrap();
    let (addr, _accepted) = serve(acceptor, Limits::default()).await;
    let mut answers = Vec::new();
    for request in [
        format!("GET /elsewhere HTTP/1.1\r\nHost: cdn.example\r\n{UPGRADE}"),
        format!("GET /ws HTTP/1.1\r\nHost: prober.example\r\n{UPGRADE}"),
        "GET /ws HTTP/1.1\r\nHost: prober.example\r\n\r\n".to_owned(),
    ] {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(request.as_bytes()).await.unwrap();
        answers.push(undated(&read_answer(&mut tcp).await));
    }
    assert_eq!(
        answers[0],
        "HTTP/1.1 404 Not Found\r\nDate: *\r\nContent-Length: 0\r\n\r\n"
    );
    for answer in &answers[1..] {
        assert_eq!(answer, &answers[0]);
    }
}

#[tokio::test]
async fn a_refused_request_keeps_the_connection_and_pipelined_requests_are_each_answered() {
    let acceptor = Acceptor::build(
        &ServerShape::Ws {
            path: "/ws".into(),
            host: None,
        },
        None,
    )
    .unwrap();
    let (addr, mut accepted) = serve(acceptor, Limits::default()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // Three requests in one write, the second with a body, then an upgrade.
    let requests = format!(
        "GET / HTTP/1.1\r\nHost: cdn.example\r\n\r\n\
         POST /ws HTTP/1.1\r\nHost: cdn.example\r\nContent-Length: 5\r\n\r\nhello\
         GET /ws HTTP/1.1\r\nHost: cdn.example\r\n\r\n\
         GET /ws HTTP/1.1\r\nHost: cdn.example\r\n{UPGRADE}"
    );
    tcp.write_all(requests.as_bytes()).await.unwrap();
    let bad_request = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
                       Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n\
                       Date: *\r\nContent-Length: 12\r\n\r\nBad Request\n";
    for want in [
        "HTTP/1.1 404 Not Found\r\nDate: *\r\nContent-Length: 0\r\n\r\n",
        bad_request,
        bad_request,
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
    ] {
        assert_eq!(undated(&read_answer(&mut tcp).await), want);
    }
    let Accepted::Stream(Stream::Ws(_)) = accepted.recv().await.unwrap().unwrap() else {
        panic!("the upgrade after the refusals is a websocket");
    };
}

#[tokio::test]
async fn http_1_0_or_connection_close_is_answered_and_then_closed() {
    let acceptor = Acceptor::build(
        &ServerShape::Ws {
            path: "/ws".into(),
            host: None,
        },
        None,
    )
    .unwrap();
    let (addr, mut accepted) = serve(acceptor, Limits::default()).await;
    for (request, want) in [
        (
            "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n",
            "HTTP/1.0 404 Not Found\r\nDate: *\r\nContent-Length: 0\r\n\r\n",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\nDate: *\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
    ] {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(request.as_bytes()).await.unwrap();
        // One answer, then the end: the request behind it is not read.
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await.unwrap();
        assert_eq!(undated(&String::from_utf8(answer).unwrap()), want);
        let error = accepted.recv().await.unwrap().err().unwrap();
        assert_eq!(error.to_string(), "websocket: no upgrade at \"/\"");
    }
}

#[tokio::test]
async fn a_client_that_sends_nothing_hits_the_deadline_with_the_layers_text() {
    let limit = Duration::from_millis(300);
    for (shape, tls, text) in [
        (ServerShape::Tcp, true, "tls handshake timed out"),
        (
            ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            false,
            "websocket handshake timed out",
        ),
        (
            ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            true,
            "tls handshake timed out",
        ),
        (
            ServerShape::Grpc {
                service_name: "svc".into(),
            },
            false,
            "grpc handshake timed out",
        ),
    ] {
        let pki = pki();
        let acceptor = Acceptor::build(&shape, tls.then_some(&pki.server)).unwrap();
        let (addr, mut accepted) = serve(acceptor, limits(limit)).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        let error = accepted.recv().await.unwrap().err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(error.to_string(), text);
    }
}

#[tokio::test]
async fn a_client_silent_after_tls_hits_the_deadline_of_the_layer_above() {
    // Long enough for a TLS handshake on loopback on a loaded machine; the
    // client then says nothing.
    let limit = Duration::from_secs(3);
    for (shape, text) in [
        (
            ServerShape::Ws {
                path: "/ws".into(),
                host: None,
            },
            "websocket handshake timed out",
        ),
        (
            ServerShape::Grpc {
                service_name: "svc".into(),
            },
            "grpc handshake timed out",
        ),
    ] {
        let pki = pki();
        let acceptor = Acceptor::build(&shape, Some(&pki.server)).unwrap();
        let (addr, mut accepted) = serve(acceptor, limits(limit)).await;
        let tls =
            crate::tls::TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[])
                .unwrap();
        let _silent = tls
            .connect(TcpStream::connect(addr).await.unwrap())
            .await
            .unwrap();
        let error = accepted.recv().await.unwrap().err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(error.to_string(), text);
    }
}

#[tokio::test]
async fn a_grpc_client_that_stops_answering_pings_is_dropped() {
    let acceptor = Acceptor::build(
        &ServerShape::Grpc {
            service_name: "svc".into(),
        },
        None,
    )
    .unwrap()
    .with_ping_interval(Duration::from_millis(50));
    // A pong is due within the handshake limit: long enough that a client
    // that does answer is never late on a loaded machine.
    let (addr, mut accepted) = serve(acceptor, limits(Duration::from_secs(2))).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut send, mut connection) = h2::client::handshake(tcp).await.unwrap();
    let Accepted::Grpc(mut server) = accepted.recv().await.unwrap().unwrap() else {
        panic!("grpc yields a connection");
    };
    let request = http::Request::post("http://grpc.example/svc/Tun")
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let (response, _body) = send.send_request(request, false).unwrap();
    let _call = tokio::select! {
        call = server.next() => call.unwrap().unwrap(),
        _ = &mut connection => panic!("the connection ended"),
    };
    // The client drives its connection until its call is answered, then
    // stops: it reads nothing more, so no ping of the server's is answered.
    let answered = tokio::select! {
        response = response => response.unwrap(),
        _ = &mut connection => panic!("the connection ended"),
        _ = server.next() => panic!("the connection failed while the client answered"),
    };
    assert_eq!(answered.status(), 200);
    let Some(Err(error)) = server.next().await else {
        panic!("the connection fails");
    };
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(
        error.to_string(),
        "grpc: the client stopped answering pings"
    );
    assert!(server.next().await.is_none(), "over after the error");
}

#[tokio::test]
async fn an_http1_request_to_the_grpc_acceptor_fails_its_handshake_and_is_closed() {
    let acceptor = Acceptor::build(
        &ServerShape::Grpc {
            service_name: "svc".into(),
        },
        None,
    )
    .unwrap();
    let (addr, mut accepted) = serve(acceptor, Limits::default()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: grpc.example\r\n\r\n")
        .await
        .unwrap();
    let error = accepted.recv().await.unwrap().err().unwrap();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted);
    assert_eq!(
        error.to_string(),
        "grpc connection closed on the client's error: unspecific protocol error detected"
    );
    // What the server sent before closing (its SETTINGS) does not matter.
    let _ = tcp.read_to_end(&mut Vec::new()).await;
}
