//! A Shadowsocks 2022 TCP flow, client side (SIP022 3.1).
//!
//! ```text
//! request:  salt | identity headers | [type 0, timestamp, length] | [address, padding length, padding]
//!           | [length] [payload] ...
//! response: salt | [type 1, timestamp, request salt, length] [payload] | [length] [payload] ...
//! ```
//!
//! Every `[...]` is sealed under the session key of its direction's salt,
//! with a little-endian nonce counting every record. The request is staged
//! whole by `start`, padded since it carries no payload (the runtime sends
//! it in front of the first payload's chunks); the response header
//! is opened as a frame of its own with no payload, so a first chunk of
//! 0xFFFF bytes fits the buffer as every later one does.

use std::io;
use std::ops::Range;
use std::time::SystemTime;

use super::chunks::{seal_chunk, Chunks, Sealed, LENGTH_RECORD};
use super::kdf::{session_key, Key};
use super::{
    address, identity, random, timestamp_fresh, unix_secs, Keys, Ss2022Error, MAX_KEY_LEN,
    MAX_PAYLOAD, MAX_RECORD_LEN,
};
use crate::aead::{Algorithm, TAG_LEN};
use crate::codec::{ClientCodec, ClientStep, Opened, StreamCodec};
use crate::Address;

const CLIENT_STREAM: u8 = 0;
const SERVER_STREAM: u8 = 1;
/// The response header's plaintext, longest: type, timestamp, a 32-byte
/// request salt, length.
const RESPONSE_HEADER_MAX: usize = 1 + 8 + MAX_KEY_LEN + 2;

pub struct Ss2022Stream {
    algorithm: Algorithm,
    psk: Key,
    salt_len: usize,
    /// The request's salt: the response header must name it.
    request_salt: [u8; MAX_KEY_LEN],
    send: Sealed,
    /// The request, sealed when the flow is built, until `start` hands it out.
    request: Vec<u8>,
    /// The response's chunks, once its salt and header are opened.
    recv: Option<Chunks>,
    /// The caller's clock, read when the response header arrives: the
    /// server stamps it when its first byte leaves, which may be long
    /// after the dial.
    clock: fn() -> SystemTime,
}

impl Ss2022Stream {
    /// Frames of one frame's worth: the largest chunk a peer sends.
    pub const BUF_SIZE: usize = MAX_RECORD_LEN;

    /// A flow to `destination`, its request stamped with `now`, under a
    /// fresh salt and a random padding.
    pub fn new(
        keys: &Keys,
        destination: &Address,
        now: SystemTime,
        clock: fn() -> SystemTime,
    ) -> io::Result<Ss2022Stream> {
        let mut salt = [0; MAX_KEY_LEN];
        let padding = random::salt_and_padding(&mut salt[..keys.salt_len()])?;
        Self::with_salt(keys, destination, now, clock, &salt, padding)
    }

    fn with_salt(
        keys: &Keys,
        destination: &Address,
        now: SystemTime,
        clock: fn() -> SystemTime,
        salt: &[u8; MAX_KEY_LEN],
        padding: usize,
    ) -> io::Result<Ss2022Stream> {
        let salt_len = keys.salt_len();
        let salt_bytes = &salt[..salt_len];
        let mut send = Sealed::new(session_key(keys.algorithm(), keys.psk(), salt_bytes)?);

        let variable_len = address::encoded_len(destination) + 2 + padding;
        let mut request = Vec::with_capacity(
            salt_len + 16 * keys.identities().len() + 11 + TAG_LEN + variable_len + TAG_LEN,
        );
        request.extend_from_slice(salt_bytes);
        identity::append_tcp(keys.identities(), salt_bytes, &mut request)?;

        let fixed = request.len();
        request.push(CLIENT_STREAM);
        request.extend_from_slice(&unix_secs(now).to_be_bytes());
        // At most 259 + 2 + MAX_PADDING: it fits two bytes.
        request.extend_from_slice(&(variable_len as u16).to_be_bytes());
        request.resize(request.len() + TAG_LEN, 0);
        send.seal(&mut request[fixed..])?;

        let variable = request.len();
        request.resize(variable + variable_len + TAG_LEN, 0);
        let at = variable + address::write(destination, &mut request[variable..]);
        request[at..at + 2].copy_from_slice(&(padding as u16).to_be_bytes());
        send.seal(&mut request[variable..])?;

        Ok(Ss2022Stream {
            algorithm: keys.algorithm(),
            psk: *keys.psk(),
            salt_len,
            request_salt: *salt,
            send,
            request,
            recv: None,
            clock,
        })
    }

