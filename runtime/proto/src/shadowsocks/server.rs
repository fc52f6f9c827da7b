//! The Shadowsocks AEAD server, TCP and UDP.
//!
//! [`Core`] is the [`ServerCore`] of one TCP connection: it reads the
//! client's salt, derives the session key (HKDF-SHA1 of the master key and
//! the salt), and opens chunks until the destination address is whole. It
//! consumes whole chunks; what follows them is the framed stream's, which
//! [`Request::into_codec`] continues as a [`ServerStream`].
//!
//! Refused, each with [`Refusal::silent`] (the runtime holds the connection
//! until its handshake deadline, reading and discarding, so a prober learns
//! nothing):
//! - a chunk that fails authentication: a wrong password, or garbage;
//! - a chunk length over 0x3FFF;
//! - a salt seen before by this inbound, the client's or the server's own
//!   (a replayed or reflected stream), checked once the first chunk opens;
//! - an empty chunk before the address is whole;
//! - an address that does not parse.
//!
//! UDP is a packet at a time on a socket all clients share:
//! [`open_packet`] opens one where it lies (each packet carries its own
//! salt), and [`seal_packet`] seals a reply under a fresh salt. Packets
//! carry no replay protection in this protocol (shadowsocks-libev and
//! shadowsocks-rust check none either).

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use super::udp::{open, seal_fresh};
use super::{Incoming, Outgoing, MAX_SALT_LEN};
use crate::aead::{self, AeadError, ChunkOpener, MasterKey, RESERVE, TAG_LEN};
use crate::codec::{
    FlowKind, Opened, Packet, Refusal, ServerCore, ServerRequest, ServerStep, StreamCodec,
};
use crate::socks::read_address;
use crate::Address;

pub use super::salt_filter::SaltFilter;
pub use super::udp::{HEADROOM as UDP_HEADROOM, TAILROOM as UDP_TAILROOM};

/// Past the client's salt: the chunks under its session key.
struct Opening {
    opener: ChunkOpener,
    salt: [u8; MAX_SALT_LEN],
    /// Whether the salt went into the filter: once, with the first chunk
    /// that authenticated.
    recorded: bool,
}

/// The server side of one Shadowsocks AEAD connection's handshake.
pub struct Core {
    master: MasterKey,
    filter: Arc<SaltFilter>,
    /// Once the salt is in, until the request is handed out; boxed, as its
    /// key schedule would make every connection's task larger for its
    /// whole life.
    opening: Option<Box<Opening>>,
    done: bool,
    /// How many bytes the next step takes: a length record, or the chunk
    /// whose length it gave.
    needed: usize,
    /// The plaintext opened so far: the address, then the first payload.
    plain: Vec<u8>,
}

impl Core {
    /// One connection of an inbound keyed by `master`, whose salts `filter`
    /// remembers.
    pub fn new(master: MasterKey, filter: Arc<SaltFilter>) -> Core {
        Core {
            master,
            filter,
            opening: None,
            done: false,
            needed: RESERVE,
            plain: Vec::new(),
        }
    }
}

/// A core called again after it handed out its request.
fn already_opened() -> Refusal {
    Refusal::silent("shadowsocks: the request was already opened")
}

fn refuse(error: AeadError) -> Refusal {
    Refusal::silent(error.message())
}

impl ServerCore for Core {
    type Request = Request;

    /// The request comes inside the client's first record with as much of
    /// its first payload as it had (sslocal fills it): one whole record, a
    /// salt, a 0x3FFF-byte chunk and its length's.
    const MAX_HANDSHAKE: usize = 32 + 2 * (2 + 16) + 0x3FFF;

