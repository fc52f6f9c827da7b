//! The upgrade and the message stream against tokio-tungstenite's own
//! server on loopback.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::*;

/// What the server saw of the upgrade request.
#[derive(Clone, Debug, Default)]
struct Seen {
    path: String,
    host: String,
    user_agent: String,
    early: Option<String>,
}

fn settings(early_data: Option<WsEarlyData>) -> WsSettings {
    WsSettings {
        host: "cdn.example".into(),
        path: "/ws".into(),
        early_data,
    }
}

/// A server that accepts one upgrade at `/ws` (any other path is a 404)
/// and hands the WebSocket to `serve`. tungstenite's refusal type is what
/// makes its callback's error large.
#[allow(clippy::result_large_err)]
async fn server<F, Fut>(serve: F) -> (std::net::SocketAddr, Arc<Mutex<Seen>>)
where
    F: FnOnce(WebSocketStream<TcpStream>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let check = move |request: &Request, response: Response| {
            let header = |name: &str| {
                request
                    .headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
            };
            *record.lock().unwrap() = Seen {
                path: request.uri().path().to_owned(),
                host: header("host").unwrap_or_default(),
                user_agent: header("user-agent").unwrap_or_default(),
                early: header("sec-websocket-protocol"),
            };
            if request.uri().path() == "/ws" {
                // No subprotocol echoed, as sing-box answers early data.
                Ok(response)
            } else {
                let mut refused = ErrorResponse::new(None);
                *refused.status_mut() = StatusCode::NOT_FOUND;
                Err(refused)
            }
        };
        if let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await {
            serve(ws).await;
        }
    });
    (addr, seen)
}

async fn client(
    addr: std::net::SocketAddr,
    settings: &WsSettings,
    first: &[u8],
) -> io::Result<WsStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    settings
        .upgrade(Stream::Tcp(tcp), settings.early(first))
        .await
}

#[tokio::test]
async fn the_upgrade_names_path_host_and_agent_and_bytes_move_as_binary_messages() {
    let (addr, seen) = server(|mut ws| async move {
        ws.send(Message::binary(&b"0123456789"[..])).await.unwrap();
        let got = ws.next().await.unwrap().unwrap();
        assert_eq!(got, Message::binary(&b"abc"[..]));
        ws.send(Message::Ping(b"p".to_vec().into())).await.unwrap();
        ws.send(Message::binary(&b"after ping"[..])).await.unwrap();
        // The pong comes back before the client's close.
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            Message::Pong(b"p".to_vec().into())
        );
        assert!(matches!(
            ws.next().await.unwrap().unwrap(),
            Message::Close(_)
        ));
    })
    .await;
    let mut ws = client(addr, &settings(None), b"").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        (seen.path.as_str(), seen.host.as_str(), seen.early),
        ("/ws", "cdn.example", None)
    );
    assert_eq!(seen.user_agent, DEFAULT_USER_AGENT);

    // One message, read in two pieces.
    let mut four = [0u8; 4];
    ws.read_exact(&mut four).await.unwrap();
    let mut six = [0u8; 6];
    ws.read_exact(&mut six).await.unwrap();
    assert_eq!((&four, &six), (b"0123", b"456789"));
    ws.write_all(b"abc").await.unwrap();
    ws.flush().await.unwrap();
    let mut after = [0u8; 10];
    ws.read_exact(&mut after).await.unwrap();
    assert_eq!(&after, b"after ping");
    ws.flush().await.unwrap();
    ws.shutdown().await.unwrap();
    // The server dropped the connection after our close, without its own
    // close frame: the end of the stream all the same.
    assert_eq!(ws.read(&mut after).await.unwrap(), 0);
}

#[tokio::test]
async fn early_data_rides_in_its_header_up_to_the_allowance() {
    let (addr, seen) = server(|mut ws| async move {
        let got = ws.next().await.unwrap().unwrap();
        assert_eq!(got, Message::binary(&b"rest"[..]));
    })
    .await;
    let early = WsEarlyData {
        max: 5,
        header: "Sec-WebSocket-Protocol".into(),
    };
    let settings = settings(Some(early));
    let first = b"hello rest";
    let mut ws = client(addr, &settings, first).await.unwrap();
    assert_eq!(settings.early(first).unwrap().bytes, b"hello");
    assert_eq!(
        seen.lock().unwrap().early.as_deref(),
        Some(etemenanki_ir::base64::encode_url(b"hello").as_str())
    );
    ws.write_all(b"rest").await.unwrap();
    ws.flush().await.unwrap();
    assert!(settings.early(b"").is_none(), "no header for no bytes");
}

#[tokio::test]
async fn a_wrong_path_fails_the_upgrade_with_the_server_status() {
    let (addr, seen) = server(|_| async {}).await;
    let wrong = WsSettings {
        path: "/elsewhere".into(),
        ..settings(None)
    };
    let e = client(addr, &wrong, b"").await.err().unwrap();
    assert_eq!(
        (e.kind(), e.to_string()),
        (
            io::ErrorKind::ConnectionRefused,
            "websocket: the server answered the upgrade with 404".into()
        )
    );
    assert_eq!(seen.lock().unwrap().path, "/elsewhere");
}

/// `len` bytes that differ from those of another `seed`.
fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
}

