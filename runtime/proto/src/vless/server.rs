//! The VLESS server core: the request header (version, user id, addons,
//! command, port and address) opens a TCP stream or UDP packets to one
//! target, or, with the mux command and no address, a Mux.Cool stream of
//! TCP and UDP sessions ([`crate::mux`]); the response header (version, no addons)
//! is staged on connected.
//!
//! A client with another version or an unknown id is refused silently, so
//! the runtime can hand what it read to a fallback, as Xray's `fallbacks`
//! do. Nothing is consumed before the header is whole; the id is judged
//! only once all of it is there, so a prober learns nothing byte by byte.
//!
//! With a fallback ([`Core::with_fallback`]) the first read decides, as
//! Xray and sing-box have it: one shorter than the version, the id and the
//! addons length (18 bytes) is refused at once, so a prober's lone version
//! byte reaches the web server as soon as it would directly, not after the
//! handshake limit.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use super::{read_port_address, UdpFraming, COMMAND_MUX, COMMAND_TCP, COMMAND_UDP, VERSION};
use crate::codec::{FlowKind, Refusal, ServerCore, ServerRequest, ServerStep};
use crate::mux::MUX_COOL;
use crate::Address;

/// The ids of an inbound's users, sorted, shared by its connections.
pub struct Users {
    ids: Vec<[u8; 16]>,
}

impl Users {
    pub fn new(ids: &[[u8; 16]]) -> Self {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        Users { ids }
    }

    /// Whether `id` is a user's.
    pub fn knows(&self, id: &[u8; 16]) -> bool {
        self.ids.binary_search(id).is_ok()
    }
}

/// A whole, authenticated VLESS request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    kind: FlowKind,
    /// The stream's destination, or the one target of every UDP packet;
    /// `v1.mux.cool` for a Mux.Cool stream, as Xray names it.
    target: Address,
    /// The stream is Mux.Cool: sessions, each with its own target.
    mux: bool,
    /// The user's id.
    user: [u8; 16],
}

impl Request {
    /// The id the client authenticated with.
    pub fn user(&self) -> &[u8; 16] {
        &self.user
    }

    /// Whether the stream after the header is Mux.Cool, whose frames
    /// [`crate::mux::Server`] reads, rather than [`Request::datagrams`].
    pub fn is_mux(&self) -> bool {
        self.mux
    }

    /// The framing of a UDP request's stream after its header: packets to
    /// and from the request's target.
    pub fn datagrams(&self) -> UdpFraming {
        UdpFraming::server(self.target.clone())
    }
}

impl ServerRequest for Request {
    fn destination(&self) -> &Address {
        &self.target
    }

    fn kind(&self) -> FlowKind {
        self.kind
    }

    /// The response header: the version and no addons.
    fn on_connected(&self, _bound: SocketAddr, out: &mut Vec<u8>) {
        out.extend_from_slice(&[VERSION, 0]);
    }

    /// Nothing: the connection is closed, as Xray does.
    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

/// The server side of one VLESS connection.
pub struct Core {
    users: Arc<Users>,
    /// The next input is the first read's, judged whole or refused.
    first_read_decides: bool,
}

/// What the first read must hold when it decides: version, id, addons
/// length.
const FIRST_READ_MIN: usize = 1 + 16 + 1;

impl Core {
    pub fn new(users: Arc<Users>) -> Self {
        Core {
            users,
            first_read_decides: false,
        }
    }

    /// For an inbound whose refused clients go to a fallback: a first read
    /// shorter than the version, the id and the addons length is refused
    /// at once.
    pub fn with_fallback(self) -> Self {
        Core {
            first_read_decides: true,
            ..self
        }
    }
}

impl ServerCore for Core {
    type Request = Request;

    /// A request with a 255-byte domain fits well within.
    const MAX_HANDSHAKE: usize = 2048;

