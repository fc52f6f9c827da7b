//! Sessions handed over from OpenSSL, against our own other half and
//! against OpenSSL's own record layer (a `tokio_openssl` stream with no
//! hand-over: what every TLS peer of ours that is not us looks like).

use std::future::poll_fn;
use std::os::raw::c_int;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use etemenanki_proto::tls13::{
    ContentType, Keys, Suite, HEADER_LEN, KEY_UPDATE_NOT_REQUESTED, MAX_EMPTY_RECORDS,
    SEAL_OVERHEAD,
};
use foreign_types::ForeignTypeRef;
use openssl::pkey::PKey;
use openssl::ssl::{Ssl, SslAcceptor, SslConnector, SslMethod, SslRef, SslVerifyMode, SslVersion};
use openssl::x509::X509;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::tls::tests::{client_spec, custom_ca, ends, pki, Pki, NAME};
use crate::tls::track::{unhex, Track};
use crate::tls::{TlsConnector, TlsStream};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// Reads once with nothing to read: a session's first idle moment, when
/// it is handed over if it can be. True if the read had to wait.
async fn idle<S: AsyncRead + AsyncWrite + Unpin>(tls: &mut TlsStream<S>) -> bool {
    poll_fn(|cx| {
        let mut one = [0; 1];
        let mut one = ReadBuf::new(&mut one);
        Poll::Ready(Pin::new(&mut *tls).poll_read(cx, &mut one).is_pending())
    })
    .await
}

/// Moves `len` bytes each way at once, and checks both arrived whole.
async fn both_ways<A, B>(a: &mut A, b: &mut B, len: usize)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let up = pattern(len, 0x5a);
    let down = pattern(len, 0xa5);
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let (got_up, got_down, (), ()) = tokio::join!(
        async {
            let mut got = vec![0; len];
            b_read.read_exact(&mut got).await.unwrap();
            got
        },
        async {
            let mut got = vec![0; len];
            a_read.read_exact(&mut got).await.unwrap();
            got
        },
        async {
            a_write.write_all(&up).await.unwrap();
            a_write.flush().await.unwrap();
        },
        async {
            b_write.write_all(&down).await.unwrap();
            b_write.flush().await.unwrap();
        },
    );
    assert!(got_up == up, "the bytes up arrived changed");
    assert!(got_down == down, "the bytes down arrived changed");
}

#[tokio::test]
async fn both_ends_hand_over_at_their_first_idle_read_and_carry_a_mebibyte_each_way() {
    let pki = pki();
    let (acceptor, connector) = ends(&pki);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut hello = [0; 5];
        tls.read_exact(&mut hello).await.unwrap();
        tls.write_all(&hello).await.unwrap();
        tls.flush().await.unwrap();
        assert!(idle(&mut tls).await, "the client sent nothing more");
        tls
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(tcp).await.unwrap();
        tls.write_all(b"hello").await.unwrap();
        tls.flush().await.unwrap();
        let mut echo = [0; 5];
        // The ticket comes first, then the echo: a record read under the
        // application keys, so no wait for more tickets.
        tls.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"hello");
        assert!(idle(&mut tls).await, "the server sent nothing more");
        tls
    };
    let (mut server, mut client) = tokio::join!(serve, dial);
    assert!(server.is_handed_over(), "the server's records are ours");
    assert!(client.is_handed_over(), "the client's records are ours");
    both_ways(&mut client, &mut server, 1 << 20).await;
    // Each close_notify ends the other's reads cleanly.
    client.shutdown().await.unwrap();
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    server.shutdown().await.unwrap();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

/// An OpenSSL server of its own, with its own record layer for good: it
/// sends `tickets` session tickets and speaks at most `max`.
fn openssl_server(pki: &Pki, tickets: usize, max: SslVersion) -> SslAcceptor {
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
    builder.set_num_tickets(tickets).unwrap();
    builder.set_max_proto_version(Some(max)).unwrap();
    builder
        .set_certificate(&X509::from_pem(&pki.server.cert_pem).unwrap())
        .unwrap();
    builder
        .set_private_key(&PKey::private_key_from_pem(pki.server.key_pem.expose()).unwrap())
        .unwrap();
    builder.build()
}

