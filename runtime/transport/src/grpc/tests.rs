//! The gun tunnel against an h2 server written here, on loopback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::future::Future;

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

/// The dial a connector makes: TCP, then the HTTP/2 handshake.
async fn dial(addr: SocketAddr) -> io::Result<Handshake> {
    handshake(crate::Stream::Tcp(TcpStream::connect(addr).await?)).await
}

async fn open(addr: SocketAddr, service: &str) -> GrpcStream {
    GrpcSettings::new("grpc.example", service, false)
        .unwrap()
        .open(|| dial(addr))
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

/// Echoes every DATA frame as it comes (the wire bytes: gun messages as the
/// client framed them).
async fn echo(mut body: RecvStream, mut respond: SendResponse<Bytes>) {
    let mut send = respond.send_response(ok(), false).unwrap();
    while let Some(Ok(data)) = body.data().await {
        body.flow_control().release_capacity(data.len()).unwrap();
        send_all(&mut send, data.to_vec()).await;
    }
}

/// A server that serves every connection it accepts, echoing every stream,
/// and counts the connections. The first `kill` connections are closed
/// once their first stream has echoed one frame.
async fn counting_server(kill: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let nth = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut connection = h2::server::handshake(tcp).await.unwrap();
                if nth >= kill {
                    while let Some(Ok((request, respond))) = connection.accept().await {
                        tokio::spawn(echo(request.into_body(), respond));
                    }
                    return;
                }
                let (request, mut respond) = connection.accept().await.unwrap().unwrap();
                let one = async move {
                    let mut send = respond.send_response(ok(), false).unwrap();
                    let mut body = request.into_body();
                    let data = body.data().await.unwrap().unwrap();
                    send_all(&mut send, data.to_vec()).await;
                    send
                };
                // The connection is driven while the stream is served.
                let mut one = std::pin::pin!(one);
                let send = std::future::poll_fn(|cx| {
                    let _ = connection.poll_closed(cx);
                    one.as_mut().poll(cx)
                })
                .await;
                // The echo is flushed; then the connection is dropped.
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(100),
                    std::future::poll_fn(|cx| connection.poll_closed(cx)),
                )
                .await;
                drop(send);
            });
        }
    });
    (addr, accepted)
}

/// Writes one short message and reads it back.
async fn round_trip(grpc: &mut GrpcStream, n: usize) {
    let message = format!("flow {n}");
    grpc.write_all(message.as_bytes()).await.unwrap();
    let mut back = vec![0u8; message.len()];
    grpc.read_exact(&mut back).await.unwrap();
    assert_eq!(back, message.as_bytes());
}