    /// Shadowsocks AEAD has no timestamps: `now` is not used, and nothing
    /// is sent before the relay.
    fn advance(
        &mut self,
        input: &[u8],
        _now: SystemTime,
        _out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        if self.done {
            return Err(already_opened());
        }
        let mut at = 0;
        if self.opening.is_none() {
            let salt_len = self.master.salt_len();
            let Some(client_salt) = input.get(..salt_len) else {
                return Ok(ServerStep::NeedMore { consumed: 0 });
            };
            let mut salt = [0; MAX_SALT_LEN];
            salt[..salt_len].copy_from_slice(client_salt);
            let key = self.master.session_key(client_salt).map_err(refuse)?;
            self.opening = Some(Box::new(Opening {
                opener: ChunkOpener::new(key),
                salt,
                recorded: false,
            }));
            at = salt_len;
        }
        let Some(opening) = &mut self.opening else {
            return Err(already_opened());
        };
        let Opening {
            opener,
            salt,
            recorded,
        } = &mut **opening;
        loop {
            let rest = &input[at..];
            let Some(record) = rest.get(..self.needed) else {
                return Ok(ServerStep::NeedMore { consumed: at });
            };
            // Opened from a copy, since the input is the runtime's.
            let base = self.plain.len();
            self.plain.extend_from_slice(record);
            let opened = opener.open(&mut self.plain[base..]);
            let payload = match opened {
                Err(error) => return Err(refuse(error)),
                Ok(aead::Opened::NeedMore { needed }) => {
                    self.plain.truncate(base);
                    self.needed = needed;
                    continue;
                }
                Ok(aead::Opened::Chunk { consumed, payload }) => {
                    at += consumed;
                    self.needed = RESERVE;
                    payload
                }
            };
            if payload.is_empty() {
                return Err(Refusal::silent(
                    "shadowsocks: an empty chunk before the address",
                ));
            }
            self.plain
                .copy_within(base + payload.start..base + payload.end, base);
            self.plain.truncate(base + payload.len());
            if !*recorded {
                if !self.filter.insert(&salt[..self.master.salt_len()]) {
                    return Err(Refusal::silent("shadowsocks: a replayed salt"));
                }
                *recorded = true;
            }
            let (destination, used) = match read_address(&self.plain) {
                Ok(None) => continue,
                Ok(Some(found)) => found,
                Err(_) => {
                    return Err(Refusal::silent(
                        "shadowsocks: the destination address does not parse",
                    ))
                }
            };
            let outgoing = Outgoing::random(&self.master).map_err(|_| {
                Refusal::silent("shadowsocks: the system gave no randomness for a salt")
            })?;
            if !self.filter.insert(outgoing.salt()) {
                return Err(Refusal::silent("shadowsocks: a replayed salt"));
            }
            let Some(opening) = self.opening.take() else {
                return Err(already_opened());
            };
            self.done = true;
            return Ok(ServerStep::Open {
                consumed: at,
                request: Request {
                    destination,
                    plain: std::mem::take(&mut self.plain),
                    first: used,
                    stream: Box::new(ServerStream {
                        incoming: Incoming::resumed(self.master.clone(), opening.opener),
                        outgoing,
                        salt_sent: false,
                    }),
                },
            });
        }
    }
}

/// A client's request, authenticated: where it goes, the payload that came
/// with the address, and the keys of the stream that follows.
pub struct Request {
    destination: Address,
    /// The opened plaintext: the address, then `first_bytes`.
    plain: Vec<u8>,
    first: usize,
    /// Boxed from the start: the request is moved from the core through
    /// the runtime's futures, the key schedules stay where they are.
    stream: Box<ServerStream>,
}

impl Request {
    /// The framed stream after the handshake: it opens the client's chunks
    /// from where [`Core`] stopped and seals the server's, its first frame
    /// led by the server's own salt.
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

    /// The plaintext that followed the address in its chunks.
    fn first_bytes(&self) -> &[u8] {
        &self.plain[self.first..]
    }

    /// Shadowsocks answers nothing: the server's salt leads its first data.
    fn on_connected(&self, _bound: SocketAddr, _out: &mut Vec<u8>) {}

