//! The Trojan server core: a request is the password's hash, CRLF, a
//! command and an address, CRLF; the server answers nothing.
//!
//! A client that does not speak Trojan, or sends a hash no user has, is
//! refused silently so the runtime can hand every byte it read to the
//! fallback (a web server), as trojan-gfw's `remote_addr` does. The core
//! decides without consuming anything it was not sure of, and refuses as
//! soon as the bytes cannot be Trojan: a byte of the hash that is not
//! lowercase hex, or no CRLF after it. It never refuses on a partial hash
//! matching no user, which would let a prober learn a hash byte by byte.
//!
//! With a fallback ([`Core::with_fallback`]) the first read decides, as
//! Xray and sing-box have it: one too short to hold the hash and its CRLF
//! (58 bytes, CRLF at 56) is refused at once, so a prober's `a` reaches the
//! web server as soon as it would directly, not after the handshake limit.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use super::password::{PasswordHash, HASH_LEN};
use super::CRLF;
use crate::codec::{FlowKind, Refusal, ServerCore, ServerRequest, ServerStep};
use crate::socks::read_address;
use crate::Address;

const CMD_CONNECT: u8 = 0x01;
const CMD_UDP_ASSOCIATE: u8 = 0x03;

/// The hashes of an inbound's passwords, sorted, shared by its connections.
pub struct Users {
    hashes: Vec<[u8; HASH_LEN]>,
}

impl Users {
    pub fn new(passwords: &[&str]) -> Self {
        let mut hashes: Vec<[u8; HASH_LEN]> = passwords
            .iter()
            .map(|password| *PasswordHash::new(password).as_bytes())
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        Users { hashes }
    }

    /// Whether a user's password hashes to `hash`.
    pub fn knows(&self, hash: &[u8; HASH_LEN]) -> bool {
        self.hashes.binary_search(hash).is_ok()
    }
}

/// A whole, authenticated Trojan request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    kind: FlowKind,
    /// The destination of a CONNECT; for a UDP association, the address
    /// the request names (a placeholder: every packet names its own).
    destination: Address,
    /// The hash of the user's password.
    user: [u8; HASH_LEN],
}

impl Request {
    /// The hash of the password the client authenticated with: what a new
    /// user table is asked whether this client's user remains.
    pub fn user(&self) -> &[u8; HASH_LEN] {
        &self.user
    }
}

impl ServerRequest for Request {
    fn destination(&self) -> &Address {
        &self.destination
    }

    fn kind(&self) -> FlowKind {
        self.kind
    }

    /// Trojan answers nothing: the client's stream is open once it wrote.
    fn on_connected(&self, _bound: SocketAddr, _out: &mut Vec<u8>) {}

    /// Nothing either: the connection is closed.
    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

/// The server side of one Trojan connection. After an Open for a UDP
/// association the stream carries Trojan UDP packets, framed both ways by
/// [`super::UdpFraming`]: from the client each names its destination, and
/// the server names each reply's source.
pub struct Core {
    users: Arc<Users>,
    /// The next input is the first read's, judged whole or refused.
    first_read_decides: bool,
}

impl Core {
    pub fn new(users: Arc<Users>) -> Self {
        Core {
            users,
            first_read_decides: false,
        }
    }

    /// For an inbound whose refused clients go to a fallback: a first read
    /// without the whole hash and its CRLF is refused at once.
    pub fn with_fallback(self) -> Self {
        Core {
            first_read_decides: true,
            ..self
        }
    }
}

fn not_trojan() -> Refusal {
    Refusal::silent("trojan: not a trojan request")
}

impl ServerCore for Core {
    type Request = Request;

    /// A request with a 255-byte domain fits well within.
    const MAX_HANDSHAKE: usize = 2048;

