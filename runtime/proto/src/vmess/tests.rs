//! The client against a server built from the same primitives (the server
//! core's own tests, in `server.rs`, open a request captured from another
//! client).

use std::io;
use std::time::{Duration, UNIX_EPOCH};

use super::body::{BodyOpener, HEADROOM, TAILROOM};
use super::test_support::{at, dial_bytes, entropy, open_request, respond, uuid};
use super::*;
use crate::codec::{DatagramCodec, Opened, StreamCodec};
use crate::Address;

const SECURITIES: [Security; 4] = [
    Security::Aes128Gcm,
    Security::ChaCha20Poly1305,
    Security::None,
    Security::Zero,
];

#[test]
fn a_sealed_request_opens_on_the_server_with_every_field_in_place() {
    let user = User::new(&uuid());
    let targets = [
        Address::Ip("192.0.2.7:443".parse().unwrap()),
        Address::Ip("[2001:db8::1]:53".parse().unwrap()),
        Address::Domain("example.com".into(), 80),
        Address::Domain("a".repeat(255), 1),
    ];
    for (i, target) in targets.iter().enumerate() {
        for security in SECURITIES {
            for command in [Command::Tcp, Command::Udp] {
                let entropy = entropy(i as u8);
                let request = Request::new(
                    &user,
                    command,
                    target,
                    security,
                    at(1_700_000_000),
                    [9, 8, 7, 6],
                    &entropy,
                )
                .unwrap();
                let wire = dial_bytes(request);
                assert!(wire.len() <= HEADER_MAX);
                let opened = open_request(user.cmd_key(), &wire);
                assert_eq!(opened.consumed, wire.len());
                assert_eq!(opened.time, 1_700_000_000);
                assert_eq!(&opened.target, target);
                assert_eq!(opened.command, command as u8);
                assert_eq!(opened.security, security.nibble());
                assert_eq!(opened.body.key, entropy.body_key);
                assert_eq!(opened.body.iv, entropy.body_iv);
                assert_eq!(opened.response_auth, entropy.response_auth);
                assert_eq!(opened.padding, usize::from(entropy.padding_len & 15));
                let expected = match (security, command) {
                    (Security::Zero, Command::Tcp) => 0x00,
                    (Security::None | Security::Zero, _) => 0x05,
                    _ => 0x0d,
                };
                assert_eq!(opened.options, expected, "{security:?} {command:?}");
            }
        }
    }
}

#[test]
fn a_name_longer_than_255_bytes_and_a_clock_before_1970_are_refused() {
    let user = User::new(&uuid());
    let long = Address::Domain("a".repeat(256), 1);
    let e = Request::new(
        &user,
        Command::Tcp,
        &long,
        Security::None,
        at(1),
        [0; 4],
        &entropy(0),
    )
    .err()
    .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let target = Address::Domain("example.com".into(), 1);
    let before = UNIX_EPOCH - Duration::from_secs(1);
    let e = Request::new(
        &user,
        Command::Tcp,
        &target,
        Security::None,
        before,
        [0; 4],
        &entropy(0),
    )
    .err()
    .unwrap();
    assert_eq!(e.to_string(), "vmess: the clock is before 1970");
}

/// Seals `payload` through `codec` in pieces of at most MAX_PAYLOAD, as
/// the framed runtime does.
fn seal_stream(codec: &mut VmessStream, payload: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    for piece in payload.chunks(VmessStream::MAX_PAYLOAD) {
        let mut buf = vec![0u8; HEADROOM + piece.len() + TAILROOM];
        buf[HEADROOM..HEADROOM + piece.len()].copy_from_slice(piece);
        let range = codec.seal(&mut buf, piece.len()).unwrap();
        wire.extend_from_slice(&buf[range]);
    }
    wire
}

/// Opens `wire` through `codec`, handed over `step` bytes at a time.
fn open_stream(codec: &mut VmessStream, wire: &[u8], step: usize) -> io::Result<Vec<u8>> {
    let mut held = Vec::new();
    let mut got = Vec::new();
    for piece in wire.chunks(step) {
        held.extend_from_slice(piece);
        while let Opened::Frame { consumed, payload } = codec.open(&mut held)? {
            got.extend_from_slice(&held[payload]);
            held.drain(..consumed);
        }
    }
    assert!(held.is_empty(), "every byte was opened");
    Ok(got)
}

