//! gRPC "gun" framing, as v2ray, Xray and sing-box speak it under a proxy
//! client: every chunk of the tunnelled stream is one gRPC message (the
//! 5-byte prefix: a compression flag of 0 and the length as a big-endian
//! u32) whose body is the protobuf `Hunk { bytes data = 1; }`, so the tag
//! 0x0A, the varint length and the bytes.
//!
//! Xray's multi mode, the call `TunMulti`, carries `MultiHunk { repeated
//! bytes data = 1; }` instead: the same field, any number of times in one
//! message, each a buffer of the stream (Xray's writer puts one field per
//! buffer of a write, its older one an empty field per buffer first). A
//! `MultiHunk` with one field is the same bytes as a `Hunk`, so the writer
//! is the same for both; only the reader differs ([`Message`]).
//!
//! [`encode_header`] writes the header of one message into a buffer the
//! caller owns; [`Decoder`] takes bytes as they arrive, split anywhere, and
//! says where the payload bytes are.

use std::io;
use std::ops::Range;

/// The longest header: the gRPC prefix, the tag and a 5-byte varint.
pub const HEADER_MAX: usize = 5 + 1 + 5;

/// The protobuf key of `Hunk.data` and `MultiHunk.data`: field 1, wire
/// type 2 (length-delimited).
const HUNK_DATA_TAG: u8 = 0x0A;

/// The message a call carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Message {
    /// `Hunk`, on `Tun`: one data field, filling the message.
    #[default]
    Hunk,
    /// `MultiHunk`, on `TunMulti`: data fields one after another, empty
    /// ones among them, filling the message.
    MultiHunk,
}

/// The bytes of `len` as a varint.
fn varint_len(len: u32) -> usize {
    match len {
        0..=0x7F => 1,
        0x80..=0x3FFF => 2,
        0x4000..=0x1F_FFFF => 3,
        0x20_0000..=0xFFF_FFFF => 4,
        _ => 5,
    }
}

/// The header's length for a payload of `len` bytes.
pub fn header_len(len: usize) -> usize {
    5 + 1 + varint_len(u32::try_from(len).unwrap_or(u32::MAX))
}

/// Writes the header of one message carrying `len` payload bytes into
/// `out` and returns how many bytes it wrote. A payload whose message
/// would not fit the prefix's u32 is refused.
pub fn encode_header(len: usize, out: &mut [u8; HEADER_MAX]) -> io::Result<usize> {
    let too_long = || io::Error::new(io::ErrorKind::InvalidInput, "gun message too long");
    let data = u32::try_from(len).map_err(|_| too_long())?;
    let body = u32::try_from(1 + varint_len(data))
        .ok()
        .and_then(|head| head.checked_add(data))
        .ok_or_else(too_long)?;
    out[0] = 0;
    out[1..5].copy_from_slice(&body.to_be_bytes());
    out[5] = HUNK_DATA_TAG;
    let mut at = 6;
    let mut rest = data;
    while rest >= 0x80 {
        out[at] = (rest as u8 & 0x7F) | 0x80;
        rest >>= 7;
        at += 1;
    }
    out[at] = rest as u8;
    Ok(at + 1)
}

/// What the bytes given to [`Decoder::decode`] held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// All of them were header bytes; a message needs more.
    NeedMore,
    /// This range of the input is payload.
    Payload(Range<usize>),
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Reading the 5-byte prefix; `have` of it so far.
    Prefix { have: u8 },
    /// Expecting the tag of a data field; `body` bytes of the message left.
    Tag { body: u32 },
    /// Reading the varint length; `body` bytes of the message left after it.
    Length { body: u32, value: u32, shift: u8 },
    /// `left` payload bytes of the current field still to come, then
    /// `after` bytes of the message (further fields of a `MultiHunk`).
    Payload { left: u32, after: u32 },
}