    /// Trojan has no time window: `now` is not used. Nothing is consumed
    /// before the request is whole, so a refusal leaves every byte to the
    /// fallback.
    fn advance(
        &mut self,
        input: &[u8],
        _now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        let need_more = Ok(ServerStep::NeedMore { consumed: 0 });
        if std::mem::take(&mut self.first_read_decides)
            && input.get(HASH_LEN..HASH_LEN + 2) != Some(&CRLF[..])
        {
            return Err(Refusal::silent(
                "trojan: the first read holds no password hash and CRLF",
            ));
        }
        let hash = &input[..input.len().min(HASH_LEN)];
        if !hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(not_trojan());
        }
        let crlf = &input[hash.len()..input.len().min(HASH_LEN + 2)];
        if crlf != &CRLF[..crlf.len()] {
            return Err(not_trojan());
        }
        let Some((hash, rest)) = input.split_first_chunk::<HASH_LEN>() else {
            return need_more;
        };
        let Some(rest) = rest.get(2..) else {
            return need_more;
        };
        if !self.users.knows(hash) {
            return Err(Refusal::silent("trojan: unknown password"));
        }
        let Some((&command, rest)) = rest.split_first() else {
            return need_more;
        };
        let kind = match command {
            CMD_CONNECT => FlowKind::Stream,
            CMD_UDP_ASSOCIATE => FlowKind::Datagrams,
            _ => return Err(Refusal::silent("trojan: unknown command")),
        };
        let (destination, used) = match read_address(rest) {
            Ok(Some(found)) => found,
            Ok(None) => return need_more,
            Err(_) => return Err(Refusal::silent("trojan: bad address in the request")),
        };
        match rest.get(used..used + 2) {
            None if rest.len() == used + 1 && rest[used] == CRLF[0] => need_more,
            None if rest.len() == used => need_more,
            Some(end) if end == CRLF => Ok(ServerStep::Open {
                consumed: HASH_LEN + 2 + 1 + used + 2,
                request: Request {
                    kind,
                    destination,
                    user: *hash,
                },
            }),
            _ => Err(Refusal::silent("trojan: the request does not end in CRLF")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::codec::{ClientCodec, DatagramCodec};
    use crate::trojan::{Command, Request as ClientRequest, UdpFraming, PACKET_HEADER_MAX};

    fn core() -> Core {
        Core::new(Arc::new(Users::new(&["other", "secret", "third"])))
    }

    fn client_request(password: &str, command: Command<'_>) -> Vec<u8> {
        let hash = PasswordHash::new(password);
        let mut out = Vec::new();
        ClientRequest::new(&hash, command).start(&mut out).unwrap();
        out
    }

    fn advance(core: &mut Core, input: &[u8]) -> Result<ServerStep<Request>, Refusal> {
        core.advance(input, UNIX_EPOCH, &mut Vec::new())
    }

    /// Feeds `wire` one more byte at a time from the start, as the runtime
    /// hands the unconsumed bytes: every prefix short of the request needs
    /// more and consumes nothing; returns the first answer that is not
    /// need-more and the length it came at.
    fn trickle(wire: &[u8]) -> (Result<ServerStep<Request>, Refusal>, usize) {
        let mut core = core();
        for end in 0..=wire.len() {
            match advance(&mut core, &wire[..end]) {
                Ok(ServerStep::NeedMore { consumed: 0 }) => continue,
                other => return (other, end),
            }
        }
        panic!("the request never completed");
    }

    #[test]
    fn a_connect_from_our_client_opens_a_stream_and_leaves_the_payload() {
        let destination = Address::Domain("example.com".into(), 443);
        let mut wire = client_request("secret", Command::Connect(&destination));
        let header = wire.len();
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let step = advance(&mut core(), &wire).unwrap();
        let ServerStep::Open { consumed, request } = step else {
            panic!("a whole request opens");
        };
        assert_eq!(consumed, header);
        assert_eq!(request.destination(), &destination);
        assert_eq!(request.kind(), FlowKind::Stream);
        let mut out = Vec::new();
        request.on_connected("127.0.0.1:1".parse().unwrap(), &mut out);
        request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut out);
        assert!(out.is_empty(), "trojan answers nothing");
    }

    #[test]
    fn a_request_fed_byte_by_byte_opens_only_once_whole() {
        for destination in [
            Address::Ip("192.0.2.1:80".parse().unwrap()),
            Address::Ip("[2001:db8::1]:443".parse().unwrap()),
            Address::Domain(
                format!("{0}.{0}.{0}.{1}", "a".repeat(63), "a".repeat(61)),
                1,
            ),
        ] {
            let wire = client_request("third", Command::Connect(&destination));
            let (step, at) = trickle(&wire);
            assert_eq!(at, wire.len(), "{step:?}");
            let Ok(ServerStep::Open { consumed, request }) = step else {
                panic!("opens")
            };
            assert_eq!(
                (consumed, request.destination()),
                (wire.len(), &destination)
            );
        }
    }

    #[test]
    fn with_a_fallback_a_first_read_short_of_the_hash_and_crlf_is_refused_at_once() {
        let destination = Address::Domain("example.com".into(), 443);
        let wire = client_request("secret", Command::Connect(&destination));
        let short = Err(Refusal::silent(
            "trojan: the first read holds no password hash and CRLF",
        ));
        let mut hex_no_crlf = wire[..HASH_LEN].to_vec();
        hex_no_crlf.extend_from_slice(b"\r\r");
        for first in [
            &b"a"[..],
            &wire[..1],
            &wire[..HASH_LEN],
            &wire[..57],
            &hex_no_crlf,
        ] {
            assert_eq!(
                advance(&mut core().with_fallback(), first),
                short,
                "{first:?}"
            );
        }
        // Without one, a prefix of a request waits for the rest.
        for first in [&wire[..1], &wire[..HASH_LEN], &wire[..57]] {
            assert_eq!(
                advance(&mut core(), first),
                Ok(ServerStep::NeedMore { consumed: 0 })
            );
        }
        // A first read with the hash and its CRLF goes on: the command and
        // the address may come in later reads.
        let mut core = core().with_fallback();
        assert_eq!(
            advance(&mut core, &wire[..HASH_LEN + 2]),
            Ok(ServerStep::NeedMore { consumed: 0 })
        );
        assert_eq!(
            advance(&mut core, &wire[..HASH_LEN + 4]),
            Ok(ServerStep::NeedMore { consumed: 0 })
        );
        assert!(matches!(
            advance(&mut core, &wire),
            Ok(ServerStep::Open { consumed, .. }) if consumed == wire.len()
        ));
    }

    #[test]
    fn a_wrong_password_is_refused_silently_once_the_hash_is_whole() {
        let destination = Address::Ip("192.0.2.1:80".parse().unwrap());
        let wire = client_request("wrong", Command::Connect(&destination));
        let (step, at) = trickle(&wire);
        assert_eq!(at, HASH_LEN + 2, "not before: a partial hash tells nothing");
        assert_eq!(step, Err(Refusal::silent("trojan: unknown password")));
    }

    #[test]
    fn bytes_that_are_not_trojan_are_refused_at_the_first_byte_that_tells() {
        let (step, at) = trickle(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n");
        assert_eq!((step, at), (Err(not_trojan()), 1));
        let mut upper = PasswordHash::new("secret").as_bytes().to_vec();
        upper[10] = upper[10].to_ascii_uppercase();
        if upper[10].is_ascii_uppercase() {
            assert_eq!(trickle(&upper), (Err(not_trojan()), 11));
        }
        let mut no_crlf = PasswordHash::new("secret").as_bytes().to_vec();
        no_crlf.extend_from_slice(b"\n\r\x01");
        assert_eq!(trickle(&no_crlf), (Err(not_trojan()), HASH_LEN + 1));
    }

    #[test]
    fn a_bad_command_address_or_ending_is_refused() {
        let hash = PasswordHash::new("secret");
        let head = |tail: &[u8]| [&hash.as_bytes()[..], b"\r\n", tail].concat();
        let cases: [(&[u8], &str); 4] = [
            (b"\x02\x01\x7f\0\0\x01\0\x50\r\n", "trojan: unknown command"),
            (
                b"\x01\x05\x7f\0\0\x01\0\x50\r\n",
                "trojan: bad address in the request",
            ),
            (
                b"\x01\x01\x7f\0\0\x01\0\x50\n\n",
                "trojan: the request does not end in CRLF",
            ),
            (
                b"\x01\x01\x7f\0\0\x01\0\x50\n",
                "trojan: the request does not end in CRLF",
            ),
        ];
        for (tail, reason) in cases {
            let (step, _) = trickle(&head(tail));
            assert_eq!(step, Err(Refusal::silent(reason)), "{tail:?}");
        }
    }

    #[test]
    fn random_bytes_are_refused_or_wait_and_never_panic() {
        let mut next = crate::codec::noise(0x9e37_79b9_7f4a_7c15);
        let mut core = core();
        for _ in 0..2000 {
            let len = (next() % 400) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if let Ok(step) = advance(&mut core, &bytes) {
                assert_eq!(step, ServerStep::NeedMore { consumed: 0 });
            }
        }
    }

    #[test]
    fn udp_packets_open_with_their_destination_and_replies_name_their_source() {
        let wire = client_request("secret", Command::Associate);
        let ServerStep::Open { request, consumed } = advance(&mut core(), &wire).unwrap() else {
            panic!("opens")
        };
        assert_eq!(
            (request.kind(), consumed),
            (FlowKind::Datagrams, wire.len())
        );

        // The client seals a query for its destination; the server opens it.
        let destination = Address::Domain("dns.example".into(), 53);
        let mut buf = vec![0u8; PACKET_HEADER_MAX];
        buf.extend_from_slice(b"query");
        let range = UdpFraming.seal_to(&mut buf, 5, &destination).unwrap();
        let mut up = buf[range].to_vec();
        let packet = UdpFraming.open_from(&mut up).unwrap().unwrap();
        assert_eq!(
            (&packet.peer, &up[packet.payload]),
            (&destination, &b"query"[..])
        );

        // The server seals the reply from its source; the client opens it.
        let source = Address::Ip("192.0.2.53:53".parse().unwrap());
        let mut buf = vec![0u8; PACKET_HEADER_MAX];
        buf.extend_from_slice(b"answer");
        let range = UdpFraming.seal_to(&mut buf, 6, &source).unwrap();
        let mut down = buf[range].to_vec();
        let packet = UdpFraming.open_from(&mut down).unwrap().unwrap();
        assert_eq!(
            (&packet.peer, &down[packet.payload]),
            (&source, &b"answer"[..])
        );
    }
}