    /// Opens the response salt and header at the start of `buf`: a frame
    /// with no payload, after which the first payload chunk follows.
    fn open_header(&mut self, buf: &[u8]) -> io::Result<Opened> {
        let salt_len = self.salt_len;
        let plain_len = 1 + 8 + salt_len + 2;
        let header_len = salt_len + plain_len + TAG_LEN;
        let Some(header) = buf.get(..header_len) else {
            return Ok(Opened::NeedMore { needed: header_len });
        };
        let (salt, sealed_header) = header.split_at(salt_len);
        let mut sealed = Sealed::new(session_key(self.algorithm, &self.psk, salt)?);
        // Opened from a copy, so what is given back is never changed.
        let mut plain = [0; RESPONSE_HEADER_MAX + TAG_LEN];
        let plain = &mut plain[..plain_len + TAG_LEN];
        plain.copy_from_slice(sealed_header);
        sealed.open(plain)?;
        if plain[0] != SERVER_STREAM {
            return Err(Ss2022Error::NotServer.into());
        }
        let timestamp = u64::from_be_bytes(plain[1..9].try_into().expect("8 bytes"));
        if !timestamp_fresh(timestamp, (self.clock)()) {
            return Err(Ss2022Error::Timestamp.into());
        }
        if plain[9..9 + salt_len] != self.request_salt[..salt_len] {
            return Err(Ss2022Error::SaltMismatch.into());
        }
        let first = usize::from(u16::from_be_bytes([
            plain[9 + salt_len],
            plain[10 + salt_len],
        ]));
        self.recv = Some(Chunks::after_header(sealed, first));
        Ok(Opened::Frame {
            consumed: header_len,
            payload: header_len..header_len,
        })
    }
}

impl ClientCodec for Ss2022Stream {
    type Reply = ();

    /// The longest request: a 32-byte salt, 16 identity headers, the fixed
    /// chunk (27), and the variable one (a 259-byte address, 2 + 900 of
    /// padding, a tag) is 1,492 bytes.
    const STAGING_RESERVE: usize = 2048;

    /// The whole request in one write (SIP022 3.1.4); nothing is awaited,
    /// since the server answers only with its first payload.
    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        out.extend_from_slice(&std::mem::take(&mut self.request));
        Ok(ClientStep::Open(()))
    }
}

