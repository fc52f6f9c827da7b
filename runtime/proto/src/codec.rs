//! The two shapes every protocol core takes, so one runtime drives them all.
//!
//! - A [`ClientCodec`] is the client half of a proxy protocol: it appends the
//!   bytes to send into a buffer the caller owns, decodes what the server
//!   answers and says how many bytes it used. Bytes after the answer belong to
//!   the stream (a server that speaks first), so the caller keeps them.
//! - A [`ServerCore`] is the server half: it takes the bytes a client sent
//!   and the time they arrived, and answers need-more, open-this-flow or
//!   refuse-with-this-reply. What to send the client once the flow is
//!   connected, or once the dial failed, is the request's to say
//!   ([`ServerRequest`]), because it depends on the outcome.
//!
//! Neither does I/O or reads a clock: the runtime passes `now`, so a core
//! with a time or replay window (VMess, Shadowsocks 2022) is tested with
//! simulated time.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::SystemTime;

use crate::Address;

/// What a client handshake asks of the runtime once it has written what the
/// codec appended to the output buffer, and flushed it.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientStep<R> {
    /// Read the server's answer and pass it to [`ClientCodec::decode`].
    Read,
    /// The stream is open; `R` is what the server's answer said.
    Open(R),
}

/// The client half of a proxy protocol's handshake.
pub trait ClientCodec {
    type Reply;

    /// The most bytes one call appends to the output buffer: the runtime
    /// sizes its staging buffer above it.
    const STAGING_RESERVE: usize;

    /// Appends the first bytes to send; an error (a header that cannot be
    /// sealed) fails the dial.
    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<Self::Reply>>;

    /// Decodes from `input`, the unconsumed bytes the server sent so far.
    /// `Ok(None)` means more are needed; `Ok(Some((consumed, step)))` says how
    /// many bytes this answer took and what comes next, having appended any
    /// bytes of the next round to `out`.
    ///
    /// The default is for a codec whose `start` opens at once (the server
    /// answers nothing before data): the driver never asks it.
    fn decode(
        &mut self,
        _input: &[u8],
        _out: &mut Vec<u8>,
    ) -> io::Result<Option<(usize, ClientStep<Self::Reply>)>> {
        Err(io::Error::other("codec handshake step made no progress"))
    }
}

/// What [`StreamCodec::open`] found at the start of the bytes it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// No whole frame yet: the bytes must be `needed` long, from the same
    /// start, before the next call can make progress. Nothing was consumed.
    NeedMore { needed: usize },
    /// One frame, opened in place: `buf[payload]` is its plaintext (possibly
    /// empty, for a frame that carries none), and the first `consumed` bytes
    /// are done with.
    Frame {
        consumed: usize,
        payload: Range<usize>,
    },
}

/// A stream whose bytes travel in sealed frames (Shadowsocks chunks, VMess
/// chunks): the runtime reads a payload into a buffer behind `HEADROOM`
/// bytes, the codec seals it where it lies, and opens arriving frames in
/// place. The caller owns every buffer.
pub trait StreamCodec {
    /// The most bytes a sealed frame adds in front of its payload.
    const HEADROOM: usize;
    /// The most bytes a sealed frame adds after its payload.
    const TAILROOM: usize;
    /// The largest payload one frame carries.
    const MAX_PAYLOAD: usize;

    /// Seals the `len` payload bytes at `buf[HEADROOM..HEADROOM + len]`
    /// where they lie (`len` is at most MAX_PAYLOAD, and TAILROOM bytes
    /// follow them); returns the range of `buf` the frame occupies.
    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>>;

    /// Opens the frame at the start of `buf`, the bytes received and not
    /// yet consumed; call again on what follows `consumed`. An error is
    /// final.
    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened>;

    /// The upstream ended its stream between two frames: a codec that
    /// still expected something (VMess's response header) says so with an
    /// error; the rest see the end of the stream.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// What this direction sends when the writer shuts it down, sealed as
    /// [`StreamCodec::seal`] seals a frame of no payload (`buf` has
    /// HEADROOM and TAILROOM bytes): VMess's empty chunk, or a Shadowsocks
    /// 2022 server's response header that no payload carried yet. Returns
    /// the range of `buf` to send before the stream's own end; most
    /// framings send nothing.
    fn seal_end(&mut self, _buf: &mut [u8]) -> io::Result<Range<usize>> {
        Ok(0..0)
    }

    /// Whether the frame just opened ended the peer's direction (VMess's
    /// empty chunk): nothing after it is read.
    fn ended(&self) -> bool {
        false
    }
}