    /// VLESS has no time window: `now` is not used. Nothing is consumed
    /// before the header is whole.
    fn advance(
        &mut self,
        input: &[u8],
        _now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        let need_more = Ok(ServerStep::NeedMore { consumed: 0 });
        if std::mem::take(&mut self.first_read_decides) && input.len() < FIRST_READ_MIN {
            return Err(Refusal::silent(
                "vless: the first read holds no version, id and addons length",
            ));
        }
        let Some((&version, rest)) = input.split_first() else {
            return need_more;
        };
        if version != VERSION {
            return Err(Refusal::silent("vless: unknown version"));
        }
        let Some((id, rest)) = rest.split_first_chunk::<16>() else {
            return need_more;
        };
        let user = *id;
        if !self.users.knows(id) {
            return Err(Refusal::silent("vless: unknown user id"));
        }
        let Some((&addons, rest)) = rest.split_first() else {
            return need_more;
        };
        if addons != 0 {
            // A flow (xtls-rprx-vision) this server does not speak.
            return Err(Refusal::silent("vless: addons are not supported"));
        }
        let Some((&command, rest)) = rest.split_first() else {
            return need_more;
        };
        let kind = match command {
            COMMAND_TCP => FlowKind::Stream,
            COMMAND_UDP => FlowKind::Datagrams,
            COMMAND_MUX => {
                return Ok(ServerStep::Open {
                    consumed: 1 + 16 + 1 + 1,
                    request: Request {
                        kind: FlowKind::Datagrams,
                        target: Address::Domain(MUX_COOL.into(), 0),
                        mux: true,
                        user,
                    },
                })
            }
            _ => return Err(Refusal::silent("vless: unknown command")),
        };
        match read_port_address(rest) {
            Ok(None) => need_more,
            Ok(Some((target, used))) => Ok(ServerStep::Open {
                consumed: 1 + 16 + 1 + 1 + used,
                request: Request {
                    kind,
                    target,
                    mux: false,
                    user,
                },
            }),
            Err(()) => Err(Refusal::silent("vless: bad address in the request")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::codec::{ClientCodec, DatagramCodec};
    use crate::vless::{Request as ClientRequest, ResponseHeader, UdpFraming};

    const ID: [u8; 16] = *b"0123456789abcdef";

    fn core() -> Core {
        Core::new(Arc::new(Users::new(&[[7; 16], ID, [9; 16]])))
    }

    fn header(mut request: ClientRequest<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        request.start(&mut out).unwrap();
        out
    }

    /// As the runtime hands bytes: one more each call, from the start.
    fn trickle(wire: &[u8]) -> (Result<ServerStep<Request>, Refusal>, usize) {
        let mut core = core();
        for end in 0..=wire.len() {
            match core.advance(&wire[..end], UNIX_EPOCH, &mut Vec::new()) {
                Ok(ServerStep::NeedMore { consumed: 0 }) => continue,
                other => return (other, end),
            }
        }
        panic!("the request never completed");
    }

    #[test]
    fn every_target_from_our_client_opens_byte_by_byte_and_the_reply_is_the_response_header() {
        let longest = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "a".repeat(61));
        for target in [
            Address::Ip("127.0.0.1:443".parse().unwrap()),
            Address::Ip("[2001:db8::1]:8080".parse().unwrap()),
            Address::Domain("example.com".into(), 80),
            Address::Domain(longest, 1),
        ] {
            let wire = header(ClientRequest::tcp(&ID, &target));
            let (step, at) = trickle(&wire);
            let Ok(ServerStep::Open { consumed, request }) = step else {
                panic!("opens: {step:?}")
            };
            assert_eq!((at, consumed), (wire.len(), wire.len()));
            assert_eq!(request.destination(), &target);
            assert_eq!(request.kind(), FlowKind::Stream);

            let mut out = Vec::new();
            request.on_connected("127.0.0.1:1".parse().unwrap(), &mut out);
            out.extend_from_slice(b"HTTP/1.1 200 OK");
            let mut skipper = ResponseHeader::default();
            assert_eq!(skipper.skip(&out).unwrap(), 2, "our client skips it");
            assert!(skipper.done());
            let mut failed = Vec::new();
            request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut failed);
            assert!(failed.is_empty());
        }
    }

    #[test]
    fn the_payload_after_the_header_is_left_to_the_stream() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let mut wire = header(ClientRequest::tcp(&ID, &target));
        let len = wire.len();
        wire.extend_from_slice(b"GET /");
        let step = core().advance(&wire, UNIX_EPOCH, &mut Vec::new());
        assert!(matches!(step, Ok(ServerStep::Open { consumed, .. }) if consumed == len));
    }

    #[test]
    fn with_a_fallback_a_first_read_short_of_18_bytes_is_refused_at_once() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let wire = header(ClientRequest::tcp(&ID, &target));
        let short = Err(Refusal::silent(
            "vless: the first read holds no version, id and addons length",
        ));
        let first_read =
            |core: &mut Core, input: &[u8]| core.advance(input, UNIX_EPOCH, &mut Vec::new());
        for end in [1, 2, 17] {
            assert_eq!(
                first_read(&mut core().with_fallback(), &wire[..end]),
                short,
                "{end}"
            );
            // Without one, a prefix of a request waits for the rest.
            assert_eq!(
                first_read(&mut core(), &wire[..end]),
                Ok(ServerStep::NeedMore { consumed: 0 })
            );
        }
        // 18 bytes go on: the command and the address may come later.
        let mut core = core().with_fallback();
        assert_eq!(
            first_read(&mut core, &wire[..18]),
            Ok(ServerStep::NeedMore { consumed: 0 })
        );
        assert!(matches!(
            first_read(&mut core, &wire),
            Ok(ServerStep::Open { consumed, .. }) if consumed == wire.len()
        ));
    }

