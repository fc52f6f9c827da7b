//! The server's connection against h2's client on loopback: the client's
//! own gun stream on calls it opens by hand, so that several share one
//! connection and some go where they should not.

use std::net::SocketAddr;

use h2::client::SendRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::acceptor::tests::{pattern, round_trip};
use etemenanki_proto::gun::{self, Decoder, Step};

fn limits(handshake: Duration, idle: Duration) -> Limits {
    Limits {
        handshake_timeout: handshake,
        relay_idle_timeout: idle,
        ..Limits::default()
    }
}

/// A server for the service `svc` on one accepted socket.
async fn server(limits: Limits) -> (SocketAddr, tokio::task::JoinHandle<GrpcConnection>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let deadline = Instant::now() + limits.handshake_timeout;
        GrpcServer::new("svc")
            .accept(Stream::Tcp(tcp), &limits, deadline)
            .await
            .unwrap()
    });
    (addr, accept)
}

/// Echoes every call the connection yields; returns how many it yielded.
fn echo_calls(mut connection: GrpcConnection) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut calls = 0;
        while let Some(Ok(mut stream)) = connection.next().await {
            calls += 1;
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    stream.write_all(&buf[..n]).await.unwrap();
                }
                stream.shutdown().await.unwrap();
            });
        }
        calls
    })
}

/// An h2 client connection, driven by a task of its own.
async fn client(addr: SocketAddr) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    send
}