#[test]
fn every_security_carries_a_stream_both_ways_through_the_server_split_anywhere() {
    let user = User::new(&uuid());
    let target = Address::Domain("example.com".into(), 443);
    let up: Vec<u8> = (0..40_000).map(|i| (i * 7 % 251) as u8).collect();
    let down: [&[u8]; 3] = [b"HTTP/1.1 200 OK\r\n", &[0x5a; 3000], b"\r\n"];
    for security in SECURITIES {
        for step in [1, 7, 18, 19, 1500, usize::MAX] {
            let entropy = entropy(step as u8);
            let request = Request::new(
                &user,
                Command::Tcp,
                &target,
                security,
                at(1_800_000_000),
                [1; 4],
                &entropy,
            )
            .unwrap();
            let header = dial_bytes(request);
            let session = Session::new(security, &entropy);
            let mut client = VmessStream::new(&session).unwrap();

            // The server opens the header, then our chunks, split too.
            let opened = open_request(user.cmd_key(), &header);
            let wire = seal_stream(&mut client, &up);
            let mut server = BodyOpener::new(security, false, &opened.body).unwrap();
            let mut held = Vec::new();
            let mut got = Vec::new();
            for piece in wire.chunks(step.min(wire.len())) {
                held.extend_from_slice(piece);
                while let Opened::Frame { consumed, payload } = server.open(&mut held).unwrap() {
                    got.extend_from_slice(&held[payload]);
                    held.drain(..consumed);
                }
            }
            assert!(got == up, "{security:?} step {step}: the bytes up differ");

            // The server's keys are its own derivation of the request's.
            let response = BodyKey {
                key: ring_sha256_16(&opened.body.key),
                iv: ring_sha256_16(&opened.body.iv),
            };
            let wire = respond(&response, opened.response_auth, security, false, &down);
            assert!(client.finish().is_err(), "no response yet");
            let got = open_stream(&mut client, &wire, step.min(wire.len())).unwrap();
            assert_eq!(got, down.concat(), "{security:?} step {step}");
            assert!(client.finish().is_ok(), "the response was checked");
        }
    }
}

fn ring_sha256_16(bytes: &[u8; 16]) -> [u8; 16] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..16].try_into().unwrap()
}

fn client_and_response(security: Security) -> (VmessStream, Vec<u8>) {
    let entropy = entropy(77);
    let session = Session::new(security, &entropy);
    let client = VmessStream::new(&session).unwrap();
    let wire = respond(
        &session.response,
        entropy.response_auth,
        security,
        false,
        &[b"data"],
    );
    (client, wire)
}

