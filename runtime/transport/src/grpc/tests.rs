//! The gun tunnel against an h2 server written here, on loopback.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// What the server saw of the request head.
#[derive(Clone, Debug, Default)]
struct Seen {
    uri: String,
    content_type: String,
    user_agent: String,
}

/// A server that takes one stream and hands it to `serve`.
async fn server<F, Fut>(serve: F) -> (SocketAddr, Arc<Mutex<Seen>>)
where
    F: FnOnce(RecvStream, SendResponse<Bytes>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(tcp).await.unwrap();
        let (request, respond) = connection.accept().await.unwrap().unwrap();
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        *record.lock().unwrap() = Seen {
            uri: request.uri().to_string(),
            content_type: header("content-type"),
            user_agent: header("user-agent"),
        };
        tokio::spawn(async move { while connection.accept().await.is_some() {} });
        serve(request.into_body(), respond).await;
    });
    (addr, seen)
}

fn ok() -> http::Response<()> {
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}

async fn open(addr: SocketAddr, service: &str) -> GrpcStream {
    let tcp = TcpStream::connect(addr).await.unwrap();
    GrpcSettings::new("grpc.example", service, false)
        .unwrap()
        .open(Stream::Tcp(tcp))
        .await
        .unwrap()
}

/// Echoes the wire bytes it receives (gun messages as the client framed
/// them) in DATA frames of 777 bytes, so messages split anywhere.
async fn echo_rechunked(mut body: RecvStream, mut respond: SendResponse<Bytes>) {
    let mut send = respond.send_response(ok(), false).unwrap();
    let mut pending = Vec::new();
    while let Some(data) = body.data().await {
        let data = data.unwrap();
        body.flow_control().release_capacity(data.len()).unwrap();
        pending.extend_from_slice(&data);
        while pending.len() >= 777 {
            let chunk: Vec<u8> = pending.drain(..777).collect();
            send_all(&mut send, chunk).await;
        }
    }
    send_all(&mut send, pending).await;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    send.send_trailers(trailers).unwrap();
}

async fn send_all(send: &mut h2::SendStream<Bytes>, mut bytes: Vec<u8>) {
    while !bytes.is_empty() {
        send.reserve_capacity(bytes.len());
        let room = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        let rest = bytes.split_off(room.min(bytes.len()));
        send.send_data(Bytes::from(bytes), false).unwrap();
        bytes = rest;
    }
}

#[tokio::test]
async fn a_mebibyte_each_way_round_trips_as_gun_messages_split_anywhere() {
    let (addr, seen) = server(echo_rechunked).await;
    let grpc = open(addr, "tunnel.Svc").await;
    let (mut read, mut write) = tokio::io::split(grpc);
    let data: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    let writer = tokio::spawn(async move {
        for piece in data.chunks(5000) {
            write.write_all(piece).await.unwrap();
        }
        write.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    read.read_to_end(&mut back).await.unwrap();
    writer.await.unwrap();
    assert_eq!(back.len(), expected.len());
    assert!(back == expected, "the bytes came back in order");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.uri, "http://grpc.example/tunnel.Svc/Tun");
    assert_eq!(seen.content_type, "application/grpc");
    assert_eq!(seen.user_agent, crate::ws::DEFAULT_USER_AGENT);
}

#[tokio::test]
async fn a_non_zero_grpc_status_is_an_error_with_its_message() {
    let (addr, _) = server(|_body, mut respond| async move {
        let response = http::Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "12")
            .header("grpc-message", "unknown service")
            .body(())
            .unwrap();
        respond.send_response(response, true).unwrap();
    })
    .await;
    let mut grpc = open(addr, "wrong").await;
    let err = grpc.read(&mut [0u8; 64]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    assert_eq!(
        err.to_string(),
        "grpc server ended the stream with status 12: unknown service"
    );
}

#[tokio::test]
async fn a_reset_stream_is_an_error_that_says_so() {
    let (addr, _) = server(|_body, mut respond| async move {
        let mut send = respond.send_response(ok(), false).unwrap();
        send.send_reset(h2::Reason::CANCEL);
    })
    .await;
    let mut grpc = open(addr, "svc").await;
    let err = grpc.read(&mut [0u8; 64]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert!(
        err.to_string()
            .starts_with("grpc stream reset by the server"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_ending_inside_a_message_is_an_error() {
    let (addr, _) = server(|_body, mut respond| async move {
        let mut send = respond.send_response(ok(), false).unwrap();
        send.send_data(Bytes::from_static(&[0, 0, 0, 0, 5, 0x0A, 3, b'a']), true)
            .unwrap();
    })
    .await;
    let mut grpc = open(addr, "svc").await;
    let mut out = Vec::new();
    let err = grpc.read_to_end(&mut out).await.unwrap_err();
    assert_eq!(out, b"a");
    assert_eq!(err.to_string(), "grpc stream ended inside a gun message");
}

#[test]
fn an_empty_authority_is_refused() {
    let err = GrpcSettings::new("", "svc", true).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(err.to_string(), "missing grpc authority");
}

#[test]
fn a_bare_ipv6_authority_is_bracketed_in_the_request() {
    let settings = GrpcSettings::new("::1", "svc", true).unwrap();
    assert_eq!(settings.uri.to_string(), "https://[::1]/svc/Tun");
}
