//! The request that opens a Trojan tunnel or UDP association, as a
//! [`ClientCodec`]: written once, answered by nothing.

use std::io;

use super::password::{PasswordHash, HASH_LEN};
use super::CRLF;
use crate::codec::{ClientCodec, ClientStep};
use crate::socks::write_address;
use crate::Address;

/// The longest request: the hash, CRLF, the command, the longest address
/// (259) and CRLF; also the Trojan client's STAGING_RESERVE.
pub const REQUEST_HEADER_MAX: usize = HASH_LEN + 2 + 1 + 259 + 2;

const CMD_CONNECT: u8 = 0x01;
const CMD_UDP_ASSOCIATE: u8 = 0x03;

/// The placeholder address of a UDP association: every packet names its
/// own, so the request names none.
const NO_ADDRESS: [u8; 7] = [0x01, 0, 0, 0, 0, 0, 0];

#[derive(Clone, Copy, Debug)]
pub enum Command<'a> {
    /// A tunnel to this destination.
    Connect(&'a Address),
    /// A UDP association, `0.0.0.0:0` in the request.
    Associate,
}

/// One Trojan request.
pub struct Request<'a> {
    hash: &'a PasswordHash,
    command: Command<'a>,
}

impl<'a> Request<'a> {
    pub fn new(hash: &'a PasswordHash, command: Command<'a>) -> Self {
        Request { hash, command }
    }
}

impl ClientCodec for Request<'_> {
    type Reply = ();

    const STAGING_RESERVE: usize = REQUEST_HEADER_MAX;

    /// Appends the whole request; the stream is open once it is flushed.
    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        out.extend_from_slice(self.hash.as_bytes());
        out.extend_from_slice(CRLF);
        match self.command {
            Command::Connect(destination) => {
                out.push(CMD_CONNECT);
                write_address(destination, out);
            }
            Command::Associate => {
                out.push(CMD_UDP_ASSOCIATE);
                out.extend_from_slice(&NO_ADDRESS);
            }
        }
        out.extend_from_slice(CRLF);
        Ok(ClientStep::Open(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: Command<'_>) -> Vec<u8> {
        let hash = PasswordHash::new("abc");
        let mut out = Vec::new();
        assert_eq!(
            Request::new(&hash, command).start(&mut out).unwrap(),
            ClientStep::Open(())
        );
        out
    }

    #[test]
    fn a_connect_request_matches_the_hand_checked_bytes() {
        let destination = Address::Ip("192.0.2.1:443".parse().unwrap());
        let mut expected = b"23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7\r\n".to_vec();
        expected.extend_from_slice(&[0x01, 0x01, 192, 0, 2, 1, 0x01, 0xbb, b'\r', b'\n']);
        assert_eq!(request(Command::Connect(&destination)), expected);
    }

    #[test]
    fn a_domain_is_named_by_length_and_the_longest_request_fits_the_reserve() {
        let destination = Address::Domain("example.com".into(), 80);
        let bytes = request(Command::Connect(&destination));
        assert_eq!(&bytes[58..62], &[0x01, 0x03, 11, b'e']);
        assert_eq!(&bytes[bytes.len() - 4..], &[0x00, 0x50, b'\r', b'\n']);

        let longest = Address::Domain("a".repeat(255), 1);
        assert_eq!(
            request(Command::Connect(&longest)).len(),
            REQUEST_HEADER_MAX
        );
        assert_eq!(REQUEST_HEADER_MAX, 320);
    }

    #[test]
    fn an_association_names_the_udp_command_and_a_placeholder_address() {
        let bytes = request(Command::Associate);
        assert_eq!(&bytes[56..], b"\r\n\x03\x01\0\0\0\0\0\0\r\n");
    }
}