/// Our client connected to `server` (accepting on `listener`), with one
/// exchange done: the client wrote 5 bytes and read their echo.
async fn client_of(
    server: &SslAcceptor,
    listener: &TcpListener,
    connector: &TlsConnector,
) -> (TlsStream<TcpStream>, tokio_openssl::SslStream<TcpStream>) {
    let addr = listener.local_addr().unwrap();
    let serve = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ssl = Ssl::new(server.context()).unwrap();
        // Watched, never handed over (its context logs no secret).
        Track::attach(&mut ssl);
        let mut tls = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
        Pin::new(&mut tls).accept().await.unwrap();
        let mut hello = [0; 5];
        tls.read_exact(&mut hello).await.unwrap();
        tls.write_all(&hello).await.unwrap();
        tls.flush().await.unwrap();
        tls
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut tls = connector.connect(tcp).await.unwrap();
        tls.write_all(b"hello").await.unwrap();
        tls.flush().await.unwrap();
        let mut echo = [0; 5];
        tls.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"hello");
        tls
    };
    let (server, client) = tokio::join!(serve, dial);
    (client, server)
}

fn connector(pki: &Pki) -> TlsConnector {
    TlsConnector::build(&client_spec(NAME, custom_ca(&pki.ca_pem), &[]), &[]).unwrap()
}

#[tokio::test]
async fn a_handed_over_client_and_openssls_own_server_carry_a_mebibyte_each_way() {
    let pki = pki();
    let server = openssl_server(&pki, 2, SslVersion::TLS1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, mut server) = client_of(&server, &listener, &connector(&pki)).await;
    assert!(idle(&mut client).await);
    assert!(client.is_handed_over());
    both_ways(&mut client, &mut server, 1 << 20).await;
    client.shutdown().await.unwrap();
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    Pin::new(&mut server).shutdown().await.unwrap();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_client_whose_server_sends_no_ticket_hands_over_once_it_has_waited() {
    // A server that sends no ticket (v2ray's) and has not answered yet:
    // the client waits a while for tickets, then hands over.
    let pki = pki();
    let server = openssl_server(&pki, 0, SslVersion::TLS1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connector = connector(&pki);
    let serve = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let ssl = Ssl::new(server.context()).unwrap();
        let mut tls = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
        Pin::new(&mut tls).accept().await.unwrap();
        tls
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        connector.connect(tcp).await.unwrap()
    };
    let (mut server, mut client) = tokio::join!(serve, dial);
    assert!(idle(&mut client).await);
    assert!(
        !client.is_handed_over(),
        "the client waits for tickets first"
    );
    // The wait's end wakes the idle read, which hands over (bounded).
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(idle(&mut client).await);
        if client.is_handed_over() {
            break;
        }
    }
    assert!(client.is_handed_over(), "handed over after the wait");
    both_ways(&mut client, &mut server, 100_000).await;
}

#[tokio::test]
async fn a_tls12_session_stays_with_openssl_and_still_carries_bytes() {
    let pki = pki();
    let server = openssl_server(&pki, 2, SslVersion::TLS1_2);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, mut server) = client_of(&server, &listener, &connector(&pki)).await;
    assert!(idle(&mut client).await);
    assert!(!client.is_handed_over(), "TLS 1.2 records stay OpenSSL's");
    both_ways(&mut client, &mut server, 100_000).await;
}

extern "C" {
    /// libssl's (unbound by openssl): schedules a KeyUpdate, sent with the
    /// next write; `1` asks the peer to update its own keys too.
    fn SSL_key_update(ssl: *mut openssl_sys::SSL, updatetype: c_int) -> c_int;
}

