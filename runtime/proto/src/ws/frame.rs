//! WebSocket frames (RFC 6455 section 5) under a byte stream, sans-IO.
//!
//! - Writing: [`encode_header`] lays a frame's 2–14 header bytes in front
//!   of its payload, and [`apply_mask`] masks a client's payload where it
//!   lies; a client draws its masking keys from [`Masks`].
//! - Reading: a [`Decoder`] takes the bytes as they were read and, in
//!   place, unmasks the payload of data frames and moves it to the front
//!   of the same buffer, dropping headers and control frames. A message is
//!   never held whole: its fragments and frames are bytes of the stream as
//!   they come, so the only state between reads is a partial header (at
//!   most 14 bytes, inline) and a control frame's payload (at most 125
//!   bytes, held only while one is read). Text messages are bytes like
//!   binary ones (a proxy's peers send binary; their text is not checked
//!   for UTF-8). Pings are kept for the caller to answer; the peer's close
//!   frame ends the stream, and what follows it is dropped.

use std::io;

/// The longest frame header: 2 bytes, a 64-bit length, a masking key.
pub const MAX_HEADER: usize = 14;

/// The longest payload of a control frame (close, ping, pong).
pub const MAX_CONTROL: usize = 125;

/// Which end of the connection this is: a client masks every frame it
/// sends, and a server refuses any frame that is not masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xa => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xa,
        }
    }

    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// The length of the header of a frame of `len` payload bytes.
pub fn header_len(len: usize, masked: bool) -> usize {
    let extended = match len {
        0..=125 => 0,
        126..=0xffff => 2,
        _ => 8,
    };
    2 + extended + if masked { 4 } else { 0 }
}