#[test]
fn a_tampered_response_header_or_one_for_another_request_is_refused() {
    for security in SECURITIES {
        for at in [0, 17, 18, 30, 37] {
            let (mut client, mut wire) = client_and_response(security);
            wire[at] ^= 0x40;
            let e = open_stream(&mut client, &wire, wire.len()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert_eq!(
                e.to_string(),
                "vmess: the response header failed authentication (wrong id or corrupt data)"
            );
        }
        let entropy = entropy(77);
        let session = Session::new(security, &entropy);
        let mut client = VmessStream::new(&session).unwrap();
        let wire = respond(
            &session.response,
            entropy.response_auth ^ 1,
            security,
            false,
            &[b"x"],
        );
        let e = open_stream(&mut client, &wire, wire.len()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vmess: the response header answers another request"
        );
    }
}

#[test]
fn a_tampered_chunk_after_a_good_header_is_refused() {
    for security in [Security::Aes128Gcm, Security::ChaCha20Poly1305] {
        let (mut client, mut wire) = client_and_response(security);
        wire[38 + 3] ^= 1;
        let e = open_stream(&mut client, &wire, wire.len()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vmess: a chunk failed authentication (wrong key or corrupt data)"
        );
    }
}

#[test]
fn udp_packets_keep_their_boundaries_and_come_back_from_the_one_target() {
    let user = User::new(&uuid());
    let target = Address::Ip("192.0.2.53:53".parse().unwrap());
    let elsewhere = Address::Domain("ignored.example".into(), 9);
    let packets: [&[u8]; 3] = [b"query one", &[0xab; 1200], b"q3"];
    for security in SECURITIES {
        for step in [1, 20, 1300, usize::MAX] {
            let entropy = entropy(3);
            let request = Request::new(
                &user,
                Command::Udp,
                &target,
                security,
                at(1_800_000_000),
                [2; 4],
                &entropy,
            )
            .unwrap();
            let opened = open_request(user.cmd_key(), &dial_bytes(request));
            assert_eq!((opened.command, &opened.target), (2, &target));
            let session = Session::new(security, &entropy);
            let mut client = VmessDatagram::new(&session, target.clone()).unwrap();

            // Up: each packet one chunk, whatever address it names.
            let mut server = BodyOpener::new(security, true, &opened.body).unwrap();
            for packet in packets {
                let mut buf = vec![0u8; HEADROOM + packet.len() + TAILROOM];
                buf[HEADROOM..HEADROOM + packet.len()].copy_from_slice(packet);
                let range = client.seal_to(&mut buf, packet.len(), &elsewhere).unwrap();
                let mut wire = buf[range].to_vec();
                let Opened::Frame { consumed, payload } = server.open(&mut wire).unwrap() else {
                    panic!("one whole chunk");
                };
                assert_eq!((consumed, &wire[payload]), (wire.len(), packet));
            }

            // Down: the response header, then the packets, split anywhere.
            let wire = respond(
                &session.response,
                entropy.response_auth,
                security,
                true,
                &packets,
            );
            let mut held = Vec::new();
            let mut got = Vec::new();
            for piece in wire.chunks(step.min(wire.len())) {
                held.extend_from_slice(piece);
                while let Some(packet) = client.open_from(&mut held).unwrap() {
                    assert_eq!(packet.peer, target);
                    got.push(held[packet.payload.clone()].to_vec());
                    held.drain(..packet.consumed);
                }
            }
            assert!(held.is_empty());
            assert_eq!(got, packets, "{security:?} step {step}");
        }
    }
}

#[test]
fn a_shut_down_direction_ends_with_an_empty_chunk_that_reads_as_the_end() {
    let user = User::new(&uuid());
    let target = Address::Domain("example.com".into(), 443);
    for security in SECURITIES {
        let chunked = security.layout(false).chunked;
        let entropy = entropy(9);
        let request = Request::new(
            &user,
            Command::Tcp,
            &target,
            security,
            at(1_800_000_000),
            [1; 4],
            &entropy,
        )
        .unwrap();
        let opened = open_request(user.cmd_key(), &dial_bytes(request));
        let session = Session::new(security, &entropy);
        let mut client = VmessStream::new(&session).unwrap();

        // Up: our data, then the end v2ray sends under a chunked layout
        // (an empty chunk), which the server reads as the upload's end.
        let mut wire = seal_stream(&mut client, b"upload");
        let mut buf = vec![0u8; HEADROOM + TAILROOM];
        let end = client.seal_end(&mut buf).unwrap();
        assert_eq!(!end.is_empty(), chunked, "{security:?}");
        wire.extend_from_slice(&buf[end]);
        let mut server = BodyOpener::new(security, false, &opened.body).unwrap();
        let (got, ended) = open_until_end(&mut server, BodyOpener::open, BodyOpener::ended, wire);
        assert_eq!(got, b"upload", "{security:?}");
        assert_eq!(ended, chunked, "{security:?}: the end was read");

        // Down: the server's empty chunk ends the download for our client,
        // after the bytes before it.
        let response = BodyKey {
            key: ring_sha256_16(&opened.body.key),
            iv: ring_sha256_16(&opened.body.iv),
        };
        let wire = respond(
            &response,
            opened.response_auth,
            security,
            false,
            &[b"hi", b""],
        );
        let (got, ended) = open_until_end(&mut client, VmessStream::open, VmessStream::ended, wire);
        assert_eq!(got, b"hi", "{security:?}");
        assert_eq!(ended, chunked, "{security:?}: the end was read");
    }
}

/// Opens every frame of `held` with `open`, stopping at the one after
/// which `ended` says the stream ended: the payloads, and whether it did
/// (with every byte consumed).
fn open_until_end<T>(
    codec: &mut T,
    open: fn(&mut T, &mut [u8]) -> io::Result<Opened>,
    ended: fn(&T) -> bool,
    mut held: Vec<u8>,
) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    while let Opened::Frame { consumed, payload } = open(codec, &mut held).unwrap() {
        got.extend_from_slice(&held[payload]);
        held.drain(..consumed);
        if ended(codec) {
            assert!(held.is_empty(), "the end is the last chunk");
            return (got, true);
        }
    }
    assert!(held.is_empty(), "every byte was opened");
    (got, false)
}
