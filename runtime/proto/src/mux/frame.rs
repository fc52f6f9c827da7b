//! One Mux.Cool frame: decoding what a client sends, encoding the keep and
//! end frames a server answers with.

use std::io;
use std::ops::Range;

use crate::vless::{read_port_address, write_port_address};
use crate::Address;

/// The longest metadata a frame may carry, as Xray bounds it.
pub const META_MAX: usize = 512;

const STATUS_NEW: u8 = 1;
const STATUS_KEEP: u8 = 2;
const STATUS_END: u8 = 3;
const STATUS_KEEP_ALIVE: u8 = 4;

const OPTION_DATA: u8 = 1;
const OPTION_ERROR: u8 = 2;

const NETWORK_TCP: u8 = 1;
const NETWORK_UDP: u8 = 2;

/// The bytes of an end frame.
pub const END_LEN: usize = 6;

/// The most bytes a keep frame puts in front of its data: the lengths,
/// the session, status and option, the network and the longest address.
pub const KEEP_HEADER_MAX: usize = 2 + 4 + 1 + 2 + 1 + 1 + 255 + 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    Tcp,
    Udp,
}

/// What a frame says of its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The session opens, to `target` over `network`.
    New {
        network: Network,
        target: Address,
    },
    /// More of the session; a UDP packet's own address when it names one.
    Keep {
        address: Option<Address>,
    },
    /// The session ends; with the error bit, abruptly.
    End {
        error: bool,
    },
    KeepAlive,
}

/// One whole frame at the start of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub session: u16,
    pub status: Status,
    /// Where the frame's data lies in the input, if it carries any.
    pub data: Option<Range<usize>>,
    /// The bytes the frame took.
    pub consumed: usize,
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Decodes the frame at the start of `buf`; `Ok(None)` until it is whole.
/// Metadata too long or too short, an unknown status or network, or a bad
/// target fail the stream, as they do Xray's.
pub fn decode(buf: &[u8]) -> io::Result<Option<Decoded>> {
    let Some(len) = buf.first_chunk::<2>() else {
        return Ok(None);
    };
    let meta_len = usize::from(u16::from_be_bytes(*len));
    if meta_len > META_MAX {
        return Err(invalid("mux: frame metadata longer than 512 bytes"));
    }
    if meta_len < 4 {
        return Err(invalid("mux: frame metadata shorter than 4 bytes"));
    }
    let Some(meta) = buf.get(2..2 + meta_len) else {
        return Ok(None);
    };
    let session = u16::from_be_bytes([meta[0], meta[1]]);
    let option = meta[3];
    let status = match meta[2] {
        STATUS_NEW => {
            let network = match meta.get(4) {
                Some(&NETWORK_TCP) => Network::Tcp,
                Some(&NETWORK_UDP) => Network::Udp,
                _ => return Err(invalid("mux: unknown network in a new frame")),
            };
            // Whatever follows the target (XUDP's global id) is read past.
            match read_port_address(&meta[5..]) {
                Ok(Some((target, _))) => Status::New { network, target },
                _ => return Err(invalid("mux: bad target in a new frame")),
            }
        }
        STATUS_KEEP => match meta.get(4) {
            Some(&NETWORK_UDP) => match read_port_address(&meta[5..]) {
                Ok(Some((address, _))) => Status::Keep {
                    address: Some(address),
                },
                _ => return Err(invalid("mux: bad address in a keep frame")),
            },
            _ => Status::Keep { address: None },
        },
        STATUS_END => Status::End {
            error: option & OPTION_ERROR != 0,
        },
        STATUS_KEEP_ALIVE => Status::KeepAlive,
        _ => return Err(invalid("mux: unknown frame status")),
    };
    let mut consumed = 2 + meta_len;
    let data = if option & OPTION_DATA != 0 {
        let Some(len) = buf.get(consumed..consumed + 2) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        let start = consumed + 2;
        if buf.len() < start + len {
            return Ok(None);
        }
        consumed = start + len;
        Some(start..start + len)
    } else {
        None
    };
    Ok(Some(Decoded {
        session,
        status,
        data,
        consumed,
    }))
}

