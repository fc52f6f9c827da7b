//! Our record layer against OpenSSL's, over in-memory pipes: OpenSSL does
//! the handshake on both sides, as the runtime has it do, and then one side
//! (the client) is ours, with the secrets OpenSSL's keylog gave and the
//! sequence numbers its records reached.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::raw::c_int;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use foreign_types::ForeignTypeRef;
use openssl::asn1::Asn1Time;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{
    ErrorCode, ShutdownResult, Ssl, SslContext, SslMethod, SslRef, SslStream, SslVerifyMode,
    SslVersion,
};
use openssl::x509::{X509NameBuilder, X509};

use super::*;
use crate::testing::hex;

const SUITES: [Suite; 3] = [
    Suite::Aes128GcmSha256,
    Suite::Aes256GcmSha384,
    Suite::Chacha20Poly1305Sha256,
];

/// OpenSSL 3.0 sends two tickets after a TLS 1.3 handshake
/// (`SSL_CTX_set_num_tickets`' default).
const TICKETS: usize = 2;

extern "C" {
    /// libssl's, since 1.1.1 (the openssl crate does not bind it): the
    /// next write sends a KeyUpdate and changes keys; 1 on success.
    fn SSL_key_update(ssl: *mut openssl_sys::SSL, updatetype: c_int) -> c_int;
}

/// Makes OpenSSL's next write start with a KeyUpdate, asking for ours back
/// if `requested`.
#[allow(unsafe_code)]
fn key_update(ssl: &SslRef, requested: bool) {
    // SAFETY: `ssl.as_ptr()` is a live SSL for the whole call (`ssl`
    // borrows it); SSL_key_update only records the request on it, and the
    // type is one of the two it defines (0 not requested, 1 requested).
    let done = unsafe { SSL_key_update(ssl.as_ptr(), c_int::from(requested)) };
    assert_eq!(done, 1, "SSL_key_update");
}

/// One direction of the wire.
#[derive(Clone, Default)]
struct Queue(Rc<RefCell<VecDeque<u8>>>);

impl Queue {
    fn push(&self, bytes: &[u8]) {
        self.0.borrow_mut().extend(bytes);
    }

    /// The next whole record, as it is on the wire.
    fn take_record(&self) -> Option<Vec<u8>> {
        let mut queue = self.0.borrow_mut();
        if queue.len() < HEADER_LEN {
            return None;
        }
        let header: [u8; HEADER_LEN] = std::array::from_fn(|i| queue[i]);
        let len = record_len(&header).unwrap();
        assert!(queue.len() >= len, "OpenSSL wrote part of a record");
        Some(queue.drain(..len).collect())
    }
}

/// An OpenSSL endpoint's BIO: reads one queue, writes the other.
struct Pipe {
    read: Queue,
    write: Queue,
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut queue = self.read.0.borrow_mut();
        if queue.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        queue.read(buf)
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS 1.3 session both of whose ends OpenSSL established.
struct Session {
    /// OpenSSL's client: after the handshake its records are ours, unless
    /// a test has it read or write first.
    client: SslStream<Pipe>,
    server: SslStream<Pipe>,
    to_client: Queue,
    to_server: Queue,
    /// client_application_traffic_secret_0 and the server's, from the keylog.
    client_secret: Vec<u8>,
    server_secret: Vec<u8>,
}

/// A P-256 key and a self-signed certificate for it.
fn identity() -> (PKey<Private>, X509) {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "tls13.test").unwrap();
    let name = name.build();
    let mut cert = X509::builder().unwrap();
    cert.set_version(2).unwrap();
    cert.set_subject_name(&name).unwrap();
    cert.set_issuer_name(&name).unwrap();
    cert.set_pubkey(&key).unwrap();
    cert.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    cert.set_not_after(&Asn1Time::days_from_now(1).unwrap())
        .unwrap();
    cert.sign(&key, MessageDigest::sha256()).unwrap();
    (key, cert.build())
}

/// Whether a handshake step finished; it may wait for the other side.
fn finished(step: Result<(), openssl::ssl::Error>) -> bool {
    match step {
        Ok(()) => true,
        Err(error) if error.code() == ErrorCode::WANT_READ => false,
        Err(error) => panic!("handshake failed: {error}"),
    }
}

