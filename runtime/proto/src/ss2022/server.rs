//! The Shadowsocks 2022 server (SIP022, with SIP023 identity headers for a
//! multi-user inbound): the TCP core and stream codec here, the UDP
//! sessions ([`UdpHead`], [`UdpClientSession`]).
//!
//! ```text
//! request:  salt | identity header (multi-user) | [type 0, timestamp, length]
//!           | [address, padding length, padding, initial payload] | [length] [payload] ...
//! response: salt | [type 1, timestamp, request salt, length] [payload] | [length] [payload] ...
//! ```
//!
//! [`Core`] is the [`ServerCore`] of one connection. A multi-user inbound
//! finds the user by the identity header, the hash of the user's PSK sealed
//! under the identity subkey of the server PSK and the salt; the request is
//! then sealed under the session subkey of the user's PSK. Refused, each
//! with [`Refusal::silent`] (the runtime holds the connection until its
//! handshake deadline, reading and discarding, so a prober learns nothing):
//! - an identity header that names no user;
//! - a header that fails authentication: a wrong PSK, or garbage;
//! - a fixed header not of type 0 (a server stream reflected back);
//! - a timestamp more than 30 s from `now`;
//! - a salt this inbound has seen (a replay), checked once the fixed header
//!   authenticates; the server's own salts are recorded too; and any salt
//!   while the inbound's [`SaltFilter`] is full of salts seen within 60 s;
//! - an address that does not parse, or padding past the header's end.
//!
//! [`Request::into_codec`] continues the stream: it opens the client's
//! chunks, and its first seal leads with the server's salt and the
//! response header, stamped by the [`Users`] clock when it leaves.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use super::chunks::{seal_chunk, Chunks, Sealed, LENGTH_RECORD};
use super::kdf::{identity_block, session_key};
use super::{
    address, random, timestamp_fresh, unix_secs, Ss2022Error, BLOCK_LEN, MAX_KEY_LEN, MAX_PAYLOAD,
    MAX_RECORD_LEN,
};
use crate::aead::{AeadError, TAG_LEN};
use crate::codec::{FlowKind, Opened, Refusal, ServerCore, ServerRequest, ServerStep, StreamCodec};
use crate::Address;

pub use super::salt_filter::{SaltFilter, Verdict, KEEP_SECS, MAX_SALTS};
pub use super::udp_server::{UdpClientSession, UdpHead, UDP_HEADROOM, UDP_TAILROOM};
pub use super::users::{UserId, Users};

const CLIENT_STREAM: u8 = 0;
const SERVER_STREAM: u8 = 1;
/// The fixed request header: type, timestamp, length, and its tag.
const FIXED_HEADER: usize = 1 + 8 + 2 + TAG_LEN;

fn refuse(error: Ss2022Error) -> Refusal {
    Refusal::silent(error.message())
}

/// Opening a header record fails only when it does not authenticate.
fn unauthentic(_: io::Error) -> Refusal {
    Refusal::silent(AeadError::Unauthentic.message())
}

/// The fixed header opened: the variable one is `len` bytes and a tag.
struct Variable {
    salt: [u8; MAX_KEY_LEN],
    user: UserId,
    recv: Sealed,
    len: usize,
}

/// Records a salt seen at `now`, refusing a replay or a full filter.
fn record(filter: &SaltFilter, salt: &[u8], now: SystemTime) -> Result<(), Refusal> {
    match filter.insert(salt, now) {
        Verdict::New => Ok(()),
        Verdict::Seen => Err(refuse(Ss2022Error::ReplayedSalt)),
        Verdict::Full => Err(refuse(Ss2022Error::SaltFilterFull)),
    }
}

/// A core called again after it handed out its request.
fn already_opened() -> Refusal {
    Refusal::silent("shadowsocks-2022: the request was already opened")
}

/// The server side of one Shadowsocks 2022 connection's handshake.
pub struct Core {
    users: Arc<Users>,
    filter: Arc<SaltFilter>,
    /// Once the fixed header opened, until the request is handed out;
    /// boxed, as its key schedule would make every connection's task
    /// larger for its whole life.
    variable: Option<Box<Variable>>,
    done: bool,
}

