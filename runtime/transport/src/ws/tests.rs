//! The upgrade and the message stream against tokio-tungstenite's own
//! server on loopback.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message;

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
