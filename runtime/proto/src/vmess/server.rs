//! The VMess server core, the AEAD header only (alterId 0):
//!
//! 1. the auth id is opened with each user's key (built once, in
//!    [`Users`]); its timestamp must be within 120 s of `now`, and only
//!    then is it looked up in the inbound's [`ReplayFilter`];
//! 2. the sealed length and the sealed header are opened with that user's
//!    command key; the header names the body security, the options, the
//!    command and the target (none for the mux command: a Mux.Cool stream,
//!    what Xray's clients send UDP as, and clients with mux enabled every
//!    flow);
//! 3. the auth id is accepted by the filter (once: a second connection
//!    with it is a replay) and the request opens.
//!
//! Every refusal is silent: the runtime holds the connection until the
//! handshake deadline, reading and discarding, as v2ray does, so a prober
//! learns nothing from when or how the server answers.
//!
//! The request stages the response header on connected (`on_connected`
//! appends it, sealed with the response key and IV); the body codecs
//! ([`Request::into_codec`], [`Request::into_datagrams`]) seal only chunks.
//! A dial that fails sends nothing.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::body::BodyKey;
use super::datagram::VmessDatagram;
use super::header::{fnv1a32, open_record, User, FIXED, PLAIN_MAX, PREFIX, VERSION};
use super::kdf::{HEADER_KEY, HEADER_LEN_KEY, HEADER_LEN_NONCE, HEADER_NONCE};
use super::replay::{Rejected, WINDOW};
use super::response::{seal_header, SEALED_LEN};
use super::security::{Layout, Security};
use super::session::Session;
use super::stream::VmessStream;
use crate::aead::TAG_LEN;
use crate::codec::{FlowKind, Refusal, ServerCore, ServerRequest, ServerStep};
use crate::mux::MUX_COOL;
use crate::vless::read_port_address;
use crate::Address;

pub use super::replay::ReplayFilter;

const COMMAND_TCP: u8 = 1;
const COMMAND_UDP: u8 = 2;
/// Mux.Cool: the body is a stream of its frames ([`crate::mux`]).
const COMMAND_MUX: u8 = 3;

/// The shortest header in clear that holds its fixed part and checksum;
/// the address in between is checked as it is read.
const PLAIN_MIN: usize = FIXED + 4;

/// An inbound's users, each with its command key and auth id key derived
/// once, shared by its connections.
pub struct Users {
    users: Vec<User>,
}

impl Users {
    pub fn new(ids: &[[u8; 16]]) -> Self {
        Users {
            users: ids.iter().map(User::new).collect(),
        }
    }

    /// Whether a user's command key is `cmd_key`.
    pub fn knows(&self, cmd_key: &[u8; 16]) -> bool {
        self.users.iter().any(|user| user.cmd_key() == cmd_key)
    }

    /// The user whose key opens `id`, and the id's timestamp.
    fn open(&self, id: &[u8; 16]) -> Option<(usize, u64)> {
        self.users
            .iter()
            .enumerate()
            .find_map(|(index, user)| user.auth_id().open(id).map(|time| (index, time)))
    }
}

/// A whole, authenticated VMess request: its target and the keys of its
/// body, nothing more (the buffers are the runtime's).
pub struct Request {
    kind: FlowKind,
    /// The destination; `v1.mux.cool` for a Mux.Cool stream.
    target: Address,
    /// The body is a stream of Mux.Cool frames: sessions, each with its
    /// own target.
    mux: bool,
    session: Session,
    layout: Layout,
    response: [u8; SEALED_LEN],
    /// The user's command key, which names the user without its id.
    user: [u8; 16],
}

/// Without the keys.
impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("kind", &self.kind)
            .field("target", &self.target)
            .field("mux", &self.mux)
            .field("security", &self.session.security)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

fn wrong_kind(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, text)
}

impl Request {
    /// The command key of the user the client authenticated as.
    pub fn user(&self) -> &[u8; 16] {
        &self.user
    }

    /// The body of a TCP request: the client's chunks opened, ours sealed.
    pub fn into_codec(self) -> io::Result<VmessStream> {
        match (self.kind, self.mux) {
            (FlowKind::Stream, _) | (_, true) => VmessStream::server(&self.session, self.layout),
            (FlowKind::Datagrams, false) => {
                Err(wrong_kind("vmess: a udp request has no stream body"))
            }
        }
    }