#[tokio::test]
async fn concurrent_flows_of_one_outbound_share_few_connections() {
    let (addr, accepted) = counting_server(0).await;
    let settings = Arc::new(GrpcSettings::new("grpc.example", "svc", false).unwrap());
    let flows = 2 * pool::MAX_STREAMS + 10;
    // Every flow stays open until all have round-tripped.
    let all_open = Arc::new(tokio::sync::Barrier::new(flows));
    let mut tasks = Vec::new();
    for n in 0..flows {
        let settings = settings.clone();
        let all_open = all_open.clone();
        tasks.push(tokio::spawn(async move {
            let mut grpc = settings.open(|| dial(addr)).await.unwrap();
            round_trip(&mut grpc, n).await;
            all_open.wait().await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "{flows} flows, 100 a connection"
    );
    // The flows have ended: the next one takes the connection kept idle.
    let mut grpc = settings.open(|| dial(addr)).await.unwrap();
    round_trip(&mut grpc, 0).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_dead_connection_is_replaced_on_the_next_dial() {
    let (addr, accepted) = counting_server(1).await;
    let settings = GrpcSettings::new("grpc.example", "svc", false).unwrap();
    let mut first = settings.open(|| dial(addr)).await.unwrap();
    round_trip(&mut first, 1).await;
    // The server has closed the connection under the first flow.
    let mut rest = Vec::new();
    assert!(first.read_to_end(&mut rest).await.is_err());
    let mut second = settings.open(|| dial(addr)).await.unwrap();
    round_trip(&mut second, 2).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn flows_waiting_on_a_failed_connect_fail_with_it_and_the_next_dial_tries_again() {
    let settings = Arc::new(GrpcSettings::new("grpc.example", "svc", false).unwrap());
    let dials = Arc::new(AtomicUsize::new(0));
    let failing = |dials: Arc<AtomicUsize>| async move {
        dials.fetch_add(1, Ordering::SeqCst);
        // Long enough for every flow to be waiting on this attempt.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        Err::<Handshake, _>(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"))
    };
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let settings = settings.clone();
        let dials = dials.clone();
        tasks.push(tokio::spawn(async move {
            settings.open(|| failing(dials)).await.map(drop)
        }));
    }
    for task in tasks {
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
        assert_eq!(err.to_string(), "refused");
    }
    assert_eq!(
        dials.load(Ordering::SeqCst),
        1,
        "one attempt for all waiters"
    );
    let err = settings
        .open(|| failing(dials.clone()))
        .await
        .map(drop)
        .unwrap_err();
    assert_eq!(err.to_string(), "refused");
    assert_eq!(dials.load(Ordering::SeqCst), 2, "a later flow tries again");
}

/// The payloads of the gun messages in `wire`, a request body's bytes.
fn gun_payloads(mut wire: &[u8]) -> Vec<&[u8]> {
    let mut payloads = Vec::new();
    while !wire.is_empty() {
        assert_eq!(wire[0], 0, "an uncompressed message");
        let len = u32::from_be_bytes(wire[1..5].try_into().unwrap()) as usize;
        let (mut message, rest) = wire[5..].split_at(len);
        assert_eq!(message[0], 0x0A, "the data field");
        message = &message[1..];
        let mut n = 0usize;
        for shift in (0..).step_by(7) {
            let byte = message[0];
            message = &message[1..];
            n |= usize::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                break;
            }
        }
        assert_eq!(n, message.len(), "the field fills its message");
        payloads.push(message);
        wire = rest;
    }
    payloads
}

#[test]
fn a_whole_message_and_the_head_of_its_frame_fill_whole_tls_records() {
    let framed = 9 + etemenanki_proto::gun::header_len(stream::MESSAGE_MAX) + stream::MESSAGE_MAX;
    assert_eq!(framed % wire::RECORD, 0);
}

#[tokio::test]
async fn a_filled_message_is_read_straight_behind_its_header_and_the_block_given_back() {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let expected = data.clone();
    let (done, got) = tokio::sync::oneshot::channel();
    let (addr, _) = server(move |mut body, mut respond| async move {
        let mut wire = Vec::new();
        while let Some(frame) = body.data().await {
            let frame = frame.unwrap();
            body.flow_control().release_capacity(frame.len()).unwrap();
            wire.extend_from_slice(&frame);
        }
        let mut send = respond.send_response(ok(), false).unwrap();
        send.send_trailers(super::server::status_ok()).unwrap();
        done.send(wire).unwrap();
    })
    .await;
    let mut grpc = open(addr, "tunnel.Svc").await;
    let mut source = &data[..];
    for _ in 0..1000 {
        let n = std::future::poll_fn(|cx| grpc.poll_fill_from(cx, &mut source))
            .await
            .unwrap();
        if n == 0 {
            break;
        }
    }
    assert!(source.is_empty(), "the source was read through");
    assert!(!grpc.holds_block(), "the block went at the source's end");
    grpc.shutdown().await.unwrap();
    let wire = got.await.unwrap();
    let payloads = gun_payloads(&wire);
    assert!(
        payloads.iter().all(|p| p.len() <= stream::MESSAGE_MAX),
        "a read a message, a message at most the limit"
    );
    assert!(
        payloads.iter().any(|p| p.len() > 16 * 1024),
        "a read takes more than a relay buffer"
    );
    assert!(
        payloads.concat() == expected,
        "the messages carry the source's bytes"
    );
    let mut rest = Vec::new();
    grpc.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn idle_filled_flows_hold_no_window_so_the_next_flow_still_sends() {
    // The test server's connection window is h2's default, 64 KiB: flows
    // each keeping a whole message's window while idle would stall the
    // third.
    let (addr, accepted) = counting_server(0).await;
    let settings = GrpcSettings::new("grpc.example", "svc", false).unwrap();
    let mut idle = Vec::new();
    for n in 0..8u8 {
        let mut grpc = settings.open(|| dial(addr)).await.unwrap();
        let (mut app, mut source) = tokio::io::duplex(64);
        app.write_all(&[n]).await.unwrap();
        let fill = std::future::poll_fn(|cx| grpc.poll_fill_from(cx, &mut source));
        let sent = tokio::time::timeout(std::time::Duration::from_secs(10), fill)
            .await
            .unwrap_or_else(|_| panic!("flow {n} got no window"))
            .unwrap();
        assert_eq!(sent, 1, "flow {n}");
        // The source has nothing more: the fill waits and lets the block go.
        let waiting = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(grpc.poll_fill_from(cx, &mut source).is_pending())
        })
        .await;
        assert!(waiting && !grpc.holds_block(), "flow {n}");
        let mut back = [0u8; 1];
        grpc.read_exact(&mut back).await.unwrap();
        assert_eq!(back, [n], "flow {n}");
        idle.push((grpc, app, source));
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the flows share one connection"
    );
}

#[test]
fn a_message_goes_out_from_the_flows_own_task() {
    // The server runs on a thread of its own; the client's runtime has one
    // thread, blocked below, so the connection's task cannot run: what
    // the server receives, the flow's own write sent.
    let (received, message) = std::sync::mpsc::channel();
    let (bound, addr) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            bound.send(listener.local_addr().unwrap()).unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            let mut connection = h2::server::handshake(tcp).await.unwrap();
            let (request, _respond) = connection.accept().await.unwrap().unwrap();
            tokio::spawn(async move { while connection.accept().await.is_some() {} });
            let mut body = request.into_body();
            let mut wire = Vec::new();
            while wire.len() < 5 + 2 + 5 {
                wire.extend_from_slice(&body.data().await.unwrap().unwrap());
            }
            received.send(wire).unwrap();
        });
    });
    let addr = addr.recv().unwrap();
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client.block_on(async move {
        let mut grpc = open(addr, "svc").await;
        grpc.write_all(b"hello").await.unwrap();
        // No await from here on: the runtime's one thread waits.
        let wire = message
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the message went out with no task switch");
        assert_eq!(gun_payloads(&wire), [&b"hello"[..]]);
        drop(grpc);
    });
    server.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_sending_from_their_own_tasks_on_one_connection_lose_nothing_across_threads() {
    let (addr, accepted) = counting_server(0).await;
    let settings = Arc::new(GrpcSettings::new("grpc.example", "svc", false).unwrap());
    let mut tasks = Vec::new();
    for n in 0..40u32 {
        let settings = settings.clone();
        tasks.push(tokio::spawn(async move {
            let grpc = settings.open(|| dial(addr)).await.unwrap();
            let (mut read, mut write) = tokio::io::split(grpc);
            let data: Vec<u8> = (0..200_000u32).map(|i| ((i + n) % 253) as u8).collect();
            let expected = data.clone();
            let writer = tokio::spawn(async move {
                for piece in data.chunks(20_000 + n as usize) {
                    write.write_all(piece).await.unwrap();
                }
                write
            });
            let mut back = vec![0u8; expected.len()];
            read.read_exact(&mut back).await.unwrap();
            assert!(back == expected, "flow {n}: its bytes came back in order");
            drop(writer.await.unwrap());
        }));
    }
    let all = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    // A bound on a hang, not on speed.
    tokio::time::timeout(std::time::Duration::from_secs(120), all)
        .await
        .expect("every flow's bytes came back");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the flows share one connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_closes_once_the_outbound_and_its_last_flow_let_go() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed, mut ended) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(tcp).await.unwrap();
        while let Some(Ok((request, respond))) = connection.accept().await {
            tokio::spawn(echo(request.into_body(), respond));
        }
        closed.send(()).unwrap();
    });
    let settings = GrpcSettings::new("grpc.example", "svc", false).unwrap();
    let mut grpc = settings.open(|| dial(addr)).await.unwrap();
    round_trip(&mut grpc, 1).await;
    drop(settings);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(200), &mut ended)
            .await
            .is_err(),
        "open while its flow is"
    );
    drop(grpc);
    // A hang guard, not a clock the test races.
    tokio::time::timeout(std::time::Duration::from_secs(30), ended)
        .await
        .expect("closed once the last flow let go")
        .unwrap();
}
