//! The SOCKS5 client handshake for CONNECT and UDP ASSOCIATE as a
//! [`ClientCodec`]: method greeting, the username/password round when there
//! is an account, then the request; the reply names the bound address (for
//! an association, the relay to send datagrams to).

use std::io;

use super::{read_address, write_address};
use crate::codec::{ClientCodec, ClientStep};
use crate::Address;

const SOCKS5: u8 = 0x05;

/// What the handshake asks the server for.
#[derive(Clone, Copy, Debug)]
pub enum Command<'a> {
    Connect(&'a Address),
    /// UDP ASSOCIATE naming no source (`0.0.0.0:0`), as RFC 1928 has a
    /// client do when it does not know the address it will send from.
    Associate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Method,
    Auth,
    Reply,
}

/// One SOCKS5 client handshake; its reply is the address the server names.
pub struct Socks5<'a> {
    account: Option<(&'a str, &'a str)>,
    command: Command<'a>,
    state: State,
}

impl<'a> Socks5<'a> {
    pub fn new(account: Option<(&'a str, &'a str)>, command: Command<'a>) -> Self {
        Socks5 {
            account,
            command,
            state: State::Method,
        }
    }

    fn request(&self, out: &mut Vec<u8>) {
        match self.command {
            Command::Connect(destination) => {
                out.extend_from_slice(&[SOCKS5, 0x01, 0x00]);
                write_address(destination, out);
            }
            Command::Associate => {
                out.extend_from_slice(&[SOCKS5, 0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
            }
        }
    }
}

fn refused(kind: io::ErrorKind, text: &'static str) -> io::Error {
    io::Error::new(kind, text)
}

impl ClientCodec for Socks5<'_> {
    type Reply = Address;

    /// The auth request (3 + two 255-byte fields) is the longest message:
    /// 513, rounded up to a multiple of 16.
    const STAGING_RESERVE: usize = 528;

    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<Address>> {
        let method = if self.account.is_some() { 0x02 } else { 0x00 };
        out.extend_from_slice(&[SOCKS5, 0x01, method]);
        Ok(ClientStep::Read)
    }

    fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> io::Result<Option<(usize, ClientStep<Address>)>> {
        match self.state {
            State::Method => {
                let [version, method, ..] = *input else {
                    return Ok(None);
                };
                let wanted = if self.account.is_some() { 0x02 } else { 0x00 };
                if version != SOCKS5 {
                    return Err(refused(
                        io::ErrorKind::InvalidData,
                        "unexpected server version",
                    ));
                }
                if method != wanted {
                    return Err(refused(
                        io::ErrorKind::PermissionDenied,
                        "auth method not supported",
                    ));
                }
                match self.account {
                    Some((user, pass)) => {
                        let user = &user.as_bytes()[..user.len().min(255)];
                        let pass = &pass.as_bytes()[..pass.len().min(255)];
                        out.extend_from_slice(&[0x01, user.len() as u8]);
                        out.extend_from_slice(user);
                        out.push(pass.len() as u8);
                        out.extend_from_slice(pass);
                        self.state = State::Auth;
                    }
                    None => {
                        self.request(out);
                        self.state = State::Reply;
                    }
                }
                Ok(Some((2, ClientStep::Read)))
            }
            State::Auth => {
                let [_, status, ..] = *input else {
                    return Ok(None);
                };
                if status != 0x00 {
                    return Err(refused(
                        io::ErrorKind::PermissionDenied,
                        "server rejects account",
                    ));
                }
                self.request(out);
                self.state = State::Reply;
                Ok(Some((2, ClientStep::Read)))
            }
            State::Reply => {
                if input.len() < 4 {
                    return Ok(None);
                }
                if input[0] != SOCKS5 {
                    return Err(refused(
                        io::ErrorKind::InvalidData,
                        "unexpected server version",
                    ));
                }
                if input[1] != 0x00 {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        format!("server rejects request: {}", input[1]),
                    ));
                }
                match read_address(&input[3..]) {
                    Ok(Some((bound, used))) => Ok(Some((3 + used, ClientStep::Open(bound)))),
                    Ok(None) => Ok(None),
                    Err(reason) => Err(refused(io::ErrorKind::InvalidData, reason)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::codec::{ServerCore, ServerRequest, ServerStep};
    use crate::socks::{status, Handshake};

    /// Runs `client` against the SOCKS server core, one message at a time,
    /// the way the runtime does: what the client appends goes to the server,
    /// what the server answers goes back. Returns the request the server
    /// decoded and the client's reply, with the bytes left after it.
    fn converse(
        accounts: &[(String, String)],
        mut client: Socks5<'_>,
        reply_status: u8,
    ) -> io::Result<(crate::socks::Request, Address)> {
        let mut server = Handshake::new(accounts);
        let mut to_server = Vec::new();
        let mut to_client = Vec::new();
        assert_eq!(client.start(&mut to_server).unwrap(), ClientStep::Read);
        loop {
            let step = server
                .advance(&to_server, SystemTime::UNIX_EPOCH, &mut to_client)
                .map_err(|r| {
                    to_client.extend_from_slice(&r.reply);
                    io::Error::other(r.reason)
                });
            let request = match step {
                Ok(ServerStep::NeedMore { consumed }) => {
                    to_server.drain(..consumed);
                    None
                }
                Ok(ServerStep::Open { request, .. }) => {
                    to_server.clear();
                    if reply_status == status::SUCCEEDED {
                        request.on_connected("127.0.0.1:1".parse().unwrap(), &mut to_client);
                    } else {
                        request.on_connect_failed(io::ErrorKind::ConnectionRefused, &mut to_client);
                    }
                    Some(request)
                }
                Err(e) if to_client.is_empty() => return Err(e),
                Err(_) => None,
            };
            // A reply split across reads: the client sees it a byte at a time.
            let mut seen = 0;
            loop {
                seen += 1;
                let got = client.decode(&to_client[..seen.min(to_client.len())], &mut to_server)?;
                match got {
                    None if seen < to_client.len() => continue,
                    None => panic!("the client wants more than the server sent"),
                    Some((used, ClientStep::Read)) => {
                        to_client.drain(..used);
                        break;
                    }
                    Some((used, ClientStep::Open(bound))) => {
                        assert_eq!(used, to_client.len(), "the reply is consumed exactly");
                        return Ok((request.expect("opened after a request"), bound));
                    }
                }
            }
        }
    }

    #[test]
    fn the_client_codec_and_the_server_core_agree_with_and_without_an_account() {
        let accounts = vec![("u".to_owned(), "p".to_owned())];
        let dest = Address::Domain("example.com".into(), 443);
        let codec = Socks5::new(Some(("u", "p")), Command::Connect(&dest));
        let (request, bound) = converse(&accounts, codec, status::SUCCEEDED).unwrap();
        assert_eq!(request.destination, dest);
        assert_eq!(bound, Address::Ip("127.0.0.1:1".parse().unwrap()));

        let codec = Socks5::new(None, Command::Associate);
        let (request, _) = converse(&[], codec, status::SUCCEEDED).unwrap();
        assert_eq!(request.command, crate::socks::Command::UdpAssociate);
    }

    #[test]
    fn refusals_are_errors_that_say_what_the_server_refused() {
        let accounts = vec![("u".to_owned(), "p".to_owned())];
        let dest = Address::Domain("example.com".into(), 443);
        let wrong = Socks5::new(Some(("u", "nope")), Command::Connect(&dest));
        let e = converse(&accounts, wrong, status::SUCCEEDED).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::PermissionDenied,
                "server rejects account".into()
            )
        );
        let anonymous = Socks5::new(None, Command::Connect(&dest));
        let e = converse(&accounts, anonymous, status::SUCCEEDED).unwrap_err();
        assert_eq!(e.to_string(), "auth method not supported");
        let refused = Socks5::new(None, Command::Connect(&dest));
        let e = converse(&[], refused, status::CONNECTION_REFUSED).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::ConnectionRefused,
                "server rejects request: 5".into()
            )
        );
    }

    #[test]
    fn bytes_after_a_reply_are_left_for_the_stream() {
        let dest = Address::Domain("example.com".into(), 443);
        let mut codec = Socks5::new(None, Command::Connect(&dest));
        let mut out = Vec::new();
        codec.start(&mut out).unwrap();
        let step = codec.decode(b"\x05\x00", &mut out).unwrap();
        assert_eq!(step, Some((2, ClientStep::Read)));
        let mut input = b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x50".to_vec();
        input.extend_from_slice(b"SSH-2.0 banner");
        let (used, step) = codec.decode(&input, &mut out).unwrap().unwrap();
        assert_eq!(&input[used..], b"SSH-2.0 banner");
        assert_eq!(
            step,
            ClientStep::Open(Address::Ip("127.0.0.1:80".parse().unwrap()))
        );
    }
}