    /// Whether the body is Mux.Cool: a stream ([`Request::into_codec`])
    /// whose frames [`crate::mux::Server`] reads.
    pub fn is_mux(&self) -> bool {
        self.mux
    }

    /// The body of a UDP request: each chunk one packet, to and from the
    /// request's target.
    pub fn into_datagrams(self) -> io::Result<VmessDatagram> {
        match (self.kind, self.mux) {
            (FlowKind::Datagrams, false) => {
                VmessDatagram::server(&self.session, self.layout, self.target)
            }
            (FlowKind::Stream, _) => Err(wrong_kind("vmess: a tcp request has no packets")),
            (_, true) => Err(wrong_kind("vmess: a mux request's packets are mux frames")),
        }
    }
}

impl ServerRequest for Request {
    fn destination(&self) -> &Address {
        &self.target
    }

    fn kind(&self) -> FlowKind {
        self.kind
    }

    /// The sealed response header, in front of the first chunk.
    fn on_connected(&self, _bound: SocketAddr, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.response);
    }

    /// Nothing: the connection is closed, as v2ray does.
    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

/// The server side of one VMess connection.
pub struct Core {
    users: Arc<Users>,
    replay: Arc<ReplayFilter>,
    /// The user whose key opened the auth id, and the id's timestamp.
    user: Option<(usize, u64)>,
    /// The header's length, once its record is opened.
    header_len: Option<usize>,
}

impl Core {
    pub fn new(users: Arc<Users>, replay: Arc<ReplayFilter>) -> Self {
        Core {
            users,
            replay,
            user: None,
            header_len: None,
        }
    }
}

fn silent(reason: &'static str) -> Refusal {
    Refusal::silent(reason)
}

fn unauthentic() -> Refusal {
    silent("vmess: the request header failed authentication")
}

impl ServerCore for Core {
    type Request = Request;

    /// A header with a 255-byte domain and its padding fits well within.
    const MAX_HANDSHAKE: usize = 2048;

    /// Nothing is consumed before the header is whole; each step's result
    /// (the user, the length) is kept, so bytes shown again cost nothing.
    fn advance(
        &mut self,
        input: &[u8],
        now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        let need_more = Ok(ServerStep::NeedMore { consumed: 0 });
        let Some(id) = input.first_chunk::<16>() else {
            return need_more;
        };
        let (index, time) = match self.user {
            Some(found) => found,
            None => {
                let now = unix_secs(now)?;
                let (index, time) = self
                    .users
                    .open(id)
                    .ok_or(silent("vmess: no user's key opens the auth id"))?;
                if time.abs_diff(now) > WINDOW {
                    return Err(silent(
                        "vmess: the auth id's time is outside the 120 s window",
                    ));
                }
                if self.replay.seen(id) {
                    return Err(silent("vmess: replayed request"));
                }
                self.user = Some((index, time));
                (index, time)
            }
        };
        let Some(user) = self.users.users.get(index) else {
            return Err(silent("vmess: no user's key opens the auth id"));
        };
        let Some(prefix) = input.get(..PREFIX) else {
            return need_more;
        };
        let nonce = &prefix[PREFIX - 8..];
        let path = |name| [name, &id[..], nonce];
        let len = match self.header_len {
            Some(len) => len,
            None => {
                let mut record = [0u8; 2 + TAG_LEN];
                record.copy_from_slice(&prefix[16..16 + 2 + TAG_LEN]);
                open_record(
                    user,
                    path(HEADER_LEN_KEY),
                    path(HEADER_LEN_NONCE),
                    id,
                    &mut record,
                )
                .map_err(|_| unauthentic())?;
                let len = usize::from(u16::from_be_bytes([record[0], record[1]]));
                if !(PLAIN_MIN..=PLAIN_MAX).contains(&len) {
                    return Err(silent("vmess: a request header length out of range"));
                }
                self.header_len = Some(len);
                len
            }
        };
        let end = PREFIX + len + TAG_LEN;
        let Some(sealed) = input.get(PREFIX..end) else {
            return need_more;
        };
        let mut plain = [0u8; PLAIN_MAX + TAG_LEN];
        let record = &mut plain[..len + TAG_LEN];
        record.copy_from_slice(sealed);
        open_record(user, path(HEADER_KEY), path(HEADER_NONCE), id, record)
            .map_err(|_| unauthentic())?;
        let header = read_header(&plain[..len])?;
        match self.replay.accept(*id, time, unix_secs(now)?) {
            Ok(()) => {}
            Err(Rejected::Replayed) => return Err(silent("vmess: replayed request")),
            Err(Rejected::Full) => return Err(silent("vmess: the replay filter is full")),
        }
        let session = Session::for_server(header.security, header.body, header.response_auth);
        let response = seal_header(&session.response, header.response_auth)
            .map_err(|_| silent("vmess: the response header could not be sealed"))?;
        Ok(ServerStep::Open {
            consumed: end,
            request: Request {
                kind: header.kind,
                target: header.target,
                mux: header.mux,
                session,
                layout: header.layout,
                response,
                user: *user.cmd_key(),
            },
        })
    }
}

