use std::future::poll_fn;

use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::tls::tests::{ends, pki};

/// A sealed record of a full 16 KiB write: its header, the plaintext, the
/// content type and the AEAD tag of TLS 1.3.
const FULL_RECORD: usize = 5 + 16 * 1024 + 1 + 16;

/// A client and a server session over loopback, handshakes done.
async fn pair() -> (TlsStream<TcpStream>, TlsStream<TcpStream>) {
    let pki = pki();
    let (acceptor, connector) = ends(&pki);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = async {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor.accept(tcp).await.unwrap()
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        connector.connect(tcp).await.unwrap()
    };
    let (server, client) = tokio::join!(serve, dial);
    (client, server)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn records_gather_until_a_flush_sends_them_and_the_window_is_let_go() {
    let (mut client, mut server) = pair().await;
    assert_eq!(
        client.buffered(),
        (None, None),
        "the handshake left nothing"
    );
    let bytes = pattern(3 * 16 * 1024);
    for chunk in bytes.chunks(16 * 1024) {
        client.write_all(chunk).await.unwrap();
    }
    assert_eq!(client.buffered(), (None, Some(3 * FULL_RECORD)));
    client.flush().await.unwrap();
    assert_eq!(
        client.buffered(),
        (None, None),
        "a sent window is given back"
    );
    let mut got = vec![0; bytes.len()];
    server.read_exact(&mut got).await.unwrap();
    assert!(got == bytes, "the bytes arrived changed");
    assert_eq!(
        server.buffered(),
        (None, None),
        "a drained window is given back"
    );
}

#[tokio::test]
async fn a_full_window_goes_out_by_itself_and_nothing_is_lost_when_the_socket_is_full() {
    let (mut client, mut server) = pair().await;
    // Nobody reads yet: the window fills, is sent, and once the socket
    // buffers are full too a write waits, with part of a window sent.
    let bytes = pattern(32 << 20);
    let mut at = 0;
    let mut cx = Context::from_waker(Waker::noop());
    while at < bytes.len() {
        let end = (at + 16 * 1024).min(bytes.len());
        match Pin::new(&mut client).poll_write(&mut cx, &bytes[at..end]) {
            Poll::Ready(n) => at += n.unwrap(),
            Poll::Pending => break,
        }
        let (_, held) = client.buffered();
        assert!(held.unwrap_or(0) <= WIRE_BUF, "the window grew: {held:?}");
    }
    assert!(at < bytes.len(), "some write waits for the socket");
    let write = async {
        client.write_all(&bytes[at..]).await.unwrap();
        client.flush().await.unwrap();
        client
    };
    let read = async {
        let mut got = vec![0; bytes.len()];
        server.read_exact(&mut got).await.unwrap();
        got
    };
    let (client, got) = tokio::join!(write, read);
    assert!(got == bytes, "the bytes arrived changed");
    assert_eq!(client.buffered(), (None, None));
}

#[tokio::test]
async fn shutdown_sends_the_gathered_records_then_the_close_notify() {
    let (mut client, mut server) = pair().await;
    let bytes = pattern(100_000);
    client.write_all(&bytes).await.unwrap();
    assert!(client.buffered().1.is_some(), "records wait in the window");
    client.shutdown().await.unwrap();
    let mut got = Vec::new();
    // read_to_end ends cleanly only at the close_notify.
    server.read_to_end(&mut got).await.unwrap();
    assert!(got == bytes, "the bytes arrived changed");
}

#[tokio::test]
async fn a_read_that_must_wait_sends_what_was_written_first() {
    let (mut client, mut server) = pair().await;
    let echo = async {
        let mut request = [0; 5];
        server.read_exact(&mut request).await.unwrap();
        server.write_all(&request).await.unwrap();
        // No flush: the server's next read waits, and sends the answer.
        let mut end = [0; 1];
        let _ = server.read(&mut end).await;
    };
    let ask = async {
        // Written, never flushed: the read below waits for the answer and
        // must send the request before it does.
        client.write_all(b"hello").await.unwrap();
        let mut answer = [0; 5];
        client.read_exact(&mut answer).await.unwrap();
        client.shutdown().await.unwrap();
        answer
    };
    let ((), answer) = tokio::join!(echo, ask);
    assert_eq!(&answer, b"hello");
}

#[tokio::test]
async fn a_dropped_stream_sends_what_the_socket_takes() {
    let (mut client, mut server) = pair().await;
    client.write_all(b"refused").await.unwrap();
    drop(client);
    let mut got = [0; 7];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"refused");
}

#[tokio::test]
async fn many_records_read_at_once_arrive_whole_and_the_read_window_is_let_go() {
    let (mut client, mut server) = pair().await;
    let bytes = pattern(200_000);
    client.write_all(&bytes).await.unwrap();
    client.flush().await.unwrap();
    // Reads of odd sizes, so records end anywhere in them.
    let mut got = Vec::new();
    let mut buf = [0; 7000];
    while got.len() < bytes.len() {
        let n = server.read(&mut buf).await.unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got == bytes, "the bytes arrived changed");
    // The last read emptied the window; a read with nothing to read takes
    // no buffer either.
    assert_eq!(server.buffered(), (None, None));
    let idle = poll_fn(|cx| {
        let mut one = [0; 1];
        let mut one = ReadBuf::new(&mut one);
        Poll::Ready(Pin::new(&mut server).poll_read(cx, &mut one).is_pending())
    });
    assert!(idle.now_or_never().unwrap(), "nothing more was sent");
    assert_eq!(server.buffered(), (None, None));
}

/// Waits (boundedly) until `len` bytes are in `tls`'s socket, unread.
async fn arrived(tls: &TlsStream<TcpStream>, len: usize) {
    let mut peek = vec![0; len];
    for _ in 0..1000 {
        if tls.get_ref().peek(&mut peek).await.unwrap() == len {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("{len} bytes did not arrive");
}

#[tokio::test]
async fn one_read_opens_every_record_already_read_from_the_socket() {
    let (mut client, mut server) = pair().await;
    let bytes = pattern(3 * 16 * 1024);
    client.write_all(&bytes).await.unwrap();
    client.flush().await.unwrap();
    arrived(&server, 3 * FULL_RECORD).await;
    let mut got = vec![0; WIRE_BUF];
    let n = server.read(&mut got).await.unwrap();
    assert_eq!(n, bytes.len(), "one read opened all three records");
    assert!(got[..n] == bytes[..], "the bytes arrived changed");
    assert_eq!(server.buffered(), (None, None));
}

#[tokio::test]
async fn a_read_stops_at_a_record_still_on_its_way_and_at_the_close_notify() {
    let (mut client, mut server) = pair().await;
    // Five records: more than the read window takes at once, so the
    // first read ends within the fourth and leaves it for the next.
    let bytes = pattern(5 * 16 * 1024);
    client.write_all(&bytes).await.unwrap();
    client.shutdown().await.unwrap();
    arrived(&server, 5 * FULL_RECORD).await;
    let mut buf = vec![0; 8 * 16 * 1024];
    let first = server.read(&mut buf).await.unwrap();
    assert!(
        first >= 2 * 16 * 1024 && first < bytes.len(),
        "the first read opened what the window held: {first}"
    );
    let mut got = buf[..first].to_vec();
    let mut reads = 1;
    loop {
        let n = server.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        reads += 1;
        assert!(reads <= 5, "a read opens at least one record");
    }
    assert!(got == bytes, "the bytes arrived changed");
    assert_eq!(server.buffered(), (None, None));
}