impl Core {
    /// One connection of the inbound keyed by `users`, whose salts `filter`
    /// remembers.
    pub fn new(users: Arc<Users>, filter: Arc<SaltFilter>) -> Core {
        Core {
            users,
            filter,
            variable: None,
            done: false,
        }
    }

    /// Opens the salt, the identity header and the fixed header at the
    /// start of `input`; `None` until all of them are there.
    fn start(&mut self, input: &[u8], now: SystemTime) -> Result<Option<usize>, Refusal> {
        let users = &*self.users;
        let salt_len = users.salt_len();
        let identity = if users.multi_user() { BLOCK_LEN } else { 0 };
        let Some(head) = input.get(..salt_len + identity + FIXED_HEADER) else {
            return Ok(None);
        };
        let (salt_bytes, rest) = head.split_at(salt_len);
        let (identity_header, fixed_sealed) = rest.split_at(identity);
        let user = if users.multi_user() {
            let mut name: [u8; BLOCK_LEN] = identity_header
                .try_into()
                .map_err(|_| refuse(Ss2022Error::Short))?;
            identity_block(users.server_psk(), salt_bytes)
                .map_err(refuse)?
                .decrypt(&mut name);
            Some(users.find(&name).ok_or(refuse(Ss2022Error::UnknownUser))?)
        } else {
            None
        };
        let psk = users.psk_of(user).ok_or(refuse(Ss2022Error::UnknownUser))?;
        let key = session_key(users.algorithm(), psk, salt_bytes)
            .map_err(|e| Refusal::silent(e.message()))?;
        let mut recv = Sealed::new(key);
        let mut fixed = [0; FIXED_HEADER];
        fixed.copy_from_slice(fixed_sealed);
        recv.open(&mut fixed).map_err(unauthentic)?;
        if fixed[0] != CLIENT_STREAM {
            return Err(refuse(Ss2022Error::NotClient));
        }
        let timestamp = u64::from_be_bytes([
            fixed[1], fixed[2], fixed[3], fixed[4], fixed[5], fixed[6], fixed[7], fixed[8],
        ]);
        if !timestamp_fresh(timestamp, now) {
            return Err(refuse(Ss2022Error::ClientTimestamp));
        }
        record(&self.filter, salt_bytes, now)?;
        let mut salt = [0; MAX_KEY_LEN];
        salt[..salt_len].copy_from_slice(salt_bytes);
        self.variable = Some(Box::new(Variable {
            salt,
            user,
            recv,
            len: usize::from(u16::from_be_bytes([fixed[9], fixed[10]])),
        }));
        Ok(Some(head.len()))
    }
}

impl ServerCore for Core {
    type Request = Request;

    /// A header's record may carry up to 0xFFFF bytes.
    const MAX_HANDSHAKE: usize = ServerStream::BUF_SIZE;

    /// Checks the client's timestamp against `now`; sends nothing before
    /// the relay.
    fn advance(
        &mut self,
        input: &[u8],
        now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        if self.done {
            return Err(already_opened());
        }
        let mut at = 0;
        if self.variable.is_none() {
            match self.start(input, now)? {
                Some(used) => at = used,
                None => return Ok(ServerStep::NeedMore { consumed: 0 }),
            }
        }
        let Some(len) = self.variable.as_ref().map(|variable| variable.len) else {
            return Err(already_opened());
        };
        let Some(sealed) = input[at..].get(..len + TAG_LEN) else {
            return Ok(ServerStep::NeedMore { consumed: at });
        };
        let Some(variable) = self.variable.take() else {
            return Err(already_opened());
        };
        let Variable {
            salt,
            user,
            mut recv,
            ..
        } = *variable;
        self.done = true;
        // Opened in a copy, since the input is the runtime's; the copy
        // then holds the initial payload until the runtime forwards it.
        let mut plain = sealed.to_vec();
        recv.open(&mut plain).map_err(unauthentic)?;
        plain.truncate(len);
        let (destination, used) = address::read(&plain).map_err(|error| match error {
            Ss2022Error::Short => refuse(Ss2022Error::Short),
            _ => refuse(Ss2022Error::RequestAddress),
        })?;
        let padding = plain
            .get(used..used + 2)
            .map(|bytes| usize::from(u16::from_be_bytes([bytes[0], bytes[1]])))
            .ok_or(refuse(Ss2022Error::Short))?;
        let first = used + 2 + padding;
        if first > plain.len() {
            return Err(refuse(Ss2022Error::Short));
        }

        let users = &*self.users;
        let salt_len = users.salt_len();
        let mut server_salt = [0; MAX_KEY_LEN];
        random::fill(&mut server_salt[..salt_len]).map_err(refuse)?;
        record(&self.filter, &server_salt[..salt_len], now)?;
        let psk = users.psk_of(user).ok_or(refuse(Ss2022Error::UnknownUser))?;
        let send = session_key(users.algorithm(), psk, &server_salt[..salt_len])
            .map_err(|e| Refusal::silent(e.message()))?;
        Ok(ServerStep::Open {
            consumed: at + len + TAG_LEN,
            request: Request {
                destination,
                user,
                plain,
                first,
                stream: Box::new(ServerStream {
                    salt_len,
                    request_salt: salt,
                    server_salt,
                    send: Sealed::new(send),
                    recv: Chunks::new(recv),
                    header_sent: false,
                    clock: users.clock(),
                }),
            },
        })
    }
}