    /// Nothing either: the runtime closes.
    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

/// The server's side of a Shadowsocks AEAD stream after the handshake.
pub struct ServerStream {
    incoming: Incoming,
    outgoing: Outgoing,
    salt_sent: bool,
}

impl ServerStream {
    /// The runtime's buffer each way: four of the longest chunks, each
    /// with room for the salt (65,796 bytes). A client sends a chunk a
    /// write; one read here takes up to four that queued and one write
    /// hands their payloads on, and one read from the target fills four
    /// chunks sent with one write, so a bulk transfer costs a quarter of
    /// the system calls (and of the far end's wakeups) of a buffer of one
    /// chunk. Held only while bytes move.
    pub const BUF_SIZE: usize = 4 * (MAX_SALT_LEN + aead::MAX_CHUNK_LEN);
}

impl StreamCodec for ServerStream {
    /// The server's salt, before the first chunk, and a length record.
    const HEADROOM: usize = MAX_SALT_LEN + RESERVE;
    const TAILROOM: usize = TAG_LEN;
    const MAX_PAYLOAD: usize = aead::MAX_PAYLOAD;

    /// An empty payload seals nothing, salt included.
    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        let chunk = Self::HEADROOM - RESERVE;
        let tail = buf.get_mut(chunk..).ok_or(AeadError::BufferTooSmall)?;
        let sealed = self.outgoing.seal(tail, len)?;
        if sealed.is_empty() {
            return Ok(Self::HEADROOM..Self::HEADROOM);
        }
        let mut start = chunk;
        if !self.salt_sent {
            let salt = self.outgoing.salt();
            start -= salt.len();
            buf[start..chunk].copy_from_slice(salt);
            self.salt_sent = true;
        }
        Ok(start..chunk + sealed.end)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        self.incoming.open(buf)
    }
}

/// Opens the client packet that is the whole of `buf` where it lies: its
/// destination (`peer`) and payload. One too short, unauthentic or with an
/// address that does not parse is an error, for the runtime to drop.
pub fn open_packet(master: &MasterKey, buf: &mut [u8]) -> io::Result<Packet> {
    open(master, buf)
}