fn request(path: &str, content_type: &str) -> Request<()> {
    Request::post(format!("http://grpc.example{path}"))
        .header(CONTENT_TYPE, content_type)
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// A call to `path` as the client transport opens one, as its stream.
async fn call(send: &SendRequest<Bytes>, path: &str) -> GrpcStream {
    let mut send = send.clone().ready().await.unwrap();
    let (response, body) = send
        .send_request(request(path, "application/grpc"), false)
        .unwrap();
    let addrs = Addrs {
        local: "127.0.0.1:1".parse().unwrap(),
        peer: "127.0.0.1:2".parse().unwrap(),
    };
    GrpcStream::unpooled(response, body, addrs)
}

/// The answer to one call to `path` with `content_type`, sent with the
/// client's half left open, as a tunnel's call is: its head, and whether
/// it ended the stream.
async fn answer_to(
    send: &SendRequest<Bytes>,
    path: &str,
    content_type: &str,
) -> (http::response::Parts, bool) {
    let mut send = send.clone().ready().await.unwrap();
    let (response, _body) = send
        .send_request(request(path, content_type), false)
        .unwrap();
    let (head, body) = response.await.expect("an answer, not a reset").into_parts();
    (head, body.is_end_stream())
}

#[tokio::test]
async fn a_call_elsewhere_is_answered_as_grpc_go_answers_it_and_the_connection_goes_on() {
    let (addr, connection) = server(Limits::default()).await;
    let send = client(addr).await;
    let calls = echo_calls(connection.await.unwrap());
    for (path, content_type, status, grpc_status, message) in [
        (
            "/other/Tun",
            "application/grpc",
            200,
            "12",
            "unknown service other",
        ),
        (
            "/other/TunMulti",
            "application/grpc",
            200,
            "12",
            "unknown service other",
        ),
        (
            "/svc/Tunnel",
            "application/grpc",
            200,
            "12",
            "unknown method Tunnel for service svc",
        ),
        (
            "/svc/Tun",
            "text/plain",
            415,
            "3",
            "invalid gRPC request content-type \"text/plain\"",
        ),
        (
            "/svc/TunMulti",
            "text/plain",
            415,
            "3",
            "invalid gRPC request content-type \"text/plain\"",
        ),
    ] {
        let (head, ended) = answer_to(&send, path, content_type).await;
        assert_eq!(head.status, status, "{path}");
        assert_eq!(head.headers[CONTENT_TYPE], "application/grpc", "{path}");
        assert_eq!(head.headers["grpc-status"], grpc_status, "{path}");
        assert_eq!(head.headers["grpc-message"], message, "{path}");
        assert!(
            ended,
            "{path}: trailers-only, the stream ended with its head"
        );
    }
    let data = pattern(1024 * 1024, 1);
    let back = round_trip(call(&send, "/svc/Tun").await, data.clone()).await;
    assert!(back == data, "the service's call works after the refusals");
    drop(send);
    assert_eq!(calls.await.unwrap(), 1, "refused calls are never yielded");
}

#[tokio::test]
async fn refused_calls_do_not_hold_a_connection_past_its_first_call_deadline() {
    let limit = Duration::from_millis(400);
    let (addr, connection) = server(limits(limit, Duration::from_secs(300))).await;
    let send = client(addr).await;
    let mut connection = connection.await.unwrap();
    // A refused call every tenth of the limit, for twenty limits at most:
    // before, each restarted the wait for a first call.
    let refusals = async {
        for _ in 0..200 {
            // Once the server has closed, only its side is awaited.
            let Ok(mut ready) = send.clone().ready().await else {
                return std::future::pending().await;
            };
            // Its half left open, as a tunnel's call is opened; the
            // answer awaited, whatever it is.
            let call = request("/other/Tun", "application/grpc");
            let Ok((answer, _body)) = ready.send_request(call, false) else {
                return std::future::pending().await;
            };
            let _ = answer.await;
            tokio::time::sleep(limit / 10).await;
        }
        panic!("refused calls kept the connection open past its deadline");
    };
    tokio::select! {
        next = connection.next() => assert!(next.is_none(), "closed, nothing yielded"),
        () = refusals => unreachable!(),
    }
}

#[tokio::test]
async fn a_call_is_answered_as_a_grpc_server_answers_and_ends_with_status_0() {
    let (addr, connection) = server(Limits::default()).await;
    let send = client(addr).await;
    let _calls = echo_calls(connection.await.unwrap());
    let mut send = send.ready().await.unwrap();
    let (response, mut body) = send
        .send_request(request("/svc/Tun", "application/grpc"), false)
        .unwrap();
    // One gun message of 3 bytes, then the end of the client's half.
    body.send_data(
        Bytes::from_static(&[0, 0, 0, 0, 5, 0x0A, 3, b'a', b'b', b'c']),
        true,
    )
    .unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/grpc");
    let mut answer = response.into_body();
    let mut echoed = Vec::new();
    while let Some(data) = answer.data().await {
        let data = data.unwrap();
        answer.flow_control().release_capacity(data.len()).unwrap();
        echoed.extend_from_slice(&data);
    }
    assert_eq!(echoed, [0, 0, 0, 0, 5, 0x0A, 3, b'a', b'b', b'c']);
    let trailers = answer.trailers().await.unwrap().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
}

#[tokio::test]
async fn several_concurrent_calls_share_one_connection() {
    let (addr, connection) = server(Limits::default()).await;
    let send = client(addr).await;
    let calls = echo_calls(connection.await.unwrap());
    let mut flows = Vec::new();
    for seed in 0..8 {
        let stream = call(&send, "/svc/Tun").await;
        flows.push(tokio::spawn(async move {
            let data = pattern(256 * 1024 + seed as usize, seed);
            round_trip(stream, data.clone()).await == data
        }));
    }
    for flow in flows {
        assert!(flow.await.unwrap(), "each call got its own bytes back");
    }
    drop(send);
    assert_eq!(calls.await.unwrap(), 8);
}

#[tokio::test]
async fn a_connection_that_opens_no_stream_is_given_up_on() {
    let (addr, connection) =
        server(limits(Duration::from_millis(200), Duration::from_secs(300))).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (_send, client) = h2::client::handshake(tcp).await.unwrap();
    let client = tokio::spawn(client);
    let mut connection = connection.await.unwrap();
    assert!(connection.next().await.is_none(), "closed, nothing yielded");
    drop(connection);
    // The client was told to go away, and its connection ended.
    client.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_connection_whose_calls_ended_is_closed_after_the_idle_limit() {
    let (addr, connection) =
        server(limits(Duration::from_secs(10), Duration::from_millis(200))).await;
    let send = client(addr).await;
    let mut connection = connection.await.unwrap();
    let flow = tokio::spawn(round_trip(call(&send, "/svc/Tun").await, b"x".to_vec()));
    let mut stream = connection.next().await.unwrap().unwrap();
    let echo = async move {
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        stream.write_all(&got).await.unwrap();
        stream.shutdown().await.unwrap();
    };
    // The connection is driven while its call runs, and after it ends.
    let ((), after) = tokio::join!(echo, connection.next());
    assert!(after.is_none(), "closed once idle");
    assert_eq!(flow.await.unwrap(), b"x");
}

/// `MultiHunk { repeated bytes data = 1; }` with `fields`, as Xray's
/// multi mode frames a write: the gRPC prefix, then each field's tag,
/// varint length and bytes.
fn multi_hunk(fields: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for field in fields {
        body.push(0x0A);
        let mut len = field.len();
        while len >= 0x80 {
            body.push(len as u8 & 0x7F | 0x80);
            len >>= 7;
        }
        body.push(len as u8);
        body.extend_from_slice(field);
    }
    let mut wire = vec![0];
    wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
    wire.extend(body);
    wire
}

#[tokio::test]
async fn a_tun_multi_call_takes_several_buffers_a_message_and_is_answered() {
    let (addr, connection) = server(Limits::default()).await;
    let send = client(addr).await;
    let calls = echo_calls(connection.await.unwrap());
    let data = pattern(200 * 1024, 4);
    // Messages of up to four buffers of up to 8 KiB, some empty (Xray's
    // older writer sends an empty field per buffer first), sent in DATA
    // frames of 1000 bytes so messages and fields split across reads.
    let mut wire = Vec::new();
    let mut rest = &data[..];
    let mut sizes = [8192usize, 1, 0, 300, 127, 128, 5000].iter().cycle();
    while !rest.is_empty() {
        let mut fields = Vec::new();
        for _ in 0..4 {
            let (field, after) = rest.split_at((*sizes.next().unwrap()).min(rest.len()));
            fields.push(field);
            rest = after;
        }
        wire.extend(multi_hunk(&fields));
    }
    let mut send = send.ready().await.unwrap();
    let (response, mut body) = send
        .send_request(request("/svc/TunMulti", "application/grpc"), false)
        .unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/grpc");
    let writer = tokio::spawn(async move {
        for frame in wire.chunks(1000) {
            body.reserve_capacity(frame.len());
            while body.capacity() < frame.len() {
                std::future::poll_fn(|cx| body.poll_capacity(cx))
                    .await
                    .unwrap()
                    .unwrap();
            }
            body.send_data(Bytes::copy_from_slice(frame), false)
                .unwrap();
        }
        body.send_data(Bytes::new(), true).unwrap();
        body
    });
    // The answer: messages the client reads as MultiHunks.
    let mut answer = response.into_body();
    let mut decoder = Decoder::new(gun::Message::MultiHunk);
    let mut echoed = Vec::new();
    while let Some(frame) = answer.data().await {
        let frame = frame.unwrap();
        answer.flow_control().release_capacity(frame.len()).unwrap();
        let mut piece = &frame[..];
        while !piece.is_empty() {
            let (used, step) = decoder.decode(piece, usize::MAX).unwrap();
            if let Step::Payload(range) = step {
                echoed.extend_from_slice(&piece[range]);
            }
            piece = &piece[used..];
        }
    }
    assert!(decoder.at_boundary(), "the answer ends between messages");
    assert_eq!(echoed.len(), data.len());
    assert!(echoed == data, "every buffer came back, in order");
    let trailers = answer.trailers().await.unwrap().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
    // With every handle of the client's gone, its connection ends, and so
    // does the server's.
    drop((writer.await.unwrap(), answer, send));
    assert_eq!(calls.await.unwrap(), 1);
}