/// A client's request, authenticated: where it goes, for which user, the
/// initial payload of its header, and the stream that follows.
pub struct Request {
    destination: Address,
    user: UserId,
    /// The variable header's plaintext: address, padding, then the
    /// initial payload.
    plain: Vec<u8>,
    first: usize,
    /// Boxed from the start: the request is moved from the core through
    /// the runtime's futures, the key schedules stay where they are.
    stream: Box<ServerStream>,
}

impl Request {
    /// The user the identity header named (its index in the PSKs
    /// [`Users::new`] was given), or None on a single-user inbound.
    pub fn user(&self) -> UserId {
        self.user
    }

    /// The framed stream after the handshake.
    pub fn into_codec(self) -> Box<ServerStream> {
        self.stream
    }
}

impl ServerRequest for Request {
    fn destination(&self) -> &Address {
        &self.destination
    }

    fn kind(&self) -> FlowKind {
        FlowKind::Stream
    }

    /// The request header's initial payload.
    fn first_bytes(&self) -> &[u8] {
        &self.plain[self.first..]
    }

    /// Nothing yet: the response header is sealed with the first reply
    /// bytes (or, with none, at the outbound's end: seal an empty payload).
    fn on_connected(&self, _bound: SocketAddr, _out: &mut Vec<u8>) {}

    /// Nothing: the runtime closes.
    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

/// The server's side of a Shadowsocks 2022 stream after the handshake.
pub struct ServerStream {
    salt_len: usize,
    request_salt: [u8; MAX_KEY_LEN],
    server_salt: [u8; MAX_KEY_LEN],
    send: Sealed,
    recv: Chunks,
    header_sent: bool,
    clock: fn() -> SystemTime,
}

impl ServerStream {
    /// The runtime's buffer each way: the client's longest chunk (0xFFFF
    /// bytes and two records' overhead), or the response header and the
    /// longest first chunk behind it.
    pub const BUF_SIZE: usize = Self::HEADROOM + MAX_RECORD_LEN;
}

impl StreamCodec for ServerStream {
    /// The first frame's salt and response header (type, timestamp, a
    /// 32-byte request salt, length, tag): 91 bytes.
    const HEADROOM: usize = MAX_KEY_LEN + 1 + 8 + MAX_KEY_LEN + 2 + TAG_LEN;
    const TAILROOM: usize = TAG_LEN;
    const MAX_PAYLOAD: usize = MAX_PAYLOAD;

    /// The first call leads with the salt and response header, even for an
    /// empty payload; after it, an empty payload seals nothing.
    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        let head = Self::HEADROOM;
        if self.header_sent {
            if len == 0 {
                return Ok(head..head);
            }
            let at = head - LENGTH_RECORD;
            let tail = buf.get_mut(at..).ok_or(Ss2022Error::BufferTooSmall)?;
            let sealed = seal_chunk(&mut self.send, tail, len)?;
            return Ok(at + sealed.start..at + sealed.end);
        }
        if len > MAX_PAYLOAD {
            return Err(Ss2022Error::PayloadTooLong.into());
        }
        let salt_len = self.salt_len;
        let header = 1 + 8 + salt_len + 2 + TAG_LEN;
        let start = head - header - salt_len;
        let end = head + len + TAG_LEN;
        let frame = buf.get_mut(start..end).ok_or(Ss2022Error::BufferTooSmall)?;
        let (salt, rest) = frame.split_at_mut(salt_len);
        let (record, payload) = rest.split_at_mut(header);
        salt.copy_from_slice(&self.server_salt[..salt_len]);
        record[0] = SERVER_STREAM;
        record[1..9].copy_from_slice(&unix_secs((self.clock)()).to_be_bytes());
        record[9..9 + salt_len].copy_from_slice(&self.request_salt[..salt_len]);
        // len <= 0xFFFF.
        record[9 + salt_len..11 + salt_len].copy_from_slice(&(len as u16).to_be_bytes());
        self.send.seal(record)?;
        self.send.seal(payload)?;
        self.header_sent = true;
        Ok(start..end)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        self.recv.open(buf)
    }