fn unix_secs(now: SystemTime) -> Result<u64, Refusal> {
    now.duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs())
        .map_err(|_| silent("vmess: the clock is before 1970"))
}

/// What the header in clear says.
struct Header {
    body: BodyKey,
    response_auth: u8,
    security: Security,
    layout: Layout,
    kind: FlowKind,
    target: Address,
    mux: bool,
}

/// Reads the header in clear (its layout is in [`super::header`]).
fn read_header(h: &[u8]) -> Result<Header, Refusal> {
    let Some((fields, checksum)) = h.split_last_chunk::<4>() else {
        return Err(silent("vmess: a request header length out of range"));
    };
    if u32::from_be_bytes(*checksum) != fnv1a32(fields) {
        return Err(silent(
            "vmess: the request header's checksum does not match",
        ));
    }
    if fields.len() < FIXED || fields[0] != VERSION {
        return Err(silent("vmess: unknown request header version"));
    }
    let mut body = BodyKey {
        key: [0; 16],
        iv: [0; 16],
    };
    body.iv.copy_from_slice(&fields[1..17]);
    body.key.copy_from_slice(&fields[17..33]);
    let (response_auth, options) = (fields[33], fields[34]);
    let padding = usize::from(fields[35] >> 4);
    let security = match fields[35] & 0x0f {
        3 => Security::Aes128Gcm,
        4 => Security::ChaCha20Poly1305,
        // `none`; under `zero` too, without chunk stream.
        5 => Security::None,
        _ => return Err(silent("vmess: unsupported body security")),
    };
    let (kind, mux) = match fields[37] {
        COMMAND_TCP => (FlowKind::Stream, false),
        COMMAND_UDP => (FlowKind::Datagrams, false),
        // Mux.Cool: its body is a stream and its packets are sessions'.
        COMMAND_MUX => (FlowKind::Datagrams, true),
        _ => return Err(silent("vmess: unknown command")),
    };
    let packets = kind == FlowKind::Datagrams && !mux;
    let layout = Layout::from_options(security, options, packets).map_err(silent)?;
    // A mux request names no target, as v2ray writes it.
    let target = match read_port_address(&fields[FIXED..]) {
        _ if mux && FIXED + padding == fields.len() => Address::Domain(MUX_COOL.into(), 0),
        Ok(Some((target, used))) if !mux && FIXED + used + padding == fields.len() => target,
        _ => return Err(silent("vmess: bad address in the request header")),
    };
    Ok(Header {
        body,
        response_auth,
        security,
        layout,
        kind,
        target,
        mux,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{DatagramCodec, Opened, StreamCodec};
    use crate::vmess::body::{BodyOpener, BodySealer, HEADROOM, TAILROOM};
    use crate::vmess::header::{seal, Command, Request as ClientRequest};
    use crate::vmess::test_support::{at, dial_bytes, entropy, hex, uuid};

    const SECURITIES: [Security; 4] = [
        Security::Aes128Gcm,
        Security::ChaCha20Poly1305,
        Security::None,
        Security::Zero,
    ];
    const NOW: u64 = 1_800_000_000;

    fn users() -> Arc<Users> {
        Arc::new(Users::new(&[[0x11; 16], uuid(), [0x22; 16]]))
    }

    fn core() -> Core {
        Core::new(users(), Arc::new(ReplayFilter::new()))
    }

    /// A client's request header and the session it keeps.
    fn client(
        security: Security,
        command: Command,
        target: &Address,
        time: u64,
        seed: u8,
    ) -> (Vec<u8>, Session) {
        let entropy = entropy(seed);
        let request = ClientRequest::new(
            &User::new(&uuid()),
            command,
            target,
            security,
            at(time),
            [seed, 1, 2, 3],
            &entropy,
        )
        .unwrap();
        (dial_bytes(request), Session::new(security, &entropy))
    }

    fn advance(core: &mut Core, input: &[u8], now: u64) -> Result<ServerStep<Request>, Refusal> {
        core.advance(input, at(now), &mut Vec::new())
    }

    fn open(core: &mut Core, wire: &[u8], now: u64) -> Request {
        match advance(core, wire, now) {
            Ok(ServerStep::Open { consumed, request }) => {
                assert_eq!(consumed, wire.len());
                request
            }
            Ok(step) => panic!("{step:?} for a whole header"),
            Err(refusal) => panic!("refused: {}", refusal.reason),
        }
    }

    /// As the runtime hands bytes: one more each call, from the start.
    fn trickle(
        core: &mut Core,
        wire: &[u8],
        now: u64,
    ) -> (Result<ServerStep<Request>, Refusal>, usize) {
        for end in 0..=wire.len() {
            match advance(core, &wire[..end], now) {
                Ok(ServerStep::NeedMore { consumed: 0 }) => continue,
                other => return (other, end),
            }
        }
        panic!("the header never completed");
    }

    fn refusal(step: Result<ServerStep<Request>, Refusal>) -> &'static str {
        match step {
            Err(refusal) => {
                assert!(refusal.reply.is_empty(), "silent");
                refusal.reason
            }
            Ok(step) => panic!("not refused: {step:?}"),
        }
    }

    /// Seals `payloads` as `sealer`'s chunks, one wire.
    fn seal_all(
        mut seal: impl FnMut(&mut [u8], usize) -> io::Result<std::ops::Range<usize>>,
        payloads: &[&[u8]],
    ) -> Vec<u8> {
        let mut wire = Vec::new();
        for payload in payloads {
            let mut buf = vec![0u8; HEADROOM + payload.len() + TAILROOM];
            buf[HEADROOM..HEADROOM + payload.len()].copy_from_slice(payload);
            let range = seal(&mut buf, payload.len()).unwrap();
            wire.extend_from_slice(&buf[range]);
        }
        wire
    }

    /// Opens `wire` through `open`, handed over `step` bytes at a time.
    fn open_all(
        mut open: impl FnMut(&mut [u8]) -> io::Result<Opened>,
        wire: &[u8],
        step: usize,
    ) -> Vec<u8> {
        let mut held = Vec::new();
        let mut got = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            held.extend_from_slice(piece);
            while let Opened::Frame { consumed, payload } = open(&mut held).unwrap() {
                got.extend_from_slice(&held[payload]);
                held.drain(..consumed);
                if held.is_empty() {
                    break;
                }
            }
        }
        assert!(held.is_empty(), "every byte was opened");
        got
    }

    #[test]
    fn every_security_carries_a_stream_from_our_client_both_ways() {
        let longest = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "a".repeat(61));
        let targets = [
            Address::Ip("192.0.2.7:443".parse().unwrap()),
            Address::Ip("[2001:db8::1]:53".parse().unwrap()),
            Address::Domain("example.com".into(), 80),
            Address::Domain(longest, 1),
        ];
        let up: Vec<u8> = (0..40_000).map(|i| (i * 7 % 251) as u8).collect();
        let down: [&[u8]; 3] = [b"HTTP/1.1 200 OK\r\n", &[0x5a; 3000], b"\r\n"];
        for (i, target) in targets.iter().enumerate() {
            for security in SECURITIES {
                let (header, session) = client(security, Command::Tcp, target, NOW, i as u8);
                let mut ours = VmessStream::new(&session).unwrap();
                let request = open(&mut core(), &header, NOW);
                assert_eq!(
                    (request.destination(), request.kind()),
                    (target, FlowKind::Stream)
                );
                let mut failed = Vec::new();
                request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut failed);
                assert!(failed.is_empty());
                let mut wire = Vec::new();
                request.on_connected("127.0.0.1:1".parse().unwrap(), &mut wire);
                assert_eq!(wire.len(), SEALED_LEN);
                let mut server = request.into_codec().unwrap();

                let pieces: Vec<&[u8]> = up.chunks(VmessStream::MAX_PAYLOAD).collect();
                let sent = seal_all(|buf, len| ours.seal(buf, len), &pieces);
                for step in [1, 19, 1500, sent.len()] {
                    let (header, _) = client(security, Command::Tcp, target, NOW, i as u8);
                    let mut fresh = open(&mut core(), &header, NOW).into_codec().unwrap();
                    let got = open_all(|buf| fresh.open(buf), &sent, step);
                    assert!(got == up, "{security:?} step {step}: up differs");
                }
                let got = open_all(|buf| server.open(buf), &sent, sent.len());
                assert!(got == up);

                wire.extend_from_slice(&seal_all(|buf, len| server.seal(buf, len), &down));
                assert!(ours.finish().is_err(), "no response yet");
                for step in [1, 37, 38, 39, wire.len()] {
                    let mut fresh = VmessStream::new(&session).unwrap();
                    let got = open_all(|buf| fresh.open(buf), &wire, step);
                    assert_eq!(got, down.concat(), "{security:?} step {step}");
                    assert!(fresh.finish().is_ok(), "the response header was checked");
                }
            }
        }
    }

    #[test]
    fn a_header_fed_byte_by_byte_opens_only_once_whole_and_leaves_the_payload() {
        let target = Address::Domain("example.com".into(), 443);
        for security in SECURITIES {
            let (header, session) = client(security, Command::Tcp, &target, NOW, 5);
            let mut ours = VmessStream::new(&session).unwrap();
            let mut wire = header.clone();
            wire.extend_from_slice(&seal_all(|buf, len| ours.seal(buf, len), &[b"GET /"]));
            let mut core = core();
            let (step, at) = trickle(&mut core, &wire, NOW);
            assert_eq!(at, header.len());
            let Ok(ServerStep::Open { consumed, request }) = step else {
                panic!("opens")
            };
            assert_eq!(consumed, header.len());
            let mut server = request.into_codec().unwrap();
            let got = open_all(|buf| server.open(buf), &wire[consumed..], usize::MAX);
            assert_eq!(got, b"GET /", "{security:?}");
        }
    }

    #[test]
    fn udp_packets_go_to_the_one_target_and_replies_reach_our_client() {
        let target = Address::Ip("192.0.2.53:53".parse().unwrap());
        let elsewhere = Address::Domain("ignored.example".into(), 9);
        let packets: [&[u8]; 3] = [b"query one", &[0xab; 1200], b"q3"];
        for security in SECURITIES {
            let (header, session) = client(security, Command::Udp, &target, NOW, 9);
            let mut ours = VmessDatagram::new(&session, target.clone()).unwrap();
            let request = open(&mut core(), &header, NOW);
            assert_eq!(
                (request.destination(), request.kind()),
                (&target, FlowKind::Datagrams)
            );
            let mut down = Vec::new();
            request.on_connected("0.0.0.0:0".parse().unwrap(), &mut down);
            let mut server = request.into_datagrams().unwrap();

            let mut up = seal_all(|buf, len| ours.seal_to(buf, len, &elsewhere), &packets);
            let mut at = 0;
            for packet in packets {
                let opened = server.open_from(&mut up[at..]).unwrap().unwrap();
                assert_eq!(opened.peer, target);
                assert_eq!(&up[at..][opened.payload], packet, "{security:?}");
                at += opened.consumed;
            }
            assert_eq!(at, up.len());

            down.extend_from_slice(&seal_all(
                |buf, len| server.seal_to(buf, len, &elsewhere),
                &packets,
            ));
            let mut at = 0;
            for packet in packets {
                let opened = ours.open_from(&mut down[at..]).unwrap().unwrap();
                assert_eq!(
                    (&opened.peer, &down[at..][opened.payload]),
                    (&target, packet)
                );
                at += opened.consumed;
            }
            assert_eq!(at, down.len(), "{security:?}");
        }
    }

    #[test]
    fn a_request_for_one_network_has_no_body_of_the_other() {
        let target = Address::Ip("192.0.2.53:53".parse().unwrap());
        let (tcp, _) = client(Security::Aes128Gcm, Command::Tcp, &target, NOW, 1);
        let e = open(&mut core(), &tcp, NOW).into_datagrams().err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let (udp, _) = client(Security::Aes128Gcm, Command::Udp, &target, NOW, 1);
        assert!(open(&mut core(), &udp, NOW).into_codec().is_err());
    }

    /// The test vector of the vmess-aead Python package (another client),
    /// which checks it at 1703242500: user b831381d-…, its auth id made at
    /// 1703242529, to 104.26.12.31:80, one chunk of curl's request.
    #[test]
    fn a_request_captured_from_another_client_opens() {
        let wire = hex(
            "62365f27d7d46c8c7afa1e47b3e7ae44f8c74911f48249306adc6c79224243239902c77fd3c0ece0
             852a777d2600e848c7eb3e625ec0febb94b8ce63c58868c0dfe419255317b03121484c3ee79604f2
             48c78d21408b69108feacafbc2f5d42b559857222d73f1e48e66d09daae8a2d1048436b9b96fa9ce
             3f101acc69affc11eccc11492ee0abe27a1e827ceebeedd0ed4b9eeb64442227dee06c6d5e6c49a6
             1c2985d7fc466472228ee578a71efe2bb67b2069dd0c776df4097ea697263ef3d336bdd3be6fb863
             c0b9c9907283c47d6dd54e637ff99408ac1ea9dc3600d3b1062fdcd04714",
        );
        let Ok(ServerStep::Open { consumed, request }) = advance(&mut core(), &wire, 1_703_242_500)
        else {
            panic!("opens")
        };
        assert_eq!(
            request.destination(),
            &Address::Ip("104.26.12.31:80".parse().unwrap())
        );
        assert_eq!(request.kind(), FlowKind::Stream);
        let mut body = request.into_codec().unwrap();
        let got = open_all(|buf| body.open(buf), &wire[consumed..], usize::MAX);
        assert_eq!(
            got,
            b"GET / HTTP/1.1\r\nHost: ip.sb\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n"
        );
    }

    #[test]
    fn a_replayed_header_is_refused_while_50_distinct_ones_of_one_second_are_all_accepted() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let replay = Arc::new(ReplayFilter::new());
        let users = users();
        let headers: Vec<Vec<u8>> = (0..50)
            .map(|seed| client(Security::Aes128Gcm, Command::Tcp, &target, NOW, seed).0)
            .collect();
        for header in &headers {
            open(&mut Core::new(users.clone(), replay.clone()), header, NOW);
        }
        for header in &headers {
            let mut core = Core::new(users.clone(), replay.clone());
            let (step, at) = trickle(&mut core, header, NOW + 60);
            assert_eq!((refusal(step), at), ("vmess: replayed request", 16));
        }
    }

    #[test]
    fn a_timestamp_up_to_120_s_either_way_is_accepted_and_121_is_refused() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        for (time, seed) in [(NOW - 120, 1), (NOW + 120, 2), (NOW, 3)] {
            let (header, _) = client(Security::None, Command::Tcp, &target, time, seed);
            open(&mut core(), &header, NOW);
        }
        for time in [NOW - 121, NOW + 121, 0] {
            let (header, _) = client(Security::None, Command::Tcp, &target, time, 4);
            let (step, at) = trickle(&mut core(), &header, NOW);
            assert_eq!(
                (refusal(step), at),
                ("vmess: the auth id's time is outside the 120 s window", 16)
            );
        }
    }

    #[test]
    fn another_users_header_is_refused_at_its_auth_id() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let (header, _) = client(Security::Aes128Gcm, Command::Tcp, &target, NOW, 1);
        let mut stranger = Core::new(
            Arc::new(Users::new(&[[0x33; 16]])),
            Arc::new(ReplayFilter::new()),
        );
        let (step, at) = trickle(&mut stranger, &header, NOW);
        assert_eq!(
            (refusal(step), at),
            ("vmess: no user's key opens the auth id", 16)
        );
    }

    #[test]
    fn a_changed_byte_anywhere_in_the_header_is_refused() {
        let target = Address::Domain("example.com".into(), 443);
        let (header, _) = client(Security::ChaCha20Poly1305, Command::Tcp, &target, NOW, 1);
        for at in 0..header.len() {
            let mut bad = header.clone();
            bad[at] ^= 0x01;
            let reason = refusal(advance(&mut core(), &bad, NOW));
            let expected = match at {
                0..16 => "vmess: no user's key opens the auth id",
                _ => "vmess: the request header failed authentication",
            };
            assert_eq!(reason, expected, "byte {at}");
        }
    }

    #[test]
    fn random_bytes_and_garbage_after_a_good_auth_id_are_refused_and_never_panic() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        let (header, _) = client(Security::Aes128Gcm, Command::Tcp, &target, NOW, 1);
        let mut next = crate::codec::noise(0x853c_49e6_748f_ea9b);
        for round in 0..600 {
            let len = (next() % 400) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 1 && len >= 16 {
                bytes[..16].copy_from_slice(&header[..16]);
            }
            let mut core = core();
            match advance(&mut core, &bytes, NOW) {
                Ok(ServerStep::NeedMore { consumed: 0 }) => assert!(len < PREFIX),
                Err(refusal) => assert!(refusal.reply.is_empty()),
                Ok(step) => panic!("random bytes opened: {step:?}"),
            }
        }
    }

    /// A header sealed for `uuid()` at NOW from its fields in clear, for
    /// what our client never sends.
    fn custom_header(options: u8, security: u8, command: u8, address: &[u8], seed: u8) -> Vec<u8> {
        let mut plain = vec![VERSION];
        plain.extend_from_slice(&[seed; 16]); // iv
        plain.extend_from_slice(&[seed ^ 0x55; 16]); // key
        plain.extend_from_slice(&[0x42, options, security, 0, command]);
        // No port either without an address, as a mux request has neither.
        if !address.is_empty() {
            plain.extend_from_slice(&[0x01, 0xbb]);
        }
        plain.extend_from_slice(address);
        let checksum = fnv1a32(&plain);
        plain.extend_from_slice(&checksum.to_be_bytes());
        let user = User::new(&uuid());
        let id = user.auth_id().seal(NOW, [seed, 9, 9, 9]);
        let nonce = [seed; 8];
        let path = |name| [name, &id[..], &nonce[..]];
        let mut length = (plain.len() as u16).to_be_bytes().to_vec();
        length.extend_from_slice(&[0; TAG_LEN]);
        seal(
            &user,
            path(HEADER_LEN_KEY),
            path(HEADER_LEN_NONCE),
            &id,
            &mut length,
        )
        .unwrap();
        plain.extend_from_slice(&[0; TAG_LEN]);
        seal(&user, path(HEADER_KEY), path(HEADER_NONCE), &id, &mut plain).unwrap();
        [&id[..], &length, &nonce, &plain].concat()
    }

    #[test]
    fn a_mux_request_names_no_target_and_opens_a_stream_of_mux_frames() {
        for (i, security) in [(3u8, Security::Aes128Gcm), (4, Security::ChaCha20Poly1305)]
            .into_iter()
            .enumerate()
        {
            let header2 = |i: usize| custom_header(0x0d, security.0, 3, &[], 0x40 + i as u8);
            let header = custom_header(0x0d, security.0, 3, &[], i as u8);
            let request = open(&mut core(), &header, NOW);
            assert!(request.is_mux(), "{security:?}");
            assert_eq!(request.kind(), FlowKind::Datagrams);
            assert_eq!(request.destination(), &Address::Domain(MUX_COOL.into(), 0));
            assert_eq!(
                request.layout,
                Layout::from_options(security.1, 0x0d, false).unwrap()
            );
            assert!(request.into_codec().is_ok());
            assert!(open(&mut core(), &header2(i), NOW)
                .into_datagrams()
                .is_err());
        }
    }

    #[test]
    fn mux_with_an_address_unknown_securities_commands_and_addresses_are_refused() {
        let v4: &[u8] = &[1, 127, 0, 0, 1];
        let cases: [(u8, u8, u8, &[u8], &str); 7] = [
            (
                0x0d,
                0x03,
                3,
                v4,
                "vmess: bad address in the request header",
            ),
            (0x0d, 0x03, 7, v4, "vmess: unknown command"),
            (0x0d, 0x01, 1, v4, "vmess: unsupported body security"),
            (0x0d, 0x06, 1, v4, "vmess: unsupported body security"),
            (
                0x0d,
                0x03,
                1,
                &[4, 1, 2, 3, 4],
                "vmess: bad address in the request header",
            ),
            (
                0x0d,
                0x03,
                1,
                &[2, 0],
                "vmess: bad address in the request header",
            ),
            (
                0x1d,
                0x03,
                1,
                v4,
                "vmess: authenticated length is not supported",
            ),
        ];
        for (i, (options, security, command, address, reason)) in cases.into_iter().enumerate() {
            let header = custom_header(options, security, command, address, i as u8);
            assert_eq!(refusal(advance(&mut core(), &header, NOW)), reason);
        }
    }

    /// Options other clients set and ours does not: masking without
    /// padding, plain lengths, padded `none` packets. Both ends lay the
    /// body out as the options say.
    #[test]
    fn bodies_laid_out_as_other_clients_options_say_open_both_ways() {
        let v4: &[u8] = &[1, 127, 0, 0, 1];
        let cases = [
            (0x05, 3, 1),
            (0x01, 4, 1),
            (0x00, 3, 1),
            (0x0d, 5, 2),
            (0x01, 5, 1),
            (0x0d, 5, 1),
        ];
        for (i, (options, nibble, command)) in cases.into_iter().enumerate() {
            let header = custom_header(options, nibble, command, v4, i as u8);
            let request = open(&mut core(), &header, NOW);
            let security = match nibble {
                3 => Security::Aes128Gcm,
                4 => Security::ChaCha20Poly1305,
                _ => Security::None,
            };
            let packets = command == 2;
            let layout = Layout::from_options(security, options, packets).unwrap();
            let body = BodyKey {
                iv: [i as u8; 16],
                key: [i as u8 ^ 0x55; 16],
            };
            let session = Session::for_server(security, body, 0x42);
            let mut up = BodySealer::with_layout(security, layout, &body, &[1; 32]).unwrap();
            let mut down = BodyOpener::with_layout(security, layout, &session.response).unwrap();
            let payloads: [&[u8]; 2] = [b"first", &[7; 2000]];
            let wire = seal_all(|buf, len| up.seal(buf, len), &payloads);
            let mut reply = Vec::new();
            request.on_connected("0.0.0.0:0".parse().unwrap(), &mut reply);
            let reply_at = reply.len();
            if packets {
                let mut server = request.into_datagrams().unwrap();
                let mut wire = wire;
                let first = server.open_from(&mut wire).unwrap().unwrap();
                assert_eq!(&wire[first.payload], b"first");
                reply.extend_from_slice(&seal_all(
                    |buf, len| server.seal_to(buf, len, &first.peer),
                    &payloads,
                ));
            } else {
                let mut server = request.into_codec().unwrap();
                let got = open_all(|buf| server.open(buf), &wire, 7);
                assert_eq!(got, payloads.concat(), "options {options:#x}");
                reply.extend_from_slice(&seal_all(|buf, len| server.seal(buf, len), &payloads));
            }
            let got = open_all(|buf| down.open(buf), &reply[reply_at..], 5);
            assert_eq!(got, payloads.concat(), "options {options:#x} down");
        }
    }

    /// What v2ray's server sends when its upstream ends: a chunk with no
    /// payload, which a client takes as the end of the stream. Sealing no
    /// bytes makes it; a raw body (`zero`) has none.
    #[test]
    fn sealing_no_bytes_makes_the_end_of_stream_chunk() {
        let target = Address::Ip("192.0.2.1:80".parse().unwrap());
        for security in SECURITIES {
            let (header, session) = client(security, Command::Tcp, &target, NOW, 1);
            let request = open(&mut core(), &header, NOW);
            let mut wire = Vec::new();
            request.on_connected("0.0.0.0:0".parse().unwrap(), &mut wire);
            let mut server = request.into_codec().unwrap();
            let mut buf = [0u8; HEADROOM + TAILROOM];
            let end = server.seal(&mut buf, 0).unwrap();
            wire.extend_from_slice(&buf[end.clone()]);
            let mut ours = VmessStream::new(&session).unwrap();
            let Opened::Frame { consumed, .. } = ours.open(&mut wire).unwrap() else {
                panic!("the response header opens")
            };
            match security {
                Security::Zero => assert!(end.is_empty()),
                _ => assert_eq!(
                    ours.open(&mut wire[consumed..]).unwrap(),
                    Opened::Frame {
                        consumed: wire.len() - consumed,
                        payload: HEADROOM..HEADROOM,
                    },
                    "{security:?}"
                ),
            }
        }
    }

    #[test]
    fn a_servers_body_codec_holds_keys_and_counters_only() {
        let (stream, request) = (
            std::mem::size_of::<VmessStream>(),
            std::mem::size_of::<Request>(),
        );
        println!("a server's VmessStream: {stream} bytes, its Request: {request} bytes");
        assert!(stream < 4096, "{stream} bytes");
        assert!(request < 512, "{request} bytes");
    }
}