impl StreamCodec for Ss2022Stream {
    const HEADROOM: usize = LENGTH_RECORD;
    const TAILROOM: usize = TAG_LEN;
    const MAX_PAYLOAD: usize = MAX_PAYLOAD;

    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        seal_chunk(&mut self.send, buf, len)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        match &mut self.recv {
            Some(chunks) => chunks.open(buf),
            None => self.open_header(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::AeadError;
    use crate::ss2022::identity::tests::{hash16, peel_tcp};
    use crate::ss2022::tests::{psk, t0, METHODS};
    use etemenanki_ir::spec::Ss2022Method;
    use std::time::Duration;

    fn t0_plus_29() -> SystemTime {
        t0() + Duration::from_secs(29)
    }
    fn t0_plus_31() -> SystemTime {
        t0() + Duration::from_secs(31)
    }

    fn dest() -> Address {
        Address::Domain("echo.example".into(), 7)
    }

    /// A server from the same primitives: it opens a request, checks what
    /// SIP022 says a server checks, and answers.
    struct Server {
        algorithm: Algorithm,
        psk: Key,
        salt_len: usize,
        recv: Sealed,
        send: Sealed,
        request_salt: Vec<u8>,
    }

    struct Request {
        destination: Address,
        timestamp: u64,
        padding: usize,
        consumed: usize,
    }

    impl Server {
        /// Opens a request under `psk`, through identity headers for
        /// `ipsks` (the server's own identity first).
        fn open(
            method: Ss2022Method,
            psk: &[u8],
            ipsks: &[&[u8]],
            wire: &[u8],
        ) -> io::Result<(Server, Request)> {
            let keys = Keys::new(method, psk, &[])?;
            let salt_len = keys.salt_len();
            let salt = &wire[..salt_len];
            let mut at = salt_len;
            for (i, ipsk) in ipsks.iter().enumerate() {
                let found = peel_tcp(ipsk, salt, &wire[at..at + 16]);
                let expected = ipsks.get(i + 1).map_or_else(|| hash16(psk), |k| hash16(k));
                if found != expected {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "unknown identity",
                    ));
                }
                at += 16;
            }
            let mut recv = Sealed::new(session_key(keys.algorithm(), keys.psk(), salt)?);
            let mut fixed = wire[at..at + 11 + TAG_LEN].to_vec();
            recv.open(&mut fixed)?;
            assert_eq!(fixed[0], CLIENT_STREAM);
            let timestamp = u64::from_be_bytes(fixed[1..9].try_into().unwrap());
            let variable_len = usize::from(u16::from_be_bytes([fixed[9], fixed[10]]));
            at += 11 + TAG_LEN;
            let mut variable = wire[at..at + variable_len + TAG_LEN].to_vec();
            recv.open(&mut variable)?;
            at += variable_len + TAG_LEN;
            let (destination, used) = address::read(&variable).unwrap();
            let padding = usize::from(u16::from_be_bytes([variable[used], variable[used + 1]]));
            // The header holds the padding exactly and no initial payload.
            assert_eq!(used + 2 + padding, variable_len);
            let mut salt_out = vec![0x33; salt_len];
            salt_out[0] = 0x44;
            let send = Sealed::new(session_key(keys.algorithm(), keys.psk(), &salt_out)?);
            Ok((
                Server {
                    algorithm: keys.algorithm(),
                    psk: *keys.psk(),
                    salt_len,
                    recv,
                    send,
                    request_salt: salt.to_vec(),
                },
                Request {
                    destination,
                    timestamp,
                    padding,
                    consumed: at,
                },
            ))
        }

        /// The response: salt, header naming `request_salt` at `timestamp`,
        /// and the first chunk, then one chunk per further payload.
        fn respond(&mut self, timestamp: u64, request_salt: &[u8], payloads: &[&[u8]]) -> Vec<u8> {
            let mut salt_out = vec![0x33; self.salt_len];
            salt_out[0] = 0x44;
            let mut wire = salt_out;
            let start = wire.len();
            wire.push(SERVER_STREAM);
            wire.extend_from_slice(&timestamp.to_be_bytes());
            wire.extend_from_slice(request_salt);
            wire.extend_from_slice(&(payloads[0].len() as u16).to_be_bytes());
            wire.resize(wire.len() + TAG_LEN, 0);
            self.send.seal(&mut wire[start..]).unwrap();
            for (i, payload) in payloads.iter().enumerate() {
                if i > 0 {
                    let at = wire.len();
                    wire.extend_from_slice(&(payload.len() as u16).to_be_bytes());
                    wire.resize(at + LENGTH_RECORD, 0);
                    self.send.seal(&mut wire[at..]).unwrap();
                }
                let at = wire.len();
                wire.extend_from_slice(payload);
                wire.resize(at + payload.len() + TAG_LEN, 0);
                self.send.seal(&mut wire[at..]).unwrap();
            }
            wire
        }

        /// Opens one length and payload chunk of the request stream.
        fn open_chunk(&mut self, wire: &[u8]) -> Vec<u8> {
            let mut length = wire[..LENGTH_RECORD].to_vec();
            self.recv.open(&mut length).unwrap();
            let len = usize::from(u16::from_be_bytes([length[0], length[1]]));
            let mut payload = wire[LENGTH_RECORD..LENGTH_RECORD + len + TAG_LEN].to_vec();
            self.recv.open(&mut payload).unwrap();
            payload.truncate(len);
            payload
        }
    }

    fn client(
        method: Ss2022Method,
        ipsks: &[&[u8]],
        clock: fn() -> SystemTime,
    ) -> (Ss2022Stream, Vec<u8>) {
        let keys = Keys::new(method, &psk(method, 7), ipsks).unwrap();
        let mut stream = Ss2022Stream::new(&keys, &dest(), t0(), clock).unwrap();
        let mut out = Vec::new();
        assert_eq!(stream.start(&mut out).unwrap(), ClientStep::Open(()));
        assert!(out.len() <= Ss2022Stream::STAGING_RESERVE);
        (stream, out)
    }