fn handshake(suite: Suite) -> Session {
    let (key, cert) = identity();
    let mut server = SslContext::builder(SslMethod::tls()).unwrap();
    let mut client = SslContext::builder(SslMethod::tls()).unwrap();
    for context in [&mut server, &mut client] {
        context
            .set_min_proto_version(Some(SslVersion::TLS1_3))
            .unwrap();
        context.set_ciphersuites(suite.name()).unwrap();
    }
    server.set_private_key(&key).unwrap();
    server.set_certificate(&cert).unwrap();
    client.set_verify(SslVerifyMode::NONE);
    let log = Arc::new(Mutex::new(Vec::new()));
    let lines = log.clone();
    client.set_keylog_callback(move |_, line| lines.lock().unwrap().push(line.to_owned()));

    let (to_client, to_server) = (Queue::default(), Queue::default());
    let pipe = |read: &Queue, write: &Queue| Pipe {
        read: read.clone(),
        write: write.clone(),
    };
    let mut client = SslStream::new(
        Ssl::new(&client.build()).unwrap(),
        pipe(&to_client, &to_server),
    )
    .unwrap();
    let mut server = SslStream::new(
        Ssl::new(&server.build()).unwrap(),
        pipe(&to_server, &to_client),
    )
    .unwrap();
    let (mut client_done, mut server_done) = (false, false);
    for _ in 0..8 {
        client_done = client_done || finished(client.connect());
        server_done = server_done || finished(server.accept());
    }
    assert!(client_done && server_done, "the handshake did not finish");
    let cipher = client.ssl().current_cipher().unwrap();
    assert_eq!(cipher.standard_name(), Some(suite.name()));

    let log = log.lock().unwrap();
    let secret = |label: &str| {
        let line = log.iter().find(|line| line.starts_with(label)).unwrap();
        hex(line.split(' ').nth(2).unwrap())
    };
    Session {
        client_secret: secret("CLIENT_TRAFFIC_SECRET_0 "),
        server_secret: secret("SERVER_TRAFFIC_SECRET_0 "),
        client,
        server,
        to_client,
        to_server,
    }
}

/// Our reading side, as the runtime will have it: opens every record,
/// passes handshake records to PostHandshake and changes keys on a
/// KeyUpdate.
struct Reader {
    keys: Keys,
    post: PostHandshake,
    tickets: usize,
    /// update_requested of every KeyUpdate read.
    updates: Vec<bool>,
}

impl Reader {
    fn new(suite: Suite, secret: &[u8], seq: u64) -> Self {
        Reader {
            keys: Keys::new(suite, secret, seq).unwrap(),
            post: PostHandshake::new(Sender::Server),
            tickets: 0,
            updates: Vec::new(),
        }
    }

    /// Opens every record waiting: their types and plaintexts, in order.
    fn read_all(&mut self, queue: &Queue) -> Vec<(ContentType, Vec<u8>)> {
        let mut records = Vec::new();
        while let Some(mut record) = queue.take_record() {
            let (kind, range) = self.keys.open(&mut record).unwrap();
            let plaintext = record[range].to_vec();
            if kind == ContentType::Handshake {
                let Reader {
                    keys,
                    post,
                    tickets,
                    updates,
                } = self;
                post.feed(&plaintext, |message| match message {
                    Message::Ticket => *tickets += 1,
                    Message::KeyUpdate { update_requested } => {
                        keys.update();
                        updates.push(update_requested);
                    }
                })
                .unwrap();
            }
            records.push((kind, plaintext));
        }
        records
    }

    /// The application data of every record waiting, concatenated.
    fn read_data(&mut self, queue: &Queue) -> Vec<u8> {
        let mut data = Vec::new();
        for (kind, plaintext) in self.read_all(queue) {
            if kind == ContentType::ApplicationData {
                data.extend_from_slice(&plaintext);
            }
        }
        data
    }
}