    /// A target that ends before sending a byte still gets the client its
    /// response header (naming the request's salt) with an empty first
    /// chunk, so the client sees an authenticated end, not a bare EOF.
    fn seal_end(&mut self, buf: &mut [u8]) -> io::Result<Range<usize>> {
        if self.header_sent {
            return Ok(0..0);
        }
        self.seal(buf, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ClientCodec, ClientStep};
    use crate::shadowsocks::tests::{drive, frames, seal_frame, Driven};
    use crate::ss2022::kdf::Key;
    use crate::ss2022::tests::{psk, t0, METHODS};
    use crate::ss2022::{Keys, Ss2022Stream};
    use etemenanki_ir::spec::Ss2022Method;
    use std::time::Duration;

    fn t0_plus_20() -> SystemTime {
        t0() + Duration::from_secs(20)
    }

    fn dest() -> Address {
        Address::Domain("echo.example".into(), 7)
    }

    /// A single-user inbound under PSK 7, or a multi-user one under server
    /// PSK 1 whose users are PSKs 7 and 8.
    fn users(method: Ss2022Method, multi: bool) -> Arc<Users> {
        let users = if multi {
            Users::new(
                method,
                &psk(method, 1),
                &[&psk(method, 7), &psk(method, 8)],
                t0_plus_20,
            )
        } else {
            Users::new(method, &psk(method, 7), &[], t0_plus_20)
        };
        Arc::new(users.unwrap())
    }

    /// Our client's request under `user`, through the server PSK `server`
    /// when set, stamped `at`, and one data chunk after it.
    fn client(
        method: Ss2022Method,
        user: u8,
        server: Option<u8>,
        at: SystemTime,
    ) -> (Ss2022Stream, Vec<u8>) {
        let identity = server.map(|byte| psk(method, byte));
        let identities: Vec<&[u8]> = identity.iter().map(|k| k.as_slice()).collect();
        let keys = Keys::new(method, &psk(method, user), &identities).unwrap();
        let mut stream = Ss2022Stream::new(&keys, &dest(), at, t0).unwrap();
        let mut wire = Vec::new();
        assert_eq!(stream.start(&mut wire).unwrap(), ClientStep::Open(()));
        let mut buf = vec![0; LENGTH_RECORD + 4 + TAG_LEN];
        buf[LENGTH_RECORD..LENGTH_RECORD + 4].copy_from_slice(b"ping");
        let sealed = stream.seal(&mut buf, 4).unwrap();
        wire.extend_from_slice(&buf[sealed]);
        (stream, wire)
    }

    /// A request with an initial payload and `padding`, as other clients
    /// send it, single-user under PSK 7.
    fn request_with_payload(method: Ss2022Method, padding: usize, claimed: usize) -> Vec<u8> {
        let key = Key::new(&psk(method, 7), method.key_len()).unwrap();
        let algorithm = users(method, false).algorithm();
        let salt = vec![0x5c; method.key_len()];
        let mut send = Sealed::new(session_key(algorithm, &key, &salt).unwrap());
        let mut variable = vec![0; address::MAX_LEN];
        let n = address::write(&dest(), &mut variable);
        variable.truncate(n);
        variable.extend_from_slice(&(claimed as u16).to_be_bytes());
        variable.extend_from_slice(&vec![0; padding]);
        variable.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut fixed = vec![CLIENT_STREAM];
        fixed.extend_from_slice(&unix_secs(t0()).to_be_bytes());
        fixed.extend_from_slice(&(variable.len() as u16).to_be_bytes());
        fixed.extend_from_slice(&[0; TAG_LEN]);
        send.seal(&mut fixed).unwrap();
        variable.extend_from_slice(&[0; TAG_LEN]);
        send.seal(&mut variable).unwrap();
        [salt, fixed, variable].concat()
    }

    fn opens(users: &Arc<Users>, wire: &[u8], split: usize, now: SystemTime) -> Driven<Request> {
        let mut core = Core::new(users.clone(), Arc::new(SaltFilter::new()));
        drive(&mut core, wire, split, now)
    }

    #[test]
    fn what_the_runtime_shares_or_moves_between_tasks_can_be() {
        fn send<T: Send>() {}
        fn shared<T: Send + Sync>() {}
        shared::<Users>();
        shared::<SaltFilter>();
        send::<Core>();
        send::<Request>();
        send::<ServerStream>();
        send::<UdpClientSession>();
        send::<crate::shadowsocks::server::Core>();
        send::<crate::shadowsocks::server::Request>();
        send::<crate::shadowsocks::server::ServerStream>();
    }

    #[test]
    fn our_client_opens_at_the_server_and_the_reply_at_the_client() {
        for method in METHODS {
            for split in [1, 9, 4096] {
                let users = users(method, false);
                let (mut client, wire) = client(method, 7, None, t0());
                let (request, rest) = opens(&users, &wire, split, t0()).unwrap().unwrap();
                assert_eq!(request.destination(), &dest());
                assert_eq!(request.kind(), FlowKind::Stream);
                assert_eq!(request.user(), None);
                assert_eq!(
                    request.first_bytes(),
                    b"",
                    "our client pads, sends no payload"
                );
                let mut stream = request.into_codec();
                assert_eq!(frames(|b| stream.open(b), &rest).unwrap(), [b"ping"]);

                // The client reads at t0; the header is stamped t0 + 20.
                let mut reply = seal_frame(&mut stream, b"pong");
                reply.extend_from_slice(&seal_frame(&mut stream, b""));
                reply.extend_from_slice(&seal_frame(&mut stream, b"again"));
                let got = frames(|b| client.open(b), &reply).unwrap();
                assert_eq!(got, [&b""[..], b"pong", b"again"], "{method:?} /{split}");
            }
        }
    }

    #[test]
    fn with_no_reply_bytes_the_header_goes_out_with_an_empty_chunk() {
        for method in METHODS {
            let (mut client, wire) = client(method, 7, None, t0());
            let (request, _) = opens(&users(method, false), &wire, wire.len(), t0())
                .unwrap()
                .unwrap();
            let mut stream = request.into_codec();
            let reply = seal_frame(&mut stream, b"");
            let header = 2 * method.key_len() + 11 + TAG_LEN;
            assert_eq!(reply.len(), header + TAG_LEN);
            assert_eq!(frames(|b| client.open(b), &reply).unwrap(), [&b""[..], b""]);
        }
    }

    #[test]
    fn a_target_that_ends_before_a_byte_still_gets_the_client_its_header() {
        for method in METHODS {
            let (mut ours, wire) = client(method, 7, None, t0());
            let (request, _) = opens(&users(method, false), &wire, wire.len(), t0())
                .unwrap()
                .unwrap();
            let mut stream = request.into_codec();
            let mut buf = vec![0; ServerStream::HEADROOM + ServerStream::TAILROOM];
            let end = stream.seal_end(&mut buf).unwrap();
            let header = 2 * method.key_len() + 11 + TAG_LEN;
            assert_eq!(end.len(), header + TAG_LEN, "the header and an empty chunk");
            let got = frames(|b| ours.open(b), &buf[end]).unwrap();
            assert_eq!(got, [&b""[..], b""], "{method:?}: the client opens it");
            // Once the header went out, a stream ends with nothing more.
            assert!(stream.seal_end(&mut buf).unwrap().is_empty());

            let (_, wire) = client(method, 7, None, t0());
            let (request, _) = opens(&users(method, false), &wire, wire.len(), t0())
                .unwrap()
                .unwrap();
            let mut stream = request.into_codec();
            seal_frame(&mut stream, b"pong");
            assert!(stream.seal_end(&mut buf).unwrap().is_empty(), "{method:?}");
        }
    }

    #[test]
    fn the_longest_first_chunk_fits_the_buffer() {
        let method = Ss2022Method::Blake3Aes256Gcm;
        let (mut client, wire) = client(method, 7, None, t0());
        let (request, _) = opens(&users(method, false), &wire, wire.len(), t0())
            .unwrap()
            .unwrap();
        let mut stream = request.into_codec();
        let mut buf = vec![0; ServerStream::BUF_SIZE];
        let sealed = stream.seal(&mut buf, MAX_PAYLOAD).unwrap();
        assert_eq!(sealed.end, ServerStream::HEADROOM + MAX_PAYLOAD + TAG_LEN);
        let mut reply = buf[sealed].to_vec();
        let got = frames(|b| client.open(b), &reply.clone()).unwrap();
        assert_eq!(got[1].len(), MAX_PAYLOAD);
        let e = stream.seal(&mut reply, MAX_PAYLOAD + 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn an_initial_payload_after_the_padding_is_the_first_bytes() {
        for method in METHODS {
            let users = users(method, false);
            let wire = request_with_payload(method, 17, 17);
            let (request, rest) = opens(&users, &wire, 1, t0()).unwrap().unwrap();
            assert_eq!(request.destination(), &dest());
            assert_eq!(request.first_bytes(), b"GET / HTTP/1.1\r\n");
            assert!(rest.is_empty());
            // Padding that claims more than the header holds.
            let wire = request_with_payload(method, 17, 17 + 17);
            assert_eq!(
                opens(&users, &wire, wire.len(), t0()).err(),
                Some(Refusal::silent(Ss2022Error::Short.message()))
            );
        }
    }

    #[test]
    fn each_user_of_a_multi_user_inbound_is_identified_and_a_stranger_refused() {
        for method in [Ss2022Method::Blake3Aes128Gcm, Ss2022Method::Blake3Aes256Gcm] {
            let users = users(method, true);
            for (byte, index) in [(7, 0), (8, 1)] {
                let (mut client, wire) = client(method, byte, Some(1), t0());
                let (request, rest) = opens(&users, &wire, 5, t0()).unwrap().unwrap();
                assert_eq!(request.user(), Some(index), "{method:?}");
                assert_eq!(request.destination(), &dest());
                let mut stream = request.into_codec();
                assert_eq!(frames(|b| stream.open(b), &rest).unwrap(), [b"ping"]);
                let reply = seal_frame(&mut stream, b"pong");
                assert_eq!(
                    frames(|b| client.open(b), &reply).unwrap(),
                    [&b""[..], b"pong"]
                );
            }
            let unknown = Refusal::silent(Ss2022Error::UnknownUser.message());
            let (_, stranger) = client(method, 9, Some(1), t0());
            assert_eq!(
                opens(&users, &stranger, 1, t0()).err(),
                Some(unknown.clone())
            );
            let (_, wrong_server) = client(method, 7, Some(2), t0());
            assert_eq!(opens(&users, &wrong_server, 1, t0()).err(), Some(unknown));
            // A client without an identity header is garbage here.
            let (_, single) = client(method, 7, None, t0());
            assert!(opens(&users, &single, 1, t0()).is_err());
        }
    }

    #[test]
    fn a_wrong_psk_garbage_and_a_reflected_reply_are_refused() {
        for method in METHODS {
            let users = users(method, false);
            let unauthentic = Refusal::silent(AeadError::Unauthentic.message());
            let (_, wrong) = client(method, 9, None, t0());
            assert_eq!(
                opens(&users, &wrong, 1, t0()).err(),
                Some(unauthentic.clone())
            );
            let garbage: Vec<u8> = (0..300u32).map(|i| (i * 89 + 5) as u8).collect();
            assert_eq!(opens(&users, &garbage, 7, t0()).err(), Some(unauthentic));

            let (_, wire) = client(method, 7, None, t0());
            let (request, _) = opens(&users, &wire, wire.len(), t0()).unwrap().unwrap();
            let mut stream = request.into_codec();
            let mut reply = seal_frame(&mut stream, &[0; 64]);
            reply.extend_from_slice(&seal_frame(&mut stream, &[0; 64]));
            assert!(opens(&users, &reply, reply.len(), t0()).is_err());
        }
    }

    #[test]
    fn a_replayed_salt_is_refused_by_the_inbound_that_saw_it() {
        for method in METHODS {
            let users = users(method, false);
            let filter = Arc::new(SaltFilter::new());
            let (_, wire) = client(method, 7, None, t0());
            let mut first = Core::new(users.clone(), filter.clone());
            assert!(drive(&mut first, &wire, wire.len(), t0())
                .unwrap()
                .is_some());
            let mut again = Core::new(users.clone(), filter.clone());
            assert_eq!(
                drive(&mut again, &wire, 3, t0()).err(),
                Some(Refusal::silent(Ss2022Error::ReplayedSalt.message()))
            );
        }
    }

    #[test]
    fn a_full_salt_filter_refuses_new_streams_until_its_salts_are_past_60_s() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        let users = users(method, false);
        // Room for one stream: its salt and the server's.
        let filter = Arc::new(SaltFilter::with_max(2));
        let open = |at: SystemTime| {
            let (_, wire) = client(method, 7, None, at);
            let mut core = Core::new(users.clone(), filter.clone());
            drive(&mut core, &wire, wire.len(), at).map(|opened| opened.is_some())
        };
        let (_, first) = client(method, 7, None, t0());
        let mut core = Core::new(users.clone(), filter.clone());
        assert!(drive(&mut core, &first, first.len(), t0())
            .unwrap()
            .is_some());
        let full = Some(Refusal::silent(Ss2022Error::SaltFilterFull.message()));
        let later = |secs: u64| t0() + Duration::from_secs(secs);
        assert_eq!(open(later(1)).err(), full);
        assert_eq!(open(later(KEEP_SECS)).err(), full);
        assert!(filter.take_full_report());
        // The first stream replayed 30 s on is still a replay, not a new
        // stream the full filter refuses.
        let mut replay = Core::new(users.clone(), filter.clone());
        assert_eq!(
            drive(&mut replay, &first, first.len(), later(30)).err(),
            Some(Refusal::silent(Ss2022Error::ReplayedSalt.message()))
        );
        assert_eq!(open(later(KEEP_SECS + 1)), Ok(true));
        assert!(!filter.take_full_report(), "reported once");
    }

    #[test]
    fn a_timestamp_more_than_30_s_off_is_refused() {
        for method in METHODS {
            let users = users(method, false);
            let (_, wire) = client(method, 7, None, t0());
            let at = |secs: i64| {
                if secs < 0 {
                    t0() - Duration::from_secs(secs.unsigned_abs())
                } else {
                    t0() + Duration::from_secs(secs as u64)
                }
            };
            for (offset, ok) in [
                (-31, false),
                (-30, true),
                (0, true),
                (30, true),
                (31, false),
            ] {
                let got = opens(&users, &wire, wire.len(), at(offset));
                if ok {
                    assert!(got.unwrap().is_some(), "{offset}");
                } else {
                    assert_eq!(
                        got.err(),
                        Some(Refusal::silent(Ss2022Error::ClientTimestamp.message())),
                        "{offset}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_truncated_request_waits_and_consumes_only_whole_headers() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        let users = users(method, false);
        let (_, wire) = client(method, 7, None, t0());
        let mut core = Core::new(users, Arc::new(SaltFilter::new()));
        let fixed_end = 16 + FIXED_HEADER;
        for cut in 0..fixed_end {
            let mut out = Vec::new();
            assert!(matches!(
                core.advance(&wire[..cut], t0(), &mut out),
                Ok(ServerStep::NeedMore { consumed: 0 })
            ));
        }
        let mut out = Vec::new();
        assert!(matches!(
            core.advance(&wire[..fixed_end], t0(), &mut out),
            Ok(ServerStep::NeedMore { consumed }) if consumed == fixed_end
        ));
        let header_end = wire.len() - (LENGTH_RECORD + 4 + TAG_LEN);
        for cut in fixed_end..header_end {
            assert!(matches!(
                core.advance(&wire[fixed_end..cut], t0(), &mut out),
                Ok(ServerStep::NeedMore { consumed: 0 })
            ));
        }
        let Ok(ServerStep::Open { consumed, .. }) =
            core.advance(&wire[fixed_end..], t0(), &mut out)
        else {
            panic!("the whole header does not open");
        };
        assert_eq!(consumed, header_end - fixed_end);
    }
}