    #[test]
    fn a_wrong_id_or_version_is_refused_silently_as_soon_as_it_shows() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let wire = header(ClientRequest::tcp(&[1; 16], &target));
        assert_eq!(
            trickle(&wire),
            (Err(Refusal::silent("vless: unknown user id")), 17),
            "judged only once the whole id is there"
        );
        assert_eq!(
            trickle(b"GET / HTTP/1.1\r\n\r\n"),
            (Err(Refusal::silent("vless: unknown version")), 1)
        );
    }

    #[test]
    fn unknown_commands_addons_and_bad_addresses_are_refused() {
        let head = |tail: &[u8]| [&[VERSION][..], &ID, tail].concat();
        let cases: [(&[u8], &str); 4] = [
            (
                b"\x00\x09\x00\x50\x01\x7f\0\0\x01",
                "vless: unknown command",
            ),
            (b"\x02\x0a\x10\x00\x01", "vless: addons are not supported"),
            (
                b"\x00\x01\x00\x50\x07\x7f\0\0\x01",
                "vless: bad address in the request",
            ),
            (
                b"\x00\x01\x00\x50\x02\x00",
                "vless: bad address in the request",
            ),
        ];
        for (tail, reason) in cases {
            assert_eq!(
                trickle(&head(tail)).0,
                Err(Refusal::silent(reason)),
                "{tail:?}"
            );
        }
    }

    #[test]
    fn random_bytes_are_refused_or_wait_and_never_panic() {
        let mut next = crate::codec::noise(0x2545_f491_4f6c_dd1d);
        let mut core = core();
        for _ in 0..2000 {
            let len = (next() % 300) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len > 17 && next().is_multiple_of(2) {
                // A known user, so the bytes after the id are exercised.
                bytes[0] = VERSION;
                bytes[1..17].copy_from_slice(&ID);
            }
            if let Ok(step) = core.advance(&bytes, UNIX_EPOCH, &mut Vec::new()) {
                if let ServerStep::Open { consumed, .. } = step {
                    assert!(consumed <= bytes.len());
                } else {
                    assert_eq!(step, ServerStep::NeedMore { consumed: 0 });
                }
            }
        }
    }

    #[test]
    fn udp_packets_go_to_the_one_target_and_replies_reach_our_client() {
        let target = Address::Ip("192.0.2.53:53".parse().unwrap());
        let mut wire = header(ClientRequest::udp(&ID, &target));
        let len = wire.len();
        let mut client = UdpFraming::new(target.clone());
        let mut buf = *b"..query";
        let range = client.seal_to(&mut buf, 5, &target).unwrap();
        wire.extend_from_slice(&buf[range]);

        let Ok(ServerStep::Open { consumed, request }) =
            core().advance(&wire, UNIX_EPOCH, &mut Vec::new())
        else {
            panic!("opens")
        };
        assert_eq!((consumed, request.kind()), (len, FlowKind::Datagrams));
        let mut server = request.datagrams();
        let mut up = wire[consumed..].to_vec();
        let packet = server.open_from(&mut up).unwrap().unwrap();
        assert_eq!(
            (&packet.peer, &up[packet.payload]),
            (&target, &b"query"[..])
        );

        // The reply: the response header on connected, then the packet.
        let mut down = Vec::new();
        request.on_connected("0.0.0.0:0".parse().unwrap(), &mut down);
        let mut buf = *b"..answer";
        let range = server.seal_to(&mut buf, 6, &target).unwrap();
        down.extend_from_slice(&buf[range]);
        let packet = client.open_from(&mut down).unwrap().unwrap();
        assert_eq!(packet.consumed, down.len());
        assert_eq!(
            (&packet.peer, &down[packet.payload]),
            (&target, &b"answer"[..])
        );
    }
}

#[cfg(test)]
mod mux_tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    const ID: [u8; 16] = *b"0123456789abcdef";

    #[test]
    fn the_mux_command_opens_a_mux_cool_stream_with_no_address_and_its_frames_follow() {
        // As sing-box and Xray send it: the header ends with the command,
        // and the first frame (a new XUDP session with its packet) follows.
        let mut wire = [&[VERSION][..], &ID, &[0, COMMAND_MUX]].concat();
        let header = wire.len();
        wire.extend_from_slice(
            b"\x00\x0c\x00\x00\x01\x01\x02\x00\x35\x01\xc0\x00\x02\x01\x00\x05query",
        );
        let mut core = Core::new(Arc::new(Users::new(&[ID])));
        for end in 0..header {
            let step = core.advance(&wire[..end], UNIX_EPOCH, &mut Vec::new());
            assert_eq!(step, Ok(ServerStep::NeedMore { consumed: 0 }));
        }
        let Ok(ServerStep::Open { consumed, request }) =
            core.advance(&wire, UNIX_EPOCH, &mut Vec::new())
        else {
            panic!("opens")
        };
        assert_eq!(consumed, header);
        assert!(request.is_mux());
        assert_eq!(request.kind(), FlowKind::Datagrams);
        assert_eq!(
            request.destination(),
            &Address::Domain("v1.mux.cool".into(), 0)
        );
        let mut out = Vec::new();
        request.on_connected("0.0.0.0:0".parse().unwrap(), &mut out);
        assert_eq!(out, [VERSION, 0], "the response header, as for UDP");

        let frames = &wire[consumed..];
        let step = crate::mux::Server::new()
            .open_frame(frames)
            .unwrap()
            .unwrap();
        let crate::mux::Event::Packet { peer, .. } = step.event else {
            panic!("a packet")
        };
        assert_eq!(peer, Address::Ip("192.0.2.1:53".parse().unwrap()));
        assert_eq!(&frames[step.data], b"query");
    }
}
