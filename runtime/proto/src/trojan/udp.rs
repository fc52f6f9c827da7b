//! Trojan's UDP packets inside the tunnel, as a [`DatagramCodec`]:
//! `ATYP DST.ADDR DST.PORT LENGTH CRLF PAYLOAD`, each packet naming its own
//! destination (toward the server) or source (from it).

use std::io;
use std::ops::Range;

use super::CRLF;
use crate::codec::{DatagramCodec, Packet};
use crate::socks::{address_len, put_address, read_address};
use crate::Address;

/// The longest packet header: the longest address (259), the length and
/// CRLF.
pub const PACKET_HEADER_MAX: usize = 259 + 2 + 2;

const ATYP_V4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_V6: u8 = 0x04;

/// The framing holds no state: every packet stands alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct UdpFraming;

fn invalid_data(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// The length of the address at the start of `input`, from its type (and
/// for a name, its length byte) alone: so a packet is parsed, and a name
/// copied, only once it is whole.
fn address_len_on_wire(input: &[u8]) -> io::Result<Option<usize>> {
    let Some(&atyp) = input.first() else {
        return Ok(None);
    };
    match atyp {
        ATYP_V4 => Ok(Some(1 + 4 + 2)),
        ATYP_V6 => Ok(Some(1 + 16 + 2)),
        ATYP_DOMAIN => Ok(input.get(1).map(|&len| 1 + 1 + usize::from(len) + 2)),
        _ => Err(invalid_data("trojan: unknown address type in a udp packet")),
    }
}

impl DatagramCodec for UdpFraming {
    const HEADROOM: usize = PACKET_HEADER_MAX;
    const TAILROOM: usize = 0;

    /// Writes the header so that it ends where the payload starts: the
    /// payload is never moved.
    fn seal_to(&mut self, buf: &mut [u8], len: usize, to: &Address) -> io::Result<Range<usize>> {
        let end = Self::HEADROOM + len;
        if buf.len() < end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "trojan: the buffer does not hold the payload behind the header's room",
            ));
        }
        let Ok(length) = u16::try_from(len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "trojan: a udp payload is at most 65535 bytes",
            ));
        };
        let address = address_len(to);
        let start = Self::HEADROOM - address - 4;
        put_address(to, &mut buf[start..start + address]);
        let at = start + address;
        buf[at..at + 2].copy_from_slice(&length.to_be_bytes());
        buf[at + 2..at + 4].copy_from_slice(CRLF);
        Ok(start..end)
    }

    fn open_from(&mut self, input: &mut [u8]) -> io::Result<Option<Packet>> {
        let Some(address) = address_len_on_wire(input)? else {
            return Ok(None);
        };
        let header = address + 4;
        if input.len() < header {
            return Ok(None);
        }
        if &input[address + 2..header] != CRLF {
            return Err(invalid_data(
                "trojan: a udp packet header does not end in CRLF",
            ));
        }
        let length = usize::from(u16::from_be_bytes([input[address], input[address + 1]]));
        let end = header + length;
        if input.len() < end {
            return Ok(None);
        }
        let Ok(Some((peer, _))) = read_address(&input[..address]) else {
            return Err(invalid_data("trojan: bad address in a udp packet"));
        };
        Ok(Some(Packet {
            consumed: end,
            peer,
            payload: header..end,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `payload` sealed for `to` the way the runtime does it: copied in
    /// after the headroom, the header written in front.
    fn sealed(to: &Address, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; PACKET_HEADER_MAX];
        buf.extend_from_slice(payload);
        let frame = UdpFraming.seal_to(&mut buf, payload.len(), to).unwrap();
        assert_eq!(frame.end, buf.len(), "the payload is not moved");
        buf[frame].to_vec()
    }

    fn open(input: &mut [u8]) -> Option<Packet> {
        UdpFraming.open_from(input).unwrap()
    }

    #[test]
    fn a_sealed_packet_matches_the_hand_checked_bytes() {
        let to = Address::Ip("192.0.2.1:53".parse().unwrap());
        assert_eq!(
            sealed(&to, b"hi"),
            b"\x01\xc0\x00\x02\x01\x00\x35\x00\x02\r\nhi".to_vec()
        );
        let to = Address::Domain("dns.example".into(), 853);
        assert_eq!(
            sealed(&to, b"q"),
            b"\x03\x0bdns.example\x03\x55\x00\x01\r\nq".to_vec()
        );
        let to = Address::Ip("[2001:db8::1]:443".parse().unwrap());
        let bytes = sealed(&to, b"");
        assert_eq!(bytes.len(), 1 + 16 + 2 + 4);
        assert_eq!(&bytes[..3], b"\x04\x20\x01");
        assert_eq!(&bytes[17..], b"\x01\xbb\x00\x00\r\n");
    }

    #[test]
    fn a_packet_split_anywhere_opens_only_once_whole() {
        let from = Address::Domain("peer.example".into(), 5353);
        let next = Address::Ip("10.0.0.1:9".parse().unwrap());
        let mut stream = sealed(&from, b"first reply");
        let first = stream.len();
        stream.extend_from_slice(&sealed(&next, b"2"));
        for cut in 0..first {
            assert_eq!(open(&mut stream[..cut].to_vec()), None, "cut at {cut}");
        }
        let packet = open(&mut stream).expect("a whole packet opens");
        assert_eq!((packet.consumed, &packet.peer), (first, &from));
        assert_eq!(&stream[packet.payload], b"first reply");
        let packet = open(&mut stream[first..]).expect("the packet after it opens too");
        assert_eq!(
            packet,
            Packet {
                consumed: stream.len() - first,
                peer: next,
                payload: 11..12,
            }
        );
    }

    #[test]
    fn oversize_payloads_are_refused_and_oversize_lengths_wait_for_the_whole_packet() {
        let to = Address::Ip("192.0.2.1:53".parse().unwrap());
        let mut buf = vec![0u8; PACKET_HEADER_MAX + 65_536];
        let e = UdpFraming.seal_to(&mut buf, 65_536, &to).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = UdpFraming
            .seal_to(&mut buf[..PACKET_HEADER_MAX], 1, &to)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);

        // A header naming 65,535 bytes: the codec waits, and the runtime's
        // buffer bound is what fails the link.
        let mut input = b"\x01\x7f\x00\x00\x01\x00\x35\xff\xff\r\n".to_vec();
        input.resize(16 * 1024, 0);
        assert_eq!(open(&mut input), None);
    }

    #[test]
    fn a_header_without_crlf_or_with_an_unknown_address_is_invalid_data() {
        let mut bad_crlf = b"\x01\x7f\x00\x00\x01\x00\x35\x00\x01\n\rx".to_vec();
        let e = UdpFraming.open_from(&mut bad_crlf).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::InvalidData,
                "trojan: a udp packet header does not end in CRLF".into()
            )
        );
        let e = UdpFraming.open_from(&mut [0x05, 0, 0]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let mut empty_name = b"\x03\x00\x00\x35\x00\x00\r\n".to_vec();
        let e = UdpFraming.open_from(&mut empty_name).unwrap_err();
        assert_eq!(e.to_string(), "trojan: bad address in a udp packet");
    }
}