/// Seals `data` in records of at most MAX_PLAINTEXT into `queue`, through
/// one buffer as the runtime will.
fn send(keys: &mut Keys, kind: ContentType, data: &[u8], queue: &Queue) {
    let mut buf = vec![0; MAX_PLAINTEXT + SEAL_OVERHEAD];
    for chunk in data.chunks(MAX_PLAINTEXT) {
        buf[HEADER_LEN..HEADER_LEN + chunk.len()].copy_from_slice(chunk);
        let len = keys.seal(kind, &mut buf, chunk.len()).unwrap();
        queue.push(&buf[..len]);
    }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt)
        .collect()
}

fn server_reads(session: &mut Session, len: usize) -> Vec<u8> {
    let mut data = vec![0; len];
    session.server.read_exact(&mut data).unwrap();
    data
}

#[test]
fn our_keys_open_openssls_tickets_and_records_of_every_size() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut sent = Vec::new();
        for (len, salt) in [(1, 1), (16 * 1024, 2), (40 * 1024, 3)] {
            let data = pattern(len, salt);
            session.server.write_all(&data).unwrap();
            sent.extend_from_slice(&data);
        }
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let records = reader.read_all(&session.to_client);
        let kinds: Vec<_> = records.iter().map(|(kind, _)| *kind).collect();
        let mut expected = vec![ContentType::Handshake; TICKETS];
        expected.extend([ContentType::ApplicationData; 5]);
        assert_eq!(kinds, expected, "{suite:?}");
        assert_eq!(reader.tickets, TICKETS);
        assert!(!reader.post.is_mid_message());
        let lens: Vec<_> = records[TICKETS..].iter().map(|(_, p)| p.len()).collect();
        assert_eq!(lens, [1, 16384, 16384, 16384, 8192]);
        let data: Vec<u8> = records[TICKETS..]
            .iter()
            .flat_map(|(_, p)| p.clone())
            .collect();
        assert_eq!(data, sent, "{suite:?}");
        assert_eq!(reader.keys.seq(), 7);
    }
}

#[test]
fn openssl_reads_the_records_our_keys_seal() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        for (len, salt) in [(1, 4), (16 * 1024, 5), (40 * 1024, 6)] {
            let data = pattern(len, salt);
            send(
                &mut writer,
                ContentType::ApplicationData,
                &data,
                &session.to_server,
            );
            assert_eq!(server_reads(&mut session, len), data, "{suite:?} {len}");
        }
        assert_eq!(writer.seq(), 5);
    }
}

#[test]
fn a_session_taken_over_mid_stream_continues_at_openssls_sequence_numbers() {
    for suite in SUITES {
        let mut session = handshake(suite);
        // OpenSSL's client reads the tickets and one record, writes one.
        session.server.write_all(b"hello").unwrap();
        let mut hello = [0; 5];
        session.client.read_exact(&mut hello).unwrap();
        assert_eq!(&hello, b"hello");
        session.client.write_all(b"ping").unwrap();
        assert_eq!(server_reads(&mut session, 4), b"ping");

        let mut reader = Reader::new(suite, &session.server_secret, TICKETS as u64 + 1);
        let mut writer = Keys::new(suite, &session.client_secret, 1).unwrap();
        session.server.write_all(b"more").unwrap();
        assert_eq!(reader.read_data(&session.to_client), b"more");
        send(
            &mut writer,
            ContentType::ApplicationData,
            b"pong",
            &session.to_server,
        );
        assert_eq!(server_reads(&mut session, 4), b"pong", "{suite:?}");
    }
}