/// Seals the `len` reply bytes at `buf[UDP_HEADROOM..UDP_HEADROOM + len]`
/// from `source` under a fresh salt, where they lie (UDP_TAILROOM bytes
/// follow them); returns the range of `buf` the packet occupies.
pub fn seal_packet(
    master: &MasterKey,
    buf: &mut [u8],
    len: usize,
    source: &Address,
) -> io::Result<Range<usize>> {
    seal_fresh(master, buf, len, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::Algorithm;
    use crate::codec::{ClientCodec, ClientStep, DatagramCodec};
    use crate::shadowsocks::tests::{drive, frames, seal_frame, ALGORITHMS};
    use crate::shadowsocks::{SsDatagram, SsStream};
    use crate::socks::{address_len, put_address};
    use std::time::UNIX_EPOCH;

    fn master(algorithm: Algorithm, password: &str) -> MasterKey {
        MasterKey::from_password(algorithm, password.as_bytes())
    }

    fn dest() -> Address {
        Address::Domain("echo.example".into(), 7)
    }

    /// The client's request and one data chunk after it.
    fn client_wire(client: &mut SsStream, data: &[u8]) -> Vec<u8> {
        let mut wire = Vec::new();
        assert_eq!(client.start(&mut wire).unwrap(), ClientStep::Open(()));
        let mut buf = vec![0; RESERVE + data.len() + TAG_LEN];
        buf[RESERVE..RESERVE + data.len()].copy_from_slice(data);
        let sealed = client.seal(&mut buf, data.len()).unwrap();
        wire.extend_from_slice(&buf[sealed]);
        wire
    }

    /// A request whose chunks carry `plain` (address and payload) cut at
    /// `cuts`, as a client other than ours may send it.
    fn chunked(master: &MasterKey, plain: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut outgoing = Outgoing::random(master).unwrap();
        let mut wire = outgoing.salt().to_vec();
        let mut from = 0;
        for to in cuts.iter().copied().chain([plain.len()]) {
            let mut buf = vec![0; RESERVE + (to - from) + TAG_LEN];
            buf[RESERVE..RESERVE + to - from].copy_from_slice(&plain[from..to]);
            let sealed = outgoing.seal(&mut buf, to - from).unwrap();
            wire.extend_from_slice(&buf[sealed]);
            from = to;
        }
        wire
    }

    fn address_bytes(addr: &Address) -> Vec<u8> {
        let mut out = vec![0; address_len(addr)];
        put_address(addr, &mut out);
        out
    }

    #[test]
    fn our_client_opens_at_the_server_and_the_reply_opens_at_the_client() {
        for algorithm in ALGORITHMS {
            for split in [1, 7, 1000] {
                let filter = Arc::new(SaltFilter::new());
                let mut client = SsStream::new(&master(algorithm, "secret"), &dest()).unwrap();
                let wire = client_wire(&mut client, b"ping");
                let mut core = Core::new(master(algorithm, "secret"), filter.clone());
                let (request, rest) = drive(&mut core, &wire, split, UNIX_EPOCH).unwrap().unwrap();
                assert_eq!(request.destination(), &dest());
                assert_eq!(request.kind(), FlowKind::Stream);
                assert_eq!(
                    request.first_bytes(),
                    b"",
                    "our client sends the address alone"
                );
                let mut stream = request.into_codec();
                assert_eq!(frames(|b| stream.open(b), &rest).unwrap(), [b"ping"]);

                let mut reply = seal_frame(&mut stream, b"pong");
                assert_eq!(
                    reply.len(),
                    algorithm.key_len() + 34 + 4,
                    "salt, then the chunk"
                );
                reply.extend_from_slice(&seal_frame(&mut stream, b"again"));
                assert!(seal_frame(&mut stream, b"").is_empty());
                let got = frames(|b| client.open(b), &reply).unwrap();
                assert_eq!(got, [&b""[..], b"pong", b"again"], "{algorithm:?}");
            }
        }
    }

    #[test]
    fn a_payload_in_the_address_chunk_or_an_address_cut_across_chunks_opens() {
        for algorithm in ALGORITHMS {
            let master = master(algorithm, "secret");
            let mut plain = address_bytes(&dest());
            plain.extend_from_slice(b"GET / HTTP/1.1\r\n");
            for cuts in [&[][..], &[1], &[3, 5], &[plain.len() - 1]] {
                let wire = chunked(&master, &plain, cuts);
                let mut core = Core::new(master.clone(), Arc::new(SaltFilter::new()));
                let (request, rest) = drive(&mut core, &wire, wire.len(), UNIX_EPOCH)
                    .unwrap()
                    .unwrap();
                assert_eq!(request.destination(), &dest());
                let address = address_bytes(&dest()).len();
                // The core stops at the chunk that completes the address.
                let whole = cuts.iter().find(|&&c| c >= address).copied();
                let first = whole.unwrap_or(plain.len());
                assert_eq!(request.first_bytes(), &plain[address..first], "{cuts:?}");
                let mut stream = request.into_codec();
                let after: Vec<u8> = frames(|b| stream.open(b), &rest).unwrap().concat();
                assert_eq!(after, &plain[first..]);
            }
        }
    }

    #[test]
    fn a_wrong_password_garbage_and_an_empty_chunk_are_refused() {
        for algorithm in ALGORITHMS {
            let mut client = SsStream::new(&master(algorithm, "right"), &dest()).unwrap();
            let wire = client_wire(&mut client, b"x");
            let mut core = Core::new(master(algorithm, "wrong"), Arc::new(SaltFilter::new()));
            let refusal = drive(&mut core, &wire, 1, UNIX_EPOCH).err().unwrap();
            assert_eq!(refusal, Refusal::silent(AeadError::Unauthentic.message()));

            let garbage: Vec<u8> = (0..200u32).map(|i| (i * 73 + 11) as u8).collect();
            let mut core = Core::new(master(algorithm, "right"), Arc::new(SaltFilter::new()));
            assert!(drive(&mut core, &garbage, 13, UNIX_EPOCH).is_err());

            // One address byte, then a chunk of length zero: sealed by
            // hand, as the sealer seals nothing for an empty payload.
            let master = master(algorithm, "right");
            let mut wire = chunked(&master, &[1], &[]);
            let salt = wire[..algorithm.key_len()].to_vec();
            let key = master.session_key(&salt).unwrap();
            let mut nonce = aead::Nonce::ZERO;
            nonce.increment();
            nonce.increment();
            let mut length = [0; RESERVE];
            key.seal_in_place(&nonce, &[], &mut length).unwrap();
            nonce.increment();
            let mut tag = [0; TAG_LEN];
            key.seal_in_place(&nonce, &[], &mut tag).unwrap();
            wire.extend_from_slice(&length);
            wire.extend_from_slice(&tag);
            let mut core = Core::new(master.clone(), Arc::new(SaltFilter::new()));
            let refusal = drive(&mut core, &wire, wire.len(), UNIX_EPOCH)
                .err()
                .unwrap();
            assert_eq!(
                refusal,
                Refusal::silent("shadowsocks: an empty chunk before the address")
            );
        }
    }

    #[test]
    fn a_replayed_request_and_a_reflected_reply_are_refused() {
        for algorithm in ALGORITHMS {
            let filter = Arc::new(SaltFilter::new());
            let mut client = SsStream::new(&master(algorithm, "secret"), &dest()).unwrap();
            let wire = client_wire(&mut client, b"x");
            let mut core = Core::new(master(algorithm, "secret"), filter.clone());
            let (request, _) = drive(&mut core, &wire, wire.len(), UNIX_EPOCH)
                .unwrap()
                .unwrap();
            let mut replay = Core::new(master(algorithm, "secret"), filter.clone());
            let refusal = drive(&mut replay, &wire, wire.len(), UNIX_EPOCH)
                .err()
                .unwrap();
            assert_eq!(refusal, Refusal::silent("shadowsocks: a replayed salt"));

            let mut stream = request.into_codec();
            let reply = seal_frame(&mut stream, b"reflected");
            let mut reflected = Core::new(master(algorithm, "secret"), filter.clone());
            let refusal = drive(&mut reflected, &reply, 3, UNIX_EPOCH).err().unwrap();
            assert_eq!(refusal, Refusal::silent("shadowsocks: a replayed salt"));
            // Another inbound's filter has not seen it.
            let mut elsewhere = Core::new(master(algorithm, "secret"), Arc::new(SaltFilter::new()));
            assert!(drive(&mut elsewhere, &wire, wire.len(), UNIX_EPOCH)
                .unwrap()
                .is_some());
        }
    }

    #[test]
    fn an_address_that_does_not_parse_is_refused() {
        let master = master(Algorithm::Aes128Gcm, "secret");
        let wire = chunked(&master, &[9, 1, 2, 3], &[]);
        let mut core = Core::new(master, Arc::new(SaltFilter::new()));
        assert_eq!(
            drive(&mut core, &wire, 1, UNIX_EPOCH).err().unwrap(),
            Refusal::silent("shadowsocks: the destination address does not parse")
        );
    }

    #[test]
    fn a_client_packet_opens_at_the_server_and_its_reply_at_the_client() {
        for algorithm in ALGORITHMS {
            let master = master(algorithm, "secret");
            let mut client = SsDatagram::new(master.clone());
            let dns = Address::Ip("192.0.2.53:53".parse().unwrap());
            let mut buf = vec![0; UDP_HEADROOM + 5 + UDP_TAILROOM];
            buf[UDP_HEADROOM..UDP_HEADROOM + 5].copy_from_slice(b"query");
            let sealed = client.seal_to(&mut buf, 5, &dns).unwrap();
            let mut packet = buf[sealed].to_vec();
            let opened = open_packet(&master, &mut packet).unwrap();
            assert_eq!(opened.peer, dns);
            assert_eq!(&packet[opened.payload], b"query");

            let mut buf = vec![0; UDP_HEADROOM + 6 + UDP_TAILROOM];
            buf[UDP_HEADROOM..UDP_HEADROOM + 6].copy_from_slice(b"answer");
            let sealed = seal_packet(&master, &mut buf, 6, &dns).unwrap();
            let mut reply = buf[sealed].to_vec();
            let opened = client.open_from(&mut reply).unwrap().unwrap();
            assert_eq!(opened.peer, dns);
            assert_eq!(&reply[opened.payload], b"answer");

            let other = MasterKey::from_password(algorithm, b"other");
            assert!(open_packet(&other, &mut buf.clone()).is_err());
            assert!(open_packet(&master, &mut [0; 20]).is_err());
        }
    }
}