/// Reads gun messages from bytes split anywhere, with no buffer of its own.
#[derive(Debug)]
pub struct Decoder {
    message: Message,
    state: State,
    prefix: [u8; 5],
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(Message::Hunk)
    }
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// What follows a field with `after` bytes of its message behind it.
fn next_field(after: u32) -> State {
    match after {
        0 => State::Prefix { have: 0 },
        body => State::Tag { body },
    }
}

impl Decoder {
    /// A decoder of `message`s.
    pub fn new(message: Message) -> Self {
        Decoder {
            message,
            state: State::Prefix { have: 0 },
            prefix: [0; 5],
        }
    }

    /// True between messages: a stream may end here.
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Prefix { have: 0 })
    }

    /// Takes bytes from the front of `input`, at most `room` of them payload,
    /// and returns how many it used and what they were.
    pub fn decode(&mut self, input: &[u8], room: usize) -> io::Result<(usize, Step)> {
        let mut at = 0;
        while at < input.len() {
            match self.state {
                State::Payload { left, after } => {
                    let take = input.len() - at;
                    let take = take.min(room).min(left as usize);
                    if take == 0 {
                        break;
                    }
                    self.state = match left as usize - take {
                        0 => next_field(after),
                        rest => State::Payload {
                            left: rest as u32,
                            after,
                        },
                    };
                    return Ok((at + take, Step::Payload(at..at + take)));
                }
                State::Prefix { have } => {
                    self.prefix[usize::from(have)] = input[at];
                    at += 1;
                    if have < 4 {
                        self.state = State::Prefix { have: have + 1 };
                        continue;
                    }
                    if self.prefix[0] != 0 {
                        return Err(invalid("gun message is compressed"));
                    }
                    let body = u32::from_be_bytes([
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ]);
                    self.state = match body {
                        // An empty Hunk: a message with no payload.
                        0 => State::Prefix { have: 0 },
                        body => State::Tag { body },
                    };
                }
                State::Tag { body } => {
                    if input[at] != HUNK_DATA_TAG {
                        return Err(invalid("gun message is not a hunk"));
                    }
                    at += 1;
                    self.state = State::Length {
                        body: body - 1,
                        value: 0,
                        shift: 0,
                    };
                }
                State::Length { body, value, shift } => {
                    let byte = input[at];
                    at += 1;
                    if body == 0 || shift > 28 || (shift == 28 && byte > 0x0F) {
                        return Err(invalid("gun hunk length is malformed"));
                    }
                    let value = value | u32::from(byte & 0x7F) << shift;
                    let body = body - 1;
                    if byte & 0x80 != 0 {
                        self.state = State::Length {
                            body,
                            value,
                            shift: shift + 7,
                        };
                        continue;
                    }
                    let fits = match self.message {
                        Message::Hunk => value == body,
                        Message::MultiHunk => value <= body,
                    };
                    if !fits {
                        return Err(invalid("gun hunk length does not match its message"));
                    }
                    let after = body - value;
                    self.state = match value {
                        0 => next_field(after),
                        left => State::Payload { left, after },
                    };
                }
            }
        }
        Ok((at, Step::NeedMore))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut head = [0u8; HEADER_MAX];
        let n = encode_header(payload.len(), &mut head).unwrap();
        assert_eq!(n, header_len(payload.len()));
        let mut out = head[..n].to_vec();
        out.extend_from_slice(payload);
        out
    }

    /// Feeds `wire` in the given pieces with `room` payload bytes a call and
    /// returns the payload read.
    fn read(wire: &[u8], cuts: &[usize], room: usize) -> io::Result<Vec<u8>> {
        read_as(Message::Hunk, wire, cuts, room)
    }

    fn read_as(message: Message, wire: &[u8], cuts: &[usize], room: usize) -> io::Result<Vec<u8>> {
        let mut decoder = Decoder::new(message);
        let mut out = Vec::new();
        let mut start = 0;
        for end in cuts.iter().copied().chain([wire.len()]) {
            let mut piece = &wire[start..end];
            while !piece.is_empty() {
                let (used, step) = decoder.decode(piece, room)?;
                if let Step::Payload(range) = step {
                    assert!(range.len() <= room);
                    out.extend_from_slice(&piece[range]);
                }
                piece = &piece[used..];
            }
            start = end;
        }
        assert!(decoder.at_boundary(), "ends between messages");
        Ok(out)
    }

    #[test]
    fn header_is_the_grpc_prefix_then_the_hunk_tag_and_length() {
        let mut head = [0u8; HEADER_MAX];
        assert_eq!(encode_header(3, &mut head).unwrap(), 7);
        assert_eq!(&head[..7], &[0, 0, 0, 0, 5, 0x0A, 3]);
        assert_eq!(encode_header(300, &mut head).unwrap(), 8);
        assert_eq!(&head[..8], &[0, 0, 0, 0x01, 0x2F, 0x0A, 0xAC, 0x02]);
    }

    #[test]
    fn varint_lengths_at_their_boundaries_round_trip() {
        for len in [0usize, 1, 127, 128, 16383, 16384, 70000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let wire = message(&payload);
            let expected = match len {
                0..=127 => 1,
                128..=16383 => 2,
                _ => 3,
            };
            assert_eq!(wire.len(), 6 + expected + len, "len {len}");
            assert_eq!(read(&wire, &[], usize::MAX).unwrap(), payload, "len {len}");
        }
        let mut head = [0u8; HEADER_MAX];
        assert_eq!(encode_header(0x0FFF_FFFF, &mut head).unwrap(), 10);
        assert_eq!(encode_header(0x1000_0000, &mut head).unwrap(), 11);
    }

    #[test]
    fn a_message_split_at_every_byte_decodes_the_same() {
        let mut wire = message(b"hello gun");
        wire.extend(message(&[7u8; 200]));
        let mut expected = b"hello gun".to_vec();
        expected.extend([7u8; 200]);
        for cut in 0..=wire.len() {
            assert_eq!(
                read(&wire, &[cut], usize::MAX).unwrap(),
                expected,
                "cut {cut}"
            );
        }
        let every: Vec<usize> = (1..wire.len()).collect();
        assert_eq!(read(&wire, &every, 1).unwrap(), expected);
        assert_eq!(read(&wire, &[], 3).unwrap(), expected);
    }

    #[test]
    fn an_empty_message_and_an_empty_hunk_carry_nothing() {
        let wire = [0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x0A, 0];
        assert_eq!(read(&wire, &[], usize::MAX).unwrap(), b"");
    }

    #[test]
    fn a_bad_tag_is_refused() {
        let wire = [0, 0, 0, 0, 3, 0x12, 1, b'x'];
        let err = read(&wire, &[], usize::MAX).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(err.to_string(), "gun message is not a hunk");
    }

    #[test]
    fn a_compressed_message_is_refused() {
        let err = read(&[1, 0, 0, 0, 3, 0x0A, 1, b'x'], &[], 8).unwrap_err();
        assert_eq!(err.to_string(), "gun message is compressed");
    }

    #[test]
    fn a_length_that_disagrees_with_the_prefix_is_refused() {
        let err = read(&[0, 0, 0, 0, 3, 0x0A, 2, b'x'], &[], 8).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gun hunk length does not match its message"
        );
        // A varint running past the message or past 32 bits.
        let err = read(&[0, 0, 0, 0, 2, 0x0A, 0x80, 0x01], &[], 8).unwrap_err();
        assert_eq!(err.to_string(), "gun hunk length is malformed");
        let wire = [0, 0, 0, 0, 9, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0];
        let err = read(&wire, &[], 8).unwrap_err();
        assert_eq!(err.to_string(), "gun hunk length is malformed");
    }

    #[test]
    fn room_zero_takes_no_payload() {
        let wire = message(b"ab");
        let mut decoder = Decoder::default();
        assert_eq!(decoder.decode(&wire, 0).unwrap(), (7, Step::NeedMore));
        assert_eq!(decoder.decode(&wire[7..], 0).unwrap(), (0, Step::NeedMore));
        assert_eq!(
            decoder.decode(&wire[7..], 5).unwrap(),
            (2, Step::Payload(0..2))
        );
    }

    /// A `MultiHunk` built by hand: the gRPC prefix, then each field as its
    /// tag, a one-byte length and its bytes.
    fn multi_hunk(fields: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for field in fields {
            assert!(field.len() < 0x80);
            body.push(0x0A);
            body.push(field.len() as u8);
            body.extend_from_slice(field);
        }
        let mut wire = vec![0];
        wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
        wire.extend(body);
        wire
    }

    #[test]
    fn a_multi_hunk_yields_its_fields_in_order_split_anywhere() {
        // Two messages: three fields, then Xray's older writer's shape, an
        // empty field per buffer before the buffers.
        let mut wire = multi_hunk(&[b"first ", b"second ", b"third "]);
        wire.extend(multi_hunk(&[b"", b"", b"fourth ", b"fifth"]));
        let expected = b"first second third fourth fifth";
        for cut in 0..=wire.len() {
            let back = read_as(Message::MultiHunk, &wire, &[cut], usize::MAX).unwrap();
            assert_eq!(back, expected, "cut {cut}");
        }
        let every: Vec<usize> = (1..wire.len()).collect();
        let back = read_as(Message::MultiHunk, &wire, &every, 1).unwrap();
        assert_eq!(back, expected);
        let back = read_as(Message::MultiHunk, &wire, &[], 4).unwrap();
        assert_eq!(back, expected);
    }

    #[test]
    fn a_multi_hunk_payload_never_spans_two_fields() {
        let wire = multi_hunk(&[b"ab", b"cd"]);
        let mut decoder = Decoder::new(Message::MultiHunk);
        // The prefix, the first tag and length, then only that field.
        assert_eq!(
            decoder.decode(&wire, usize::MAX).unwrap(),
            (9, Step::Payload(7..9))
        );
        assert!(!decoder.at_boundary(), "a field of the message is left");
        assert_eq!(
            decoder.decode(&wire[9..], usize::MAX).unwrap(),
            (4, Step::Payload(2..4))
        );
        assert!(decoder.at_boundary());
    }

    #[test]
    fn one_field_is_the_same_bytes_for_both_messages() {
        let wire = message(&[3u8; 300]);
        let back = read_as(Message::MultiHunk, &wire, &[], usize::MAX).unwrap();
        assert_eq!(back, [3u8; 300]);
        let empty = [0, 0, 0, 0, 0];
        assert_eq!(read_as(Message::MultiHunk, &empty, &[], 8).unwrap(), b"");
    }

    #[test]
    fn a_hunk_of_several_fields_is_refused_on_tun() {
        let err = read(&multi_hunk(&[b"a", b"b"]), &[], 8).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gun hunk length does not match its message"
        );
    }

    #[test]
    fn a_multi_hunk_field_past_its_message_or_another_field_is_refused() {
        // The second field says 5 bytes where the message has 1 left.
        let wire = [0, 0, 0, 0, 6, 0x0A, 1, b'a', 0x0A, 5, b'b'];
        let err = read_as(Message::MultiHunk, &wire, &[], 8).unwrap_err();
        assert_eq!(
            err.to_string(),
            "gun hunk length does not match its message"
        );
        // A tag with no room left in the message for its length.
        let wire = [0, 0, 0, 0, 4, 0x0A, 1, b'a', 0x0A, 1];
        let err = read_as(Message::MultiHunk, &wire, &[], 8).unwrap_err();
        assert_eq!(err.to_string(), "gun hunk length is malformed");
        // Field 2 is no field of a MultiHunk.
        let wire = [0, 0, 0, 0, 6, 0x0A, 1, b'a', 0x12, 1, b'b'];
        let err = read_as(Message::MultiHunk, &wire, &[], 8).unwrap_err();
        assert_eq!(err.to_string(), "gun message is not a hunk");
    }
}