/// Appends the head of a keep frame of `session` carrying a UDP packet of
/// `len` bytes from `source`: the metadata, with the source, and the data
/// length. `len` must fit a u16.
pub fn keep_header(session: u16, source: &Address, len: u16, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&session.to_be_bytes());
    out.extend_from_slice(&[STATUS_KEEP, OPTION_DATA, NETWORK_UDP]);
    write_port_address(source, out);
    // At most 4 + 1 + 2 + 1 + 1 + 255 bytes: it fits.
    let meta_len = (out.len() - start - 2) as u16;
    out[start..start + 2].copy_from_slice(&meta_len.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// The bytes in front of a keep frame's data that name no address: the
/// lengths, the session, status and option.
pub const DATA_HEADER_LEN: usize = 8;

/// The head of a keep frame of TCP session `session` carrying `len` bytes.
pub fn data_header(session: u16, len: u16) -> [u8; DATA_HEADER_LEN] {
    let [high, low] = session.to_be_bytes();
    let [len_high, len_low] = len.to_be_bytes();
    [0, 4, high, low, STATUS_KEEP, OPTION_DATA, len_high, len_low]
}

/// The end frame of `session`, with the error bit when it was refused.
pub fn end(session: u16, error: bool) -> [u8; END_LEN] {
    let [high, low] = session.to_be_bytes();
    let option = if error { OPTION_ERROR } else { 0 };
    [0, 4, high, low, STATUS_END, option]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A frame as a client writes it: `meta` after the session id, then
    /// `data` behind its length when given.
    pub fn frame(session: u16, meta: &[u8], data: Option<&[u8]>) -> Vec<u8> {
        let len = (2 + meta.len()) as u16;
        let mut out = len.to_be_bytes().to_vec();
        out.extend_from_slice(&session.to_be_bytes());
        out.extend_from_slice(meta);
        if let Some(data) = data {
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            out.extend_from_slice(data);
        }
        out
    }

    #[test]
    fn a_new_udp_frame_with_a_global_id_and_data_decodes_only_once_whole() {
        // New, data, UDP, port 53, IPv4 192.0.2.1, then an 8-byte global id.
        let meta = b"\x01\x01\x02\x00\x35\x01\xc0\x00\x02\x01GLOBALID";
        let wire = frame(0, meta, Some(b"query"));
        for cut in 0..wire.len() {
            assert_eq!(decode(&wire[..cut]).unwrap(), None, "cut at {cut}");
        }
        let decoded = decode(&wire).unwrap().unwrap();
        assert_eq!(
            decoded,
            Decoded {
                session: 0,
                status: Status::New {
                    network: Network::Udp,
                    target: Address::Ip("192.0.2.1:53".parse().unwrap()),
                },
                data: Some(wire.len() - 5..wire.len()),
                consumed: wire.len(),
            }
        );
    }

    #[test]
    fn keep_frames_name_their_address_or_none_and_control_frames_carry_nothing() {
        let named = frame(7, b"\x02\x01\x02\x01\xbb\x02\x0bexample.com", Some(b"x"));
        let status = decode(&named).unwrap().unwrap().status;
        assert_eq!(
            status,
            Status::Keep {
                address: Some(Address::Domain("example.com".into(), 443))
            }
        );
        let bare = frame(7, b"\x02\x01", Some(b""));
        let decoded = decode(&bare).unwrap().unwrap();
        assert_eq!(decoded.status, Status::Keep { address: None });
        assert_eq!(decoded.data, Some(8..8));
        for (meta, status) in [
            (&b"\x03\x00"[..], Status::End { error: false }),
            (b"\x03\x02", Status::End { error: true }),
            (b"\x04\x00", Status::KeepAlive),
        ] {
            let wire = frame(9, meta, None);
            let decoded = decode(&wire).unwrap().unwrap();
            assert_eq!((decoded.status, decoded.data), (status, None));
            assert_eq!(decoded.consumed, wire.len());
        }
    }

    #[test]
    fn bad_metadata_fails_the_stream_with_what_is_wrong() {
        let mut long = frame(1, &[0u8; 511], None);
        long[..2].copy_from_slice(&513u16.to_be_bytes());
        let cases: [(Vec<u8>, &str); 6] = [
            (long, "mux: frame metadata longer than 512 bytes"),
            (
                b"\x00\x03\x00\x01\x01".to_vec(),
                "mux: frame metadata shorter than 4 bytes",
            ),
            (frame(1, b"\x09\x00", None), "mux: unknown frame status"),
            (
                frame(1, b"\x01\x00\x03\x00\x35\x01\x7f\0\0\x01", None),
                "mux: unknown network in a new frame",
            ),
            (
                frame(1, b"\x01\x00\x02\x00\x35\x07\x7f\0\0\x01", None),
                "mux: bad target in a new frame",
            ),
            (
                frame(1, b"\x02\x01\x02\x00\x35\x01\x7f", Some(b"x")),
                "mux: bad address in a keep frame",
            ),
        ];
        for (wire, text) in cases {
            let e = decode(&wire).unwrap_err();
            assert_eq!(
                (e.kind(), e.to_string()),
                (io::ErrorKind::InvalidData, text.into())
            );
        }
        // The longest metadata allowed is taken.
        let mut longest = frame(1, &[0u8; 510], None);
        longest[4] = STATUS_KEEP_ALIVE;
        assert_eq!(decode(&longest).unwrap().unwrap().consumed, 514);
    }

    #[test]
    fn a_keep_header_decodes_back_to_its_session_and_source() {
        for source in [
            Address::Ip("192.0.2.1:53".parse().unwrap()),
            Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
            Address::Domain(
                format!("{0}.{0}.{0}.{1}", "a".repeat(63), "a".repeat(61)),
                1,
            ),
        ] {
            let mut wire = Vec::new();
            keep_header(300, &source, 3, &mut wire);
            assert!(wire.len() <= KEEP_HEADER_MAX);
            wire.extend_from_slice(b"abc");
            let decoded = decode(&wire).unwrap().unwrap();
            assert_eq!(decoded.session, 300);
            assert_eq!(
                decoded.status,
                Status::Keep {
                    address: Some(source)
                }
            );
            assert_eq!(&wire[decoded.data.unwrap()], b"abc");
        }
        assert_eq!(end(258, true), *b"\x00\x04\x01\x02\x03\x02");
        assert_eq!(
            decode(&end(5, false)).unwrap().unwrap().status,
            Status::End { error: false }
        );
        let mut wire = data_header(7, 3).to_vec();
        wire.extend_from_slice(b"abc");
        let decoded = decode(&wire).unwrap().unwrap();
        assert_eq!(
            (
                decoded.session,
                decoded.status,
                &wire[decoded.data.unwrap()]
            ),
            (7, Status::Keep { address: None }, &b"abc"[..])
        );
    }
}