    /// Opens everything in `wire`, handed over `split` bytes at a time as
    /// the framed runtime would; returns the payload bytes.
    fn open_all(stream: &mut Ss2022Stream, wire: &[u8], split: usize) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        let mut fed = 0;
        let mut got = Vec::new();
        loop {
            match stream.open(&mut buf)? {
                Opened::Frame { consumed, payload } => {
                    got.extend_from_slice(&buf[payload]);
                    buf.drain(..consumed);
                }
                Opened::NeedMore { needed } => {
                    assert!(needed > buf.len() && needed <= Ss2022Stream::BUF_SIZE);
                    if fed == wire.len() {
                        return Ok(got);
                    }
                    let n = split.min(wire.len() - fed);
                    buf.extend_from_slice(&wire[fed..fed + n]);
                    fed += n;
                }
            }
        }
    }

    #[test]
    fn a_request_opens_at_the_server_with_its_destination_time_and_padding() {
        for method in METHODS {
            let (_, wire) = client(method, &[], t0);
            let (_, request) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
            assert_eq!(request.destination, dest());
            assert_eq!(request.timestamp, 1_750_000_000);
            assert!((1..=900).contains(&request.padding));
            assert_eq!(request.consumed, wire.len());
        }
    }

    #[test]
    fn the_response_and_our_chunks_round_trip_split_anywhere() {
        for method in METHODS {
            let (mut stream, wire) = client(method, &[], t0_plus_29);
            let (mut server, _) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
            let big: Vec<u8> = (0..MAX_PAYLOAD).map(|i| (i * 31 % 251) as u8).collect();
            let salt = server.request_salt.clone();
            let response = server.respond(1_750_000_000, &salt, &[b"hello", &big, b"", b"!"]);
            let mut expected = b"hello".to_vec();
            expected.extend_from_slice(&big);
            expected.push(b'!');
            for split in [1, 17, 1000, response.len()] {
                let (mut stream, wire) = client(method, &[], t0_plus_29);
                let (mut server, _) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
                let salt = server.request_salt.clone();
                let response = server.respond(1_750_000_000, &salt, &[b"hello", &big, b"", b"!"]);
                assert!(
                    open_all(&mut stream, &response, split).unwrap() == expected,
                    "{method:?} /{split}"
                );
            }
            // Upstream: a full chunk and a small one, sealed where they lie.
            let mut buf = vec![0; Ss2022Stream::BUF_SIZE];
            buf[LENGTH_RECORD..LENGTH_RECORD + big.len()].copy_from_slice(&big);
            let range = stream.seal(&mut buf, big.len()).unwrap();
            assert_eq!(range, 0..Ss2022Stream::BUF_SIZE);
            assert!(server.open_chunk(&buf[range]) == big);
            buf[LENGTH_RECORD..LENGTH_RECORD + 3].copy_from_slice(b"abc");
            let range = stream.seal(&mut buf, 3).unwrap();
            assert_eq!(server.open_chunk(&buf[range]), b"abc");
            assert_eq!(
                stream.seal(&mut buf, MAX_PAYLOAD + 1).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn a_response_timestamp_outside_the_window_is_refused() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        for (clock, stamp, ok) in [
            (t0_plus_31 as fn() -> SystemTime, 1_750_000_000, false),
            (t0_plus_29, 1_750_000_000, true),
            (t0, 1_750_000_031, false),
            (t0, 1_749_999_970, true),
        ] {
            let (mut stream, wire) = client(method, &[], clock);
            let (mut server, _) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
            let salt = server.request_salt.clone();
            let response = server.respond(stamp, &salt, &[b"x"]);
            let got = open_all(&mut stream, &response, response.len());
            if ok {
                assert_eq!(got.unwrap(), b"x");
            } else {
                let e = got.unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                assert_eq!(e.to_string(), Ss2022Error::Timestamp.message());
            }
        }
    }

    #[test]
    fn a_response_for_another_request_or_of_the_wrong_type_is_refused() {
        let method = Ss2022Method::Blake3Aes256Gcm;
        let (mut stream, wire) = client(method, &[], t0);
        let (mut server, _) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
        let response = server.respond(1_750_000_000, &[0x99; 32], &[b"x"]);
        let e = open_all(&mut stream, &response, 7).unwrap_err();
        assert_eq!(e.to_string(), Ss2022Error::SaltMismatch.message());

        // A request stream echoed back is not a response.
        let (mut stream, wire) = client(method, &[], t0);
        let e = open_all(&mut stream, &wire, wire.len()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_wrong_psk_is_refused_both_ways() {
        for method in METHODS {
            let (_, wire) = client(method, &[], t0);
            let e = Server::open(method, &psk(method, 8), &[], &wire)
                .err()
                .unwrap();
            assert_eq!(e.to_string(), AeadError::Unauthentic.message());

            // A server with another key answers: our first open fails.
            let (mut stream, wire) = client(method, &[], t0);
            let (mut server, _) = Server::open(method, &psk(method, 7), &[], &wire).unwrap();
            server.psk = Key::for_test(&psk(method, 8));
            let mut salt_out = vec![0x33; server.salt_len];
            salt_out[0] = 0x44;
            server.send =
                Sealed::new(session_key(server.algorithm, &server.psk, &salt_out).unwrap());
            let salt = server.request_salt.clone();
            let response = server.respond(1_750_000_000, &salt, &[b"x"]);
            let e = open_all(&mut stream, &response, response.len()).unwrap_err();
            assert_eq!(e.to_string(), AeadError::Unauthentic.message());
        }
    }

    #[test]
    fn identity_headers_lead_two_users_to_their_own_keys() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        let server_identity = [0x10; 16];
        for user in [7u8, 9] {
            let keys = Keys::new(method, &psk(method, user), &[&server_identity]).unwrap();
            let mut stream = Ss2022Stream::new(&keys, &dest(), t0(), t0).unwrap();
            let mut wire = Vec::new();
            stream.start(&mut wire).unwrap();
            // The server finds the user by the hash its identity header names.
            let found = peel_tcp(&server_identity, &wire[..16], &wire[16..32]);
            let user_psk = [7u8, 9]
                .into_iter()
                .map(|u| psk(method, u))
                .find(|k| hash16(k) == found)
                .unwrap();
            assert_eq!(user_psk, psk(method, user));
            let (mut server, request) =
                Server::open(method, &user_psk, &[&server_identity], &wire).unwrap();
            assert_eq!(request.destination, dest());
            let salt = server.request_salt.clone();
            let response = server.respond(1_750_000_000, &salt, &[b"hi"]);
            assert_eq!(open_all(&mut stream, &response, 5).unwrap(), b"hi");
        }
        // Two identities: a relay's, then the server's.
        let keys = Keys::new(method, &psk(method, 7), &[&[0x10; 16], &[0x20; 16]]).unwrap();
        let mut stream = Ss2022Stream::new(&keys, &dest(), t0(), t0).unwrap();
        let mut wire = Vec::new();
        stream.start(&mut wire).unwrap();
        assert!(Server::open(method, &psk(method, 7), &[&[0x10; 16], &[0x20; 16]], &wire).is_ok());
        assert!(Server::open(method, &psk(method, 7), &[&[0x20; 16], &[0x10; 16]], &wire).is_err());
    }

    #[test]
    fn the_request_header_is_pinned_for_a_fixed_salt_and_padding() {
        // The same inputs give the same bytes: the layout is the wire's.
        let method = Ss2022Method::Blake3Aes128Gcm;
        let keys = Keys::new(method, &psk(method, 7), &[]).unwrap();
        let salt = [0x01; MAX_KEY_LEN];
        let a = Ss2022Stream::with_salt(&keys, &dest(), t0(), t0, &salt, 3)
            .unwrap()
            .request;
        let b = Ss2022Stream::with_salt(&keys, &dest(), t0(), t0, &salt, 3)
            .unwrap()
            .request;
        assert_eq!(a, b);
        // salt 16, fixed chunk 27, variable: address 1+1+12+2, padding 2+3, tag.
        assert_eq!(a.len(), 16 + 27 + 16 + 5 + 16);
        assert_eq!(&a[..16], &salt[..16]);
    }

    #[test]
    fn any_bytes_are_refused_or_awaited_without_a_panic() {
        let method = Ss2022Method::Blake3Chacha20Poly1305;
        let (mut stream, _) = client(method, &[], t0);
        let mut junk: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
        for len in [0, 1, 32, 74, 75, 4000] {
            let got = stream.open(&mut junk[..len]);
            assert!(matches!(got, Ok(Opened::NeedMore { .. })) || got.is_err());
        }
    }
}