/// Writes the header of a frame of `len` payload bytes at the start of
/// `out`, which holds at least [`header_len`] bytes ([`MAX_HEADER`] is
/// always enough), and returns its length. The payload goes right behind
/// it, masked with `mask` when one is given.
pub fn encode_header(
    out: &mut [u8],
    fin: bool,
    opcode: Opcode,
    len: usize,
    mask: Option<[u8; 4]>,
) -> usize {
    out[0] = if fin { 0x80 } else { 0 } | opcode.bits();
    let masked = if mask.is_some() { 0x80 } else { 0 };
    let mut at = 2;
    match u16::try_from(len) {
        Ok(short @ 0..=125) => out[1] = masked | short as u8,
        Ok(medium) => {
            out[1] = masked | 126;
            out[2..4].copy_from_slice(&medium.to_be_bytes());
            at = 4;
        }
        Err(_) => {
            out[1] = masked | 127;
            out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
            at = 10;
        }
    }
    if let Some(key) = mask {
        out[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    at
}

/// A control frame (close, ping, pong) with its payload, masked with `mask`
/// when one is given. `payload` is at most [`MAX_CONTROL`] bytes.
pub fn encode_control(opcode: Opcode, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let len = payload.len().min(MAX_CONTROL);
    let mut frame = vec![0; header_len(len, mask.is_some()) + len];
    let at = encode_header(&mut frame, true, opcode, len, mask);
    frame[at..].copy_from_slice(&payload[..len]);
    if let Some(key) = mask {
        apply_mask(&mut frame[at..], key, 0);
    }
    frame
}

/// Masks (or unmasks: the same XOR) `data` with `key`, `data` starting
/// `phase` bytes into its frame's payload.
///
/// In blocks of 64 bytes against the key repeated as long, a loop the
/// compiler turns into four 16-byte XORs (SSE2, every x86-64 has it).
pub fn apply_mask(data: &mut [u8], key: [u8; 4], phase: usize) {
    let pattern: [u8; 64] = std::array::from_fn(|i| key[(phase + i) % 4]);
    let mut blocks = data.chunks_exact_mut(64);
    for block in &mut blocks {
        for (b, m) in block.iter_mut().zip(pattern) {
            *b ^= m;
        }
    }
    for (b, m) in blocks.into_remainder().iter_mut().zip(pattern) {
        *b ^= m;
    }
}

/// The masking keys of one client connection, SplitMix64 from a seed the
/// caller draws at random once. RFC 6455 section 5.3 wants keys a script
/// in the page cannot predict, against cache poisoning of intermediaries
/// by browser code; a proxy runs no such code, and a CSPRNG call for every
/// frame would cost more than masking it.
pub struct Masks(u64);

impl Masks {
    pub fn new(seed: [u8; 8]) -> Masks {
        Masks(u64::from_le_bytes(seed))
    }

    pub fn next_key(&mut self) -> [u8; 4] {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let b = z.to_le_bytes();
        [b[0], b[1], b[2], b[3]]
    }
}

/// The peer's close frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    /// Its status code; `None` for a close frame with no payload.
    pub code: Option<u16>,
}

/// The frame whose payload is being read.
#[derive(Debug)]
struct Frame {
    opcode: Opcode,
    remaining: u64,
    key: Option<[u8; 4]>,
    /// Payload bytes read so far, modulo 4: where the key starts.
    phase: usize,
}

/// Reads the frames of one connection in place; see the module.
#[derive(Debug)]
pub struct Decoder {
    role: Role,
    max_frame: u64,
    /// Header bytes read so far, when a header is split across reads.
    head: [u8; MAX_HEADER],
    have: usize,
    frame: Option<Frame>,
    /// Inside a fragmented data message: continuations may come, a new
    /// message may not.
    fragmented: bool,
    /// The payload of the control frame being read.
    control: Vec<u8>,
    /// The payload of the last ping not answered yet.
    ping: Option<Vec<u8>>,
    close: Option<Close>,
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

impl Decoder {
    /// A decoder for the frames `role`'s peer sends; a data frame of more
    /// than `max_frame` payload bytes is refused.
    pub fn new(role: Role, max_frame: u64) -> Decoder {
        Decoder {
            role,
            max_frame,
            head: [0; MAX_HEADER],
            have: 0,
            frame: None,
            fragmented: false,
            control: Vec::new(),
            ping: None,
            close: None,
        }
    }

    /// Decodes `buf`, bytes just read, in place: the payload of its data
    /// frames, unmasked, is moved to the front of `buf`, and its length
    /// returned. Headers and control frames are taken out; a ping is kept
    /// for [`Decoder::take_ping`]. Bytes after the peer's close frame are
    /// dropped.
    pub fn decode(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut at = 0;
        let mut out = 0;
        while at < buf.len() && self.close.is_none() {
            let Some(mut frame) = self.frame.take() else {
                at += self.read_header(&buf[at..])?;
                continue;
            };
            let take = usize::try_from(frame.remaining)
                .unwrap_or(usize::MAX)
                .min(buf.len() - at);
            let piece = at..at + take;
            if let Some(key) = frame.key {
                apply_mask(&mut buf[piece.clone()], key, frame.phase);
            }
            frame.phase = (frame.phase + take) % 4;
            frame.remaining -= take as u64;
            if frame.opcode.is_control() {
                self.control.extend_from_slice(&buf[piece]);
            } else {
                if out != at {
                    buf.copy_within(piece, out);
                }
                out += take;
            }
            at += take;
            if frame.remaining == 0 {
                self.end_frame(frame.opcode)?;
            } else {
                self.frame = Some(frame);
            }
        }
        Ok(out)
    }

    /// The payload of the last ping read and not answered yet: a pong
    /// carries it back.
    pub fn take_ping(&mut self) -> Option<Vec<u8>> {
        self.ping.take()
    }

    /// The peer's close frame, once read.
    pub fn close(&self) -> Option<Close> {
        self.close
    }

    /// Whether the stream may end where it is: an end of the connection
    /// inside a frame or a fragmented message loses bytes.
    pub fn finish(&self) -> io::Result<()> {
        if self.have > 0 || self.frame.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "websocket: the connection ended inside a frame",
            ));
        }
        if self.fragmented {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "websocket: the connection ended inside a fragmented message",
            ));
        }
        Ok(())
    }

    /// How long the header being read is, as far as its bytes so far say.
    fn header_wanted(&self) -> usize {
        if self.have < 2 {
            return 2;
        }
        let extended = match self.head[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        2 + extended + if self.head[1] & 0x80 != 0 { 4 } else { 0 }
    }

    /// Takes header bytes from `input`; once the header is whole, starts
    /// its frame. Returns how many bytes it took.
    fn read_header(&mut self, input: &[u8]) -> io::Result<usize> {
        let mut used = 0;
        loop {
            let wanted = self.header_wanted();
            if self.have == wanted {
                break;
            }
            let take = (wanted - self.have).min(input.len() - used);
            if take == 0 {
                return Ok(used);
            }
            self.head[self.have..self.have + take].copy_from_slice(&input[used..used + take]);
            self.have += take;
            used += take;
            if self.have == 2 {
                self.check_first_bytes()?;
            }
        }
        self.start_frame()?;
        Ok(used)
    }

    /// Refuses a frame by its first two bytes, before its length is read.
    fn check_first_bytes(&self) -> io::Result<()> {
        let [b0, b1] = [self.head[0], self.head[1]];
        if b0 & 0x70 != 0 {
            return Err(invalid("websocket: a frame with reserved bits set"));
        }
        let opcode = Opcode::from_bits(b0 & 0x0f)
            .ok_or_else(|| invalid("websocket: a frame with a reserved opcode"))?;
        match (self.role, b1 & 0x80 != 0) {
            (Role::Server, false) => {
                return Err(invalid("websocket: an unmasked frame from the client"))
            }
            (Role::Client, true) => {
                return Err(invalid("websocket: a masked frame from the server"))
            }
            _ => {}
        }
        if opcode.is_control() {
            if b0 & 0x80 == 0 {
                return Err(invalid("websocket: a fragmented control frame"));
            }
            if usize::from(b1 & 0x7f) > MAX_CONTROL {
                return Err(invalid("websocket: a control frame longer than 125 bytes"));
            }
        } else {
            match (opcode, self.fragmented) {
                (Opcode::Continuation, false) => {
                    return Err(invalid(
                        "websocket: a continuation frame outside a fragmented message",
                    ))
                }
                (Opcode::Text | Opcode::Binary, true) => {
                    return Err(invalid(
                        "websocket: a new message inside a fragmented message",
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Starts the frame of the whole header read (checked by
    /// [`Decoder::check_first_bytes`]).
    fn start_frame(&mut self) -> io::Result<()> {
        let head = self.head;
        self.have = 0;
        let fin = head[0] & 0x80 != 0;
        let opcode = Opcode::from_bits(head[0] & 0x0f)
            .ok_or_else(|| invalid("websocket: a frame with a reserved opcode"))?;
        let (len, at) = match head[1] & 0x7f {
            126 => (u64::from(u16::from_be_bytes([head[2], head[3]])), 4),
            127 => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&head[2..10]);
                (u64::from_be_bytes(bytes), 10)
            }
            short => (u64::from(short), 2),
        };
        if len >> 63 != 0 {
            return Err(invalid(
                "websocket: a frame length with its most significant bit set",
            ));
        }
        let key =
            (head[1] & 0x80 != 0).then(|| [head[at], head[at + 1], head[at + 2], head[at + 3]]);
        if opcode.is_control() {
            // At most 125 bytes, as checked.
            self.control = Vec::with_capacity(len as usize);
        } else {
            if len > self.max_frame {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "websocket: a frame of {len} bytes, over the limit of {}",
                        self.max_frame
                    ),
                ));
            }
            self.fragmented = !fin;
        }
        if len == 0 {
            return self.end_frame(opcode);
        }
        self.frame = Some(Frame {
            opcode,
            remaining: len,
            key,
            phase: 0,
        });
        Ok(())
    }

    /// Acts on a frame whose payload was all read.
    fn end_frame(&mut self, opcode: Opcode) -> io::Result<()> {
        let payload = std::mem::take(&mut self.control);
        match opcode {
            Opcode::Ping => self.ping = Some(payload),
            Opcode::Close => {
                let code = match payload[..] {
                    [] => None,
                    [_] => return Err(invalid("websocket: a close frame of one byte")),
                    [hi, lo, ..] => Some(u16::from_be_bytes([hi, lo])),
                };
                self.close = Some(Close { code });
            }
            Opcode::Pong | Opcode::Continuation | Opcode::Text | Opcode::Binary => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a peer in `role` sends it, masked with `key` if given.
    fn frame(fin: bool, opcode: Opcode, payload: &[u8], key: Option<[u8; 4]>) -> Vec<u8> {
        let mut out = vec![0; MAX_HEADER + payload.len()];
        let at = encode_header(&mut out, fin, opcode, payload.len(), key);
        out.truncate(at + payload.len());
        out[at..].copy_from_slice(payload);
        if let Some(key) = key {
            apply_mask(&mut out[at..], key, 0);
        }
        out
    }

    const KEY: Option<[u8; 4]> = Some([0x37, 0xfa, 0x21, 0x3d]);

    /// Decodes `input` in one buffer, and again split at every point into
    /// two reads, and at every byte: the payload is the same each way.
    fn decode_every_way(role: Role, input: &[u8]) -> (Vec<u8>, Decoder) {
        let whole = {
            let mut d = Decoder::new(role, 1 << 20);
            let mut buf = input.to_vec();
            let n = d.decode(&mut buf).unwrap();
            buf.truncate(n);
            (buf, d)
        };
        for cut in 0..=input.len() {
            let mut d = Decoder::new(role, 1 << 20);
            let mut got = Vec::new();
            for part in [&input[..cut], &input[cut..]] {
                let mut buf = part.to_vec();
                let n = d.decode(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, whole.0, "split at {cut}");
        }
        let mut d = Decoder::new(role, 1 << 20);
        let mut got = Vec::new();
        for byte in input {
            let mut buf = [*byte];
            let n = d.decode(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, whole.0, "byte by byte");
        whole
    }

    #[test]
    fn the_rfc_examples_decode_to_their_payload() {
        // RFC 6455 section 5.7.
        let unmasked = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        assert_eq!(decode_every_way(Role::Client, &unmasked).0, b"Hello");
        let masked = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        assert_eq!(decode_every_way(Role::Server, &masked).0, b"Hello");
        assert_eq!(frame(true, Opcode::Text, b"Hello", KEY), masked);
        let fragmented = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
        assert_eq!(decode_every_way(Role::Client, &fragmented).0, b"Hello");
        let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let (payload, mut d) = decode_every_way(Role::Client, &ping);
        assert!(payload.is_empty());
        assert_eq!(d.take_ping().as_deref(), Some(&b"Hello"[..]));
        assert_eq!(d.take_ping(), None, "a ping is answered once");
    }

    #[test]
    fn every_length_form_round_trips_masked_and_unmasked() {
        for len in [0, 1, 125, 126, 127, 0xffff, 0x10000, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            for (role, key) in [(Role::Client, None), (Role::Server, KEY)] {
                let bytes = frame(true, Opcode::Binary, &payload, key);
                assert_eq!(
                    bytes.len(),
                    header_len(len, key.is_some()) + len,
                    "{len} {role:?}"
                );
                let mut d = Decoder::new(role, 1 << 20);
                let mut buf = bytes.clone();
                let n = d.decode(&mut buf).unwrap();
                assert_eq!(&buf[..n], &payload[..], "{len} {role:?}");
                d.finish().unwrap();
            }
        }
        // The RFC's 256-byte and 64 KiB headers.
        assert_eq!(
            frame(true, Opcode::Binary, &[0; 256], None)[..4],
            [0x82, 0x7e, 0x01, 0x00]
        );
        assert_eq!(
            frame(true, Opcode::Binary, &vec![0; 65536], None)[..10],
            [0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]
        );
    }

    #[test]
    fn masking_is_the_rfcs_xor_byte_by_byte_at_every_length_and_phase() {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        let data: Vec<u8> = (0..300u32).map(|i| (i * 13 % 256) as u8).collect();
        for len in 0..data.len() {
            for phase in 0..8 {
                let mut masked = data[..len].to_vec();
                apply_mask(&mut masked, key, phase);
                let expected: Vec<u8> = (0..len).map(|i| data[i] ^ key[(phase + i) % 4]).collect();
                assert_eq!(masked, expected, "{len} bytes from phase {phase}");
            }
        }
    }

    #[test]
    fn masking_in_pieces_is_masking_the_whole() {
        let data: Vec<u8> = (0..100u8).collect();
        let key = [1, 2, 3, 4];
        let mut whole = data.clone();
        apply_mask(&mut whole, key, 0);
        for cut in 0..data.len() {
            let mut pieces = data.clone();
            let (a, b) = pieces.split_at_mut(cut);
            apply_mask(a, key, 0);
            apply_mask(b, key, cut);
            assert_eq!(pieces, whole, "cut at {cut}");
        }
        apply_mask(&mut whole, key, 0);
        assert_eq!(whole, data, "masking twice is the identity");
    }

    #[test]
    fn control_frames_between_fragments_are_taken_out() {
        let mut input = frame(false, Opcode::Binary, b"frag one, ", KEY);
        input.extend(frame(true, Opcode::Ping, b"are you there", KEY));
        input.extend(frame(false, Opcode::Continuation, b"frag two, ", KEY));
        input.extend(frame(true, Opcode::Pong, b"unasked", KEY));
        input.extend(frame(true, Opcode::Continuation, b"the end", KEY));
        input.extend(frame(true, Opcode::Text, b"; text is bytes", KEY));
        let (payload, mut d) = decode_every_way(Role::Server, &input);
        assert_eq!(payload, b"frag one, frag two, the end; text is bytes");
        assert_eq!(d.take_ping().as_deref(), Some(&b"are you there"[..]));
        d.finish().unwrap();
    }

    #[test]
    fn the_close_frame_ends_the_stream_and_what_follows_is_dropped() {
        let mut input = frame(true, Opcode::Binary, b"last words", None);
        input.extend(frame(true, Opcode::Close, &1000u16.to_be_bytes(), None));
        input.extend(frame(true, Opcode::Binary, b"after the close", None));
        let (payload, d) = decode_every_way(Role::Client, &input);
        assert_eq!(payload, b"last words");
        assert_eq!(d.close(), Some(Close { code: Some(1000) }));
        let (_, d) = decode_every_way(Role::Client, &frame(true, Opcode::Close, b"", None));
        assert_eq!(d.close(), Some(Close { code: None }));
        let e = Decoder::new(Role::Client, 100)
            .decode(&mut frame(true, Opcode::Close, b"x", None))
            .unwrap_err();
        assert_eq!(e.to_string(), "websocket: a close frame of one byte");
    }

    /// The error decoding `input` as `role` ends with.
    fn refused(role: Role, input: &[u8]) -> String {
        let e = Decoder::new(role, 1000)
            .decode(&mut input.to_vec())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        e.to_string()
    }

    #[test]
    fn protocol_violations_fail_with_their_reason() {
        let long_ping = [&[0x89u8, 0x7e, 0x00, 0x7e][..], &[0; 126]].concat();
        let mut big = frame(true, Opcode::Binary, &[0; 1001], None);
        let mut msb = vec![0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0];
        for (role, input, text) in [
            (
                Role::Client,
                &mut big[..],
                "websocket: a frame of 1001 bytes, over the limit of 1000",
            ),
            (
                Role::Client,
                &mut long_ping.clone()[..],
                "websocket: a control frame longer than 125 bytes",
            ),
            (
                Role::Client,
                &mut [0x09, 0x00][..],
                "websocket: a fragmented control frame",
            ),
            (
                Role::Client,
                &mut [0x80, 0x00][..],
                "websocket: a continuation frame outside a fragmented message",
            ),
            (
                Role::Client,
                &mut [0x02, 0x01, 0x61, 0x82, 0x00][..],
                "websocket: a new message inside a fragmented message",
            ),
            (
                Role::Server,
                &mut [0x82, 0x00][..],
                "websocket: an unmasked frame from the client",
            ),
            (
                Role::Client,
                &mut [0x82, 0x80, 1, 2, 3, 4][..],
                "websocket: a masked frame from the server",
            ),
            (
                Role::Client,
                &mut [0xc2, 0x00][..],
                "websocket: a frame with reserved bits set",
            ),
            (
                Role::Client,
                &mut [0x83, 0x00][..],
                "websocket: a frame with a reserved opcode",
            ),
            (
                Role::Client,
                &mut msb[..],
                "websocket: a frame length with its most significant bit set",
            ),
        ] {
            assert_eq!(refused(role, input), text);
        }
    }

    #[test]
    fn a_stream_ending_inside_a_frame_or_message_is_truncated() {
        let whole = frame(true, Opcode::Binary, &[7; 300], None);
        for cut in 1..whole.len() {
            let mut d = Decoder::new(Role::Client, 1000);
            d.decode(&mut whole[..cut].to_vec()).unwrap();
            let e = d.finish().unwrap_err();
            assert_eq!(
                (e.kind(), e.to_string()),
                (
                    io::ErrorKind::UnexpectedEof,
                    "websocket: the connection ended inside a frame".into()
                ),
                "cut at {cut}"
            );
        }
        let mut d = Decoder::new(Role::Client, 1000);
        d.decode(&mut frame(false, Opcode::Binary, b"half", None))
            .unwrap();
        assert_eq!(
            d.finish().unwrap_err().to_string(),
            "websocket: the connection ended inside a fragmented message"
        );
        Decoder::new(Role::Client, 1000).finish().unwrap();
    }

    #[test]
    fn control_frames_encode_masked_and_unmasked() {
        let pong = encode_control(Opcode::Pong, b"Hello", KEY);
        let mut d = Decoder::new(Role::Server, 10);
        assert_eq!(d.decode(&mut pong.clone()).unwrap(), 0);
        assert_eq!(pong[..2], [0x8a, 0x85]);
        let close = encode_control(Opcode::Close, &1000u16.to_be_bytes(), None);
        assert_eq!(close, [0x88, 0x02, 0x03, 0xe8]);
    }

    #[test]
    fn masks_differ_from_frame_to_frame_and_seed_to_seed() {
        let mut a = Masks::new([1; 8]);
        let mut b = Masks::new([2; 8]);
        let keys: Vec<[u8; 4]> = (0..64).map(|_| a.next_key()).collect();
        assert!(keys.windows(2).all(|w| w[0] != w[1]));
        assert_ne!(keys[0], b.next_key());
    }
}
