//! The VLESS request header as a [`ClientCodec`]: written at dial, and the
//! stream is open at once, as Xray's client has it. The server answers
//! only with the first bytes of its target (sing-box writes its response
//! header with them, v2ray after up to 100 ms), so waiting for the answer
//! at dial would stall every protocol whose client speaks first; the
//! answer is skipped on the first read instead ([`super::ResponseHeader`]).

use std::io;

use super::{write_port_address, COMMAND_TCP, COMMAND_UDP, VERSION};
use crate::codec::{ClientCodec, ClientStep};
use crate::Address;

/// Version, id, addons length, command and the longest address (type,
/// length, a 255-byte name, port): 1 + 16 + 1 + 1 + 259.
pub const REQUEST_HEADER_MAX: usize = 1 + 16 + 1 + 1 + 259;

/// One request: a TCP stream to `target`, or UDP packets to it.
pub struct Request<'a> {
    id: &'a [u8; 16],
    command: u8,
    target: &'a Address,
}

impl<'a> Request<'a> {
    pub fn tcp(id: &'a [u8; 16], target: &'a Address) -> Self {
        Request {
            id,
            command: COMMAND_TCP,
            target,
        }
    }

    /// UDP to the one `target` every packet of the stream goes to.
    pub fn udp(id: &'a [u8; 16], target: &'a Address) -> Self {
        Request {
            id,
            command: COMMAND_UDP,
            target,
        }
    }
}

impl ClientCodec for Request<'_> {
    type Reply = ();

    const STAGING_RESERVE: usize = REQUEST_HEADER_MAX;

    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        out.push(VERSION);
        out.extend_from_slice(self.id);
        out.extend_from_slice(&[0, self.command]);
        write_port_address(self.target, out);
        Ok(ClientStep::Open(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: [u8; 16] = [
        0xbf, 0x00, 0x0d, 0x23, 0x07, 0x52, 0x40, 0xb4, 0xaf, 0xfe, 0x68, 0xf7, 0x70, 0x7a, 0x96,
        0x61,
    ];

    fn header(codec: &mut Request<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        assert_eq!(codec.start(&mut out).unwrap(), ClientStep::Open(()));
        out
    }

    #[test]
    fn a_tcp_request_to_an_ipv4_address_is_the_hand_checked_header() {
        let target = Address::Ip("127.0.0.1:443".parse().unwrap());
        let got = header(&mut Request::tcp(&ID, &target));
        // version, id bf000d23-0752-40b4-affe-68f7707a9661, no addons, TCP,
        // port 443, IPv4 127.0.0.1.
        let want = b"\x00\
\xbf\x00\x0d\x23\x07\x52\x40\xb4\xaf\xfe\x68\xf7\x70\x7a\x96\x61\
\x00\x01\
\x01\xbb\
\x01\x7f\x00\x00\x01";
        assert_eq!(got, want);
    }

    #[test]
    fn udp_domain_and_ipv6_targets_use_vless_address_types() {
        let named = Address::Domain("example.com".into(), 53);
        let got = header(&mut Request::udp(&ID, &named));
        assert_eq!(&got[17..], b"\x00\x02\x00\x35\x02\x0bexample.com");
        let v6 = Address::Ip("[2001:db8::1]:8080".parse().unwrap());
        let got = header(&mut Request::tcp(&ID, &v6));
        let mut want = b"\x00\x01\x1f\x90\x03".to_vec();
        want.extend_from_slice(
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        assert_eq!(&got[17..], want);
    }

    #[test]
    fn the_longest_header_is_the_staging_reserve() {
        let longest = Address::Domain("a".repeat(255), 1);
        let got = header(&mut Request::tcp(&ID, &longest));
        assert_eq!(got.len(), REQUEST_HEADER_MAX);
        assert_eq!(Request::<'_>::STAGING_RESERVE, 278);
    }
}