/// A boxed codec frames as the codec does: a codec whose key schedules
/// take a kilobyte lives once on the heap, not in every future of the
/// connection its stream is moved through.
impl<C: StreamCodec> StreamCodec for Box<C> {
    const HEADROOM: usize = C::HEADROOM;
    const TAILROOM: usize = C::TAILROOM;
    const MAX_PAYLOAD: usize = C::MAX_PAYLOAD;

    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        (**self).seal(buf, len)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        (**self).open(buf)
    }

    fn finish(&mut self) -> io::Result<()> {
        (**self).finish()
    }

    fn seal_end(&mut self, buf: &mut [u8]) -> io::Result<Range<usize>> {
        (**self).seal_end(buf)
    }

    fn ended(&self) -> bool {
        (**self).ended()
    }
}

/// One packet [`DatagramCodec::open_from`] opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The bytes at the start of the input this packet took.
    pub consumed: usize,
    /// Where the packet came from (or, on a server, where it goes).
    pub peer: Address,
    /// Its payload, opened in place.
    pub payload: Range<usize>,
}

/// The framing of datagrams that carry their own address: one per UDP
/// packet (SOCKS5 UDP, Shadowsocks UDP) or several inside a stream (Trojan,
/// and VLESS and VMess whose packets name one target). The runtime reads a payload behind `HEADROOM` bytes,
/// the codec seals it where it lies, and opens arriving packets in place.
/// The caller owns every buffer.
pub trait DatagramCodec {
    /// The most bytes a sealed packet adds in front of its payload.
    const HEADROOM: usize;
    /// The most bytes a sealed packet adds after its payload.
    const TAILROOM: usize;

    /// Seals the `len` payload bytes at `buf[HEADROOM..HEADROOM + len]`,
    /// bound for `to`, where they lie (TAILROOM bytes follow them); returns
    /// the range of `buf` the packet occupies. An empty range means the
    /// packet is dropped, as UDP may: a multiplexed stream with no session
    /// left to take it.
    fn seal_to(&mut self, buf: &mut [u8], len: usize, to: &Address) -> io::Result<Range<usize>>;

    /// Opens the packet at the start of `buf`. `Ok(None)` means more bytes
    /// are needed (a packet inside a stream, split across reads); a packet
    /// that is whole but malformed is an error (for a packet per datagram
    /// the caller drops it; inside a stream the stream is unusable).
    fn open_from(&mut self, buf: &mut [u8]) -> io::Result<Option<Packet>>;
}

/// Why a client is refused: what to send it before closing, and the reason
/// for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reply: Vec<u8>,
    pub reason: &'static str,
}

impl Refusal {
    /// A refusal answered by closing, with nothing sent.
    pub fn silent(reason: &'static str) -> Self {
        Refusal {
            reply: Vec::new(),
            reason,
        }
    }
}

/// What one call to [`ServerCore::advance`] achieved.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerStep<R> {
    /// `consumed` bytes were used; read more and call again.
    NeedMore { consumed: usize },
    /// The request is whole and authenticated; `consumed` bytes were used.
    /// What follows them is the flow's first payload.
    Open { consumed: usize, request: R },
}

/// The network of the flow a request opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    Stream,
    /// A UDP association: packets routed one by one.
    Datagrams,
}

/// The server half of a proxy protocol's handshake, one per connection.
pub trait ServerCore {
    type Request: ServerRequest;

    /// The most bytes a handshake may hold unconsumed: past it the runtime
    /// ends the connection as `<protocol>: handshake too long`.
    const MAX_HANDSHAKE: usize;

    /// Consumes what it can of `input` (the unconsumed bytes read so far,
    /// which arrived by `now`), appending bytes for the client (a method
    /// choice, an auth answer) to `out`.
    fn advance(
        &mut self,
        input: &[u8],
        now: SystemTime,
        out: &mut Vec<u8>,
    ) -> Result<ServerStep<Self::Request>, Refusal>;
}

/// A decoded request, and what it stages for the client on each outcome.
pub trait ServerRequest {
    /// Where the flow goes; for a UDP association, where the client says it
    /// sends from.
    fn destination(&self) -> &Address;

    fn kind(&self) -> FlowKind;

    /// Bytes the outbound must receive before the client's own (the
    /// rewritten head of a plain HTTP request).
    fn first_bytes(&self) -> &[u8] {
        &[]
    }

    /// Appends what the client is told once the flow is connected; `bound`
    /// is the outbound's local address where it has one.
    fn on_connected(&self, bound: SocketAddr, out: &mut Vec<u8>);

    /// Whether [`on_connected`](Self::on_connected) tells the client
    /// `bound` (only a SOCKS reply does): when not, the runtime passes the
    /// unspecified address and spares the connection asking its socket.
    fn reports_bound(&self) -> bool {
        false
    }

    /// Appends what the client is told when the dial failed with `error`.
    fn on_connect_failed(&self, error: io::ErrorKind, out: &mut Vec<u8>);
}

/// For the server cores' tests, which all feed their core random bytes: a
/// deterministic stream of them (xorshift64) from `seed`, which must not be
/// zero.
#[cfg(test)]
pub(crate) fn noise(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