#[test]
fn openssl_follows_our_key_updates_and_answers_a_requested_one() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        assert_eq!(reader.read_all(&session.to_client).len(), TICKETS);

        send(
            &mut writer,
            ContentType::Handshake,
            &KEY_UPDATE_NOT_REQUESTED,
            &session.to_server,
        );
        writer.update();
        send(
            &mut writer,
            ContentType::ApplicationData,
            b"after",
            &session.to_server,
        );
        assert_eq!(server_reads(&mut session, 5), b"after", "{suite:?}");
        assert_eq!(writer.seq(), 1);
        // Not requested: OpenSSL's keys stay.
        session.server.write_all(b"reply").unwrap();
        assert_eq!(reader.read_data(&session.to_client), b"reply");
        assert!(reader.updates.is_empty());

        // Requested: OpenSSL's next write starts with its own KeyUpdate.
        send(
            &mut writer,
            ContentType::Handshake,
            &[24, 0, 0, 1, 1],
            &session.to_server,
        );
        writer.update();
        send(
            &mut writer,
            ContentType::ApplicationData,
            b"again",
            &session.to_server,
        );
        assert_eq!(server_reads(&mut session, 5), b"again", "{suite:?}");
        session.server.write_all(b"answer").unwrap();
        assert_eq!(reader.read_data(&session.to_client), b"answer");
        assert_eq!(reader.updates, [false]);
        assert_eq!(reader.keys.seq(), 1);
    }
}

#[test]
fn we_follow_and_answer_openssls_requested_key_update() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        key_update(session.server.ssl(), true);
        session.server.write_all(b"after update").unwrap();
        let records = reader.read_all(&session.to_client);
        assert_eq!(reader.tickets, TICKETS);
        assert_eq!(reader.updates, [true], "{suite:?}");
        assert_eq!(
            records.last(),
            Some(&(ContentType::ApplicationData, b"after update".to_vec()))
        );
        assert_eq!(reader.keys.seq(), 1);

        // Our answer, as RFC 8446 4.6.3 asks: a KeyUpdate not requested.
        send(
            &mut writer,
            ContentType::Handshake,
            &KEY_UPDATE_NOT_REQUESTED,
            &session.to_server,
        );
        writer.update();
        send(
            &mut writer,
            ContentType::ApplicationData,
            b"answered",
            &session.to_server,
        );
        assert_eq!(server_reads(&mut session, 8), b"answered", "{suite:?}");
        session.server.write_all(b"still").unwrap();
        assert_eq!(reader.read_data(&session.to_client), b"still");
        assert_eq!(reader.updates, [true]);

        // And one not requested, which asks nothing of us.
        key_update(session.server.ssl(), false);
        session.server.write_all(b"quiet").unwrap();
        assert_eq!(reader.read_data(&session.to_client), b"quiet");
        assert_eq!(reader.updates, [true, false]);
    }
}

#[test]
fn close_notify_ends_the_stream_both_ways() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();

        send(
            &mut writer,
            ContentType::Alert,
            &CLOSE_NOTIFY,
            &session.to_server,
        );
        let mut buf = [0; 16];
        let error = session.server.ssl_read(&mut buf).unwrap_err();
        assert_eq!(error.code(), ErrorCode::ZERO_RETURN, "{suite:?}");

        assert_eq!(session.server.shutdown().unwrap(), ShutdownResult::Received);
        let records = reader.read_all(&session.to_client);
        let (kind, plaintext) = records.last().unwrap();
        assert_eq!(*kind, ContentType::Alert);
        assert_eq!(alert(plaintext), Ok(()), "{suite:?}");
    }
}

#[test]
fn a_changed_record_is_refused_on_both_sides() {
    for suite in SUITES {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        reader.read_all(&session.to_client);
        session.server.write_all(b"intact?").unwrap();
        let record = session.to_client.take_record().unwrap();
        let mut flipped = record.clone();
        flipped[HEADER_LEN + 2] ^= 1;
        assert_eq!(reader.keys.open(&mut flipped), Err(Error::BadRecordMac));
        let mut cleartext = record.clone();
        cleartext[0] = 22;
        let header: &[u8; HEADER_LEN] = cleartext.first_chunk().unwrap();
        assert_eq!(record_len(header), Err(Error::UnexpectedMessage));
        let mut too_long = record;
        too_long[3..5].copy_from_slice(&(MAX_BODY as u16 + 1).to_be_bytes());
        let header: &[u8; HEADER_LEN] = too_long.first_chunk().unwrap();
        assert_eq!(record_len(header), Err(Error::RecordOverflow));

        // OpenSSL refuses our record with a flipped bit too.
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        let mut buf = [0; 64];
        let len = writer
            .seal(ContentType::ApplicationData, &mut buf, 8)
            .unwrap();
        buf[len - 1] ^= 0x80;
        session.to_server.push(&buf[..len]);
        let error = session.server.ssl_read(&mut buf).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SSL, "{suite:?}");
    }
}