#[tokio::test]
async fn fragments_read_as_their_bytes_and_a_ping_between_them_is_answered() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let (addr, _) = server(|mut ws| async move {
        let fragment = |data: &'static [u8], opcode, fin| {
            Message::Frame(Frame::message(data, OpCode::Data(opcode), fin))
        };
        ws.send(fragment(b"frag one, ", Data::Binary, false))
            .await
            .unwrap();
        ws.send(Message::Ping(b"between".to_vec().into()))
            .await
            .unwrap();
        ws.send(fragment(b"frag two", Data::Continue, true))
            .await
            .unwrap();
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            Message::Pong(b"between".to_vec().into())
        );
        // The client's close, answered by tungstenite with its own.
        assert!(matches!(
            ws.next().await.unwrap().unwrap(),
            Message::Close(_)
        ));
        while ws.next().await.is_some() {}
    })
    .await;
    let mut ws = client(addr, &settings(None), b"").await.unwrap();
    let mut got = [0u8; 18];
    ws.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"frag one, frag two");
    // The pong went out while reading; the stream holds nothing now.
    assert!(!ws.holds_buffers());
    ws.shutdown().await.unwrap();
    let mut rest = Vec::new();
    ws.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

/// Our server on `listener`, upgrading one connection at `/ws`.
async fn our_server(listener: TcpListener) -> io::Result<WsStream> {
    let (tcp, _) = listener.accept().await.unwrap();
    WsServer::new("/ws", None).accept(Stream::Tcp(tcp)).await
}

#[tokio::test]
async fn our_client_and_server_move_a_mebibyte_each_way_with_half_close_and_hold_nothing_idle() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let up = pattern(1 << 20, 1);
    let down = pattern(1 << 20, 2);
    let (up_sent, down_sent) = (up.clone(), down.clone());
    let served = tokio::spawn(async move {
        let mut ws = our_server(listener).await.unwrap();
        let mut got = Vec::new();
        // The client's close frame ends the reads.
        ws.read_to_end(&mut got).await.unwrap();
        assert!(got == up_sent, "the server read what the client wrote");
        assert!(!ws.holds_buffers());
        // Its half-close leaves our direction open.
        ws.write_all(&down_sent).await.unwrap();
        ws.shutdown().await.unwrap();
        assert!(!ws.holds_buffers());
    });
    let mut ws = client(addr, &settings(None), b"").await.unwrap();
    ws.write_all(&up).await.unwrap();
    ws.flush().await.unwrap();
    assert!(
        !ws.holds_buffers(),
        "a written frame's buffer is given back"
    );
    ws.shutdown().await.unwrap();
    let mut got = Vec::new();
    ws.read_to_end(&mut got).await.unwrap();
    assert!(got == down, "the client read what the server wrote");
    assert!(!ws.holds_buffers());
    served.await.unwrap();
}

#[tokio::test]
async fn our_server_reads_a_tungstenite_clients_masked_frames_and_answers_its_ping() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let big = pattern(100_000, 3);
    let sent = big.clone();
    let served = tokio::spawn(async move {
        let mut ws = our_server(listener).await.unwrap();
        let mut got = vec![0u8; sent.len() + 5];
        ws.read_exact(&mut got).await.unwrap();
        assert!(got[..sent.len()] == sent[..] && &got[sent.len()..] == b"hello");
        ws.write_all(b"answer").await.unwrap();
        ws.flush().await.unwrap();
        let mut rest = Vec::new();
        ws.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        ws.shutdown().await.unwrap();
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async("ws://cdn.example/ws", tcp)
        .await
        .unwrap();
    ws.send(Message::binary(big)).await.unwrap();
    ws.send(Message::Ping(b"still there".to_vec().into()))
        .await
        .unwrap();
    ws.send(Message::text("hello")).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::Pong(b"still there".to_vec().into())
    );
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::binary(&b"answer"[..])
    );
    ws.close(None).await.unwrap();
    // Our server's close, echoing tungstenite's (no code).
    while let Some(Ok(message)) = ws.next().await {
        assert!(matches!(message, Message::Close(_)), "{message:?}");
    }
    served.await.unwrap();
}

#[tokio::test]
async fn a_filled_frame_is_read_straight_behind_its_header_and_the_buffer_given_back() {
    let data = pattern(100_000, 4);
    let expected = data.clone();
    let (addr, _) = server(move |mut ws| async move {
        let mut got = Vec::new();
        let mut frames = Vec::new();
        while let Some(Ok(Message::Binary(bytes))) = ws.next().await {
            frames.push(bytes.len());
            got.extend_from_slice(&bytes);
        }
        assert!(got == expected, "the frames carry the source's bytes");
        // One read a frame, as much as the source has, header and payload
        // in one FRAME_BUF: a 64-bit length and the key (14 bytes) leave
        // room for the payload behind a 16-bit length (8 bytes).
        let full = FRAME_BUF - 14;
        assert_eq!(frames, [full, 100_000 - full]);
    })
    .await;
    let mut ws = client(addr, &settings(None), b"").await.unwrap();
    let mut source = &data[..];
    loop {
        let n = std::future::poll_fn(|cx| ws.poll_fill_from(cx, &mut source))
            .await
            .unwrap();
        if n == 0 {
            break;
        }
    }
    ws.flush().await.unwrap();
    assert!(!ws.holds_buffers());
    ws.shutdown().await.unwrap();
}