#[allow(unsafe_code)]
fn key_update_requested(ssl: &SslRef) {
    // SAFETY: `ssl` is a live TLS 1.3 session past its handshake for the
    // call; SSL_key_update only schedules the message.
    assert_eq!(unsafe { SSL_key_update(ssl.as_ptr(), 1) }, 1);
}

#[tokio::test]
async fn a_key_update_the_peer_asks_for_is_followed_and_answered() {
    let pki = pki();
    let server = openssl_server(&pki, 1, SslVersion::TLS1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, mut server) = client_of(&server, &listener, &connector(&pki)).await;
    assert!(idle(&mut client).await);
    assert!(client.is_handed_over());
    for round in 0..3 {
        // OpenSSL's next record is its KeyUpdate, asking for ours: what
        // follows it is under its next keys, and ours must follow it too.
        key_update_requested(server.ssl());
        both_ways(&mut client, &mut server, 50_000 + round).await;
    }
    assert!(Track::updated(server.ssl(), false), "the server updated");
    assert!(Track::updated(server.ssl(), true), "the client answered");
    client.shutdown().await.unwrap();
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_peer_gone_without_close_notify_fails_the_read() {
    let pki = pki();
    let server = openssl_server(&pki, 1, SslVersion::TLS1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, server) = client_of(&server, &listener, &connector(&pki)).await;
    assert!(idle(&mut client).await);
    assert!(client.is_handed_over());
    drop(server);
    let mut buf = [0; 16];
    let error = client.read(&mut buf).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
    assert_eq!(
        error.to_string(),
        "tls peer closed the connection without a close_notify"
    );
}

#[tokio::test]
async fn a_record_changed_on_its_way_fails_the_read_and_the_peer_is_told() {
    let pki = pki();
    let server = openssl_server(&pki, 1, SslVersion::TLS1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (mut client, mut server) = client_of(&server, &listener, &connector(&pki)).await;
    assert!(idle(&mut client).await);
    assert!(client.is_handed_over());
    // A record whose header is sound and whose body is not what the
    // server sealed, written past OpenSSL straight to the socket.
    let mut forged = vec![23, 3, 3, 0, 20];
    forged.extend(1..=20u8);
    server.get_mut().write_all(&forged).await.unwrap();
    let mut buf = [0; 16];
    let error = client.read(&mut buf).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
    assert_eq!(
        error.to_string(),
        "tls record failed authentication (bad_record_mac)"
    );
    // The client told the server why, as OpenSSL would have.
    let mut rest = Vec::new();
    let told = server.read_to_end(&mut rest).await.unwrap_err();
    assert!(told.to_string().contains("bad record mac"), "{told}");
}

/// Our server handed over at its first idle read, an OpenSSL client of it
/// that has written nothing yet, and the keys of the client's next record,
/// to write records past OpenSSL.
async fn server_of_an_openssl_client(
    pki: &Pki,
) -> (
    TlsStream<TcpStream>,
    tokio_openssl::SslStream<TcpStream>,
    Keys,
) {
    let (acceptor, _) = ends(pki);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder.set_verify(SslVerifyMode::NONE);
    builder
        .set_min_proto_version(Some(SslVersion::TLS1_3))
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log = lines.clone();
    builder.set_keylog_callback(move |_, line| log.lock().unwrap().push(line.to_owned()));
    let context = builder.build().into_context();
    let serve = async {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        assert!(idle(&mut tls).await, "the client sent nothing");
        tls
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut tls = tokio_openssl::SslStream::new(Ssl::new(&context).unwrap(), tcp).unwrap();
        Pin::new(&mut tls).connect().await.unwrap();
        tls
    };
    let (server, client) = tokio::join!(serve, dial);
    assert!(server.is_handed_over());
    let id = client.ssl().current_cipher().unwrap().protocol_id();
    let suite = Suite::from_id(u16::from_be_bytes(id)).unwrap();
    let lines = lines.lock().unwrap();
    let line = lines
        .iter()
        .find(|line| line.starts_with("CLIENT_TRAFFIC_SECRET_0 "))
        .unwrap();
    let (secret, len) = unhex(line.split(' ').nth(2).unwrap()).unwrap();
    (server, client, Keys::new(suite, &secret[..len], 0).unwrap())
}

/// Seals `plain` under `keys` as one record of `kind`.
fn record(keys: &mut Keys, kind: ContentType, plain: &[u8]) -> Vec<u8> {
    let mut buf = vec![0; plain.len() + SEAL_OVERHEAD];
    buf[HEADER_LEN..HEADER_LEN + plain.len()].copy_from_slice(plain);
    let len = keys.seal(kind, &mut buf, plain.len()).unwrap();
    buf.truncate(len);
    buf
}

/// Reads `server` until it fails, then what `client` reads: the alert the
/// server sent, in OpenSSL's words.
async fn refused_with(
    server: &mut TlsStream<TcpStream>,
    client: &mut tokio_openssl::SslStream<TcpStream>,
) -> (std::io::Error, String) {
    let mut buf = [0; 64];
    let read_on = async {
        loop {
            match server.read(&mut buf).await {
                Ok(0) => panic!("the server read an end"),
                Ok(_) => continue,
                Err(error) => break error,
            }
        }
    };
    let error = tokio::time::timeout(Duration::from_secs(10), read_on)
        .await
        .expect("the server read on past the records");
    let mut rest = Vec::new();
    let told = client.read_to_end(&mut rest).await.unwrap_err();
    (error, told.to_string())
}

#[tokio::test]
async fn a_clients_session_ticket_is_answered_with_unexpected_message_and_the_end() {
    let pki = pki();
    let (mut server, mut client, mut keys) = server_of_an_openssl_client(&pki).await;
    // lifetime 60 s, age_add 0, no nonce, a one-byte ticket, no extensions.
    let ticket = [4, 0, 0, 14, 0, 0, 0, 60, 0, 0, 0, 0, 0, 0, 1, 0xaa, 0, 0];
    let mut wire = record(&mut keys, ContentType::ApplicationData, b"ping");
    wire.extend(record(&mut keys, ContentType::Handshake, &ticket));
    client.get_mut().write_all(&wire).await.unwrap();
    let mut ping = [0; 4];
    server.read_exact(&mut ping).await.unwrap();
    assert_eq!(&ping, b"ping");
    let (error, told) = refused_with(&mut server, &mut client).await;
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        error.to_string(),
        "tls record or message not allowed after the handshake (unexpected_message)"
    );
    assert!(told.contains("unexpected message"), "{told}");
}

#[tokio::test]
async fn thirty_two_empty_records_in_a_row_are_read_past_and_the_thirty_third_is_refused() {
    let pki = pki();
    let (mut server, mut client, mut keys) = server_of_an_openssl_client(&pki).await;
    let mut wire = Vec::new();
    for _ in 0..MAX_EMPTY_RECORDS {
        wire.extend(record(&mut keys, ContentType::ApplicationData, &[]));
    }
    wire.extend(record(&mut keys, ContentType::ApplicationData, b"ping"));
    // KeyUpdates are not counted: any number of them is fine.
    for _ in 0..100 {
        wire.extend(record(
            &mut keys,
            ContentType::Handshake,
            &KEY_UPDATE_NOT_REQUESTED,
        ));
        keys.update();
    }
    for _ in 0..=MAX_EMPTY_RECORDS {
        wire.extend(record(&mut keys, ContentType::ApplicationData, &[]));
    }
    client.get_mut().write_all(&wire).await.unwrap();
    let mut ping = [0; 4];
    server.read_exact(&mut ping).await.unwrap();
    assert_eq!(&ping, b"ping");
    let (error, told) = refused_with(&mut server, &mut client).await;
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        error.to_string(),
        "tls peer sent more than 32 empty records in a row (unexpected_message)"
    );
    assert!(told.contains("unexpected message"), "{told}");
}