#[test]
fn openssl_refuses_an_inner_plaintext_of_zeros_as_we_do() {
    let suite = Suite::Aes128GcmSha256;
    let mut session = handshake(suite);
    let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
    let mut record = [0; HEADER_LEN + 4 + TAG_LEN];
    writer.protect(&mut record).unwrap();
    let mut ours = Keys::new(suite, &session.client_secret, 0).unwrap();
    assert_eq!(
        ours.open(&mut record.clone()),
        Err(Error::UnexpectedMessage)
    );
    session.to_server.push(&record);
    let mut buf = [0; 16];
    let error = session.server.ssl_read(&mut buf).unwrap_err();
    assert_eq!(error.code(), ErrorCode::SSL);
}

/// The alert OpenSSL's server sent last, read by `reader`.
fn last_alert(reader: &mut Reader, session: &Session) -> Option<Vec<u8>> {
    let records = reader.read_all(&session.to_client);
    records
        .into_iter()
        .rev()
        .find(|(kind, _)| *kind == ContentType::Alert)
        .map(|(_, plaintext)| plaintext)
}

#[test]
fn openssl_answers_a_clients_session_ticket_with_unexpected_message_as_we_do() {
    // A well-formed NewSessionTicket: lifetime 60 s, age_add 0, no nonce,
    // a one-byte ticket, no extensions.
    let ticket = [4, 0, 0, 14, 0, 0, 0, 60, 0, 0, 0, 0, 0, 0, 1, 0xaa, 0, 0];
    let mut ours = PostHandshake::new(Sender::Client);
    let error = ours.feed(&ticket, |_| panic!("a message")).unwrap_err();
    assert_eq!(error, Error::UnexpectedMessage);
    assert_eq!(error.alert_to_send(), Some(10));
    // From a server, the same bytes are a ticket.
    let mut tickets = 0;
    PostHandshake::new(Sender::Server)
        .feed(&ticket, |_| tickets += 1)
        .unwrap();
    assert_eq!(tickets, 1);

    for suite in SUITES {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        send(
            &mut writer,
            ContentType::Handshake,
            &ticket,
            &session.to_server,
        );
        let mut buf = [0; 16];
        let error = session.server.ssl_read(&mut buf).unwrap_err();
        assert_eq!(error.code(), ErrorCode::SSL, "{suite:?}");
        // Fatal, unexpected_message.
        assert_eq!(
            last_alert(&mut reader, &session),
            Some(vec![2, 10]),
            "{suite:?}"
        );
    }
}

#[test]
fn openssl_reads_past_32_empty_records_in_a_row_and_refuses_the_33rd_as_we_do() {
    let suite = Suite::Aes128GcmSha256;
    for run in [MAX_EMPTY_RECORDS, MAX_EMPTY_RECORDS + 1] {
        let mut session = handshake(suite);
        let mut reader = Reader::new(suite, &session.server_secret, 0);
        let mut writer = Keys::new(suite, &session.client_secret, 0).unwrap();
        let mut ours = EmptyRecords::default();
        let mut refused = false;
        let mut buf = [0; SEAL_OVERHEAD + 4];
        for _ in 0..run {
            let len = writer
                .seal(ContentType::ApplicationData, &mut buf, 0)
                .unwrap();
            session.to_server.push(&buf[..len]);
            refused |= ours.note(0).is_err();
        }
        send(
            &mut writer,
            ContentType::ApplicationData,
            b"data",
            &session.to_server,
        );
        let mut data = [0; 4];
        let read = session.server.ssl_read(&mut data);
        if run == MAX_EMPTY_RECORDS {
            assert_eq!(read.unwrap(), 4);
            assert_eq!(&data, b"data");
            assert!(!refused, "we refused {run} empty records");
        } else {
            assert_eq!(read.unwrap_err().code(), ErrorCode::SSL);
            assert_eq!(last_alert(&mut reader, &session), Some(vec![2, 10]));
            assert!(refused, "we read {run} empty records");
        }
    }
}
