//! The SOCKS server handshake as a state machine over bytes.
//!
//! [`Handshake`] is the [`ServerCore`] of SOCKS: the caller reads from the
//! client into a buffer and passes the unconsumed bytes; the core says how
//! many it consumed and appends what to send (a method choice, an auth
//! answer); once the request is whole it returns it. The reply to the request
//! depends on the dial, so [`Request`] stages it on connected or on connect
//! failed.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::SystemTime;

use super::{domain_address, read_address, status, write_socket_addr};
use crate::codec::{FlowKind, Refusal, ServerCore, ServerRequest, ServerStep};
use crate::Address;

const SOCKS4: u8 = 0x04;
const SOCKS5: u8 = 0x05;
const METHOD_NONE: u8 = 0x00;
const METHOD_USERPASS: u8 = 0x02;
const METHOD_UNACCEPTABLE: u8 = 0xff;
const USERPASS_VERSION: u8 = 0x01;
/// The longest SOCKS4 user id or 4a domain accepted before the NUL.
const MAX_SOCKS4_FIELD: usize = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V4,
    V5,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Connect,
    UdpAssociate,
}

/// A whole, authenticated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub version: Version,
    pub command: Command,
    /// The destination of a CONNECT; for UDP ASSOCIATE, the source the client
    /// says it will send from (often `0.0.0.0:0`).
    pub destination: Address,
}

impl ServerRequest for Request {
    fn destination(&self) -> &Address {
        &self.destination
    }

    fn kind(&self) -> FlowKind {
        match self.command {
            Command::Connect => FlowKind::Stream,
            Command::UdpAssociate => FlowKind::Datagrams,
        }
    }

    fn on_connected(&self, bound: SocketAddr, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.reply(status::SUCCEEDED, bound));
    }

    fn reports_bound(&self) -> bool {
        true
    }

    fn on_connect_failed(&self, error: io::ErrorKind, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.reply(status_of(error), unspecified()));
    }
}

/// The SOCKS5 reply code for a dial that failed with `error`.
pub fn status_of(error: io::ErrorKind) -> u8 {
    match error {
        io::ErrorKind::ConnectionRefused => status::CONNECTION_REFUSED,
        io::ErrorKind::NetworkUnreachable => status::NETWORK_UNREACHABLE,
        io::ErrorKind::HostUnreachable | io::ErrorKind::TimedOut | io::ErrorKind::NotFound => {
            status::HOST_UNREACHABLE
        }
        io::ErrorKind::PermissionDenied => status::NOT_ALLOWED,
        _ => status::GENERAL_FAILURE,
    }
}

impl Request {
    /// The reply to this request: SOCKS5 `status` with the bound address, or
    /// for SOCKS4 granted exactly when `status` is SUCCEEDED.
    pub fn reply(&self, status: u8, bound: SocketAddr) -> Vec<u8> {
        match self.version {
            Version::V5 => reply_v5(status, bound),
            Version::V4 => reply_v4(status == status::SUCCEEDED, bound),
        }
    }
}

pub fn reply_v5(status: u8, bound: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(22);
    out.extend_from_slice(&[SOCKS5, status, 0x00]);
    write_socket_addr(bound, &mut out);
    out
}

fn reply_v4(granted: bool, bound: SocketAddr) -> Vec<u8> {
    let code = if granted { 0x5a } else { 0x5b };
    let ip = match bound.ip() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    };
    let mut out = vec![0x00, code];
    out.extend_from_slice(&bound.port().to_be_bytes());
    out.extend_from_slice(&ip.octets());
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    UserPass,
    Request5,
}

/// The server side of one SOCKS handshake.
pub struct Handshake<'a> {
    /// (user, password) pairs; empty means no authentication.
    accounts: &'a [(String, String)],
    state: State,
}

impl<'a> Handshake<'a> {
    pub fn new(accounts: &'a [(String, String)]) -> Self {
        Handshake {
            accounts,
            state: State::Start,
        }
    }
}

impl ServerCore for Handshake<'_> {
    type Request = Request;

    /// Greeting, auth and a request with a 255-byte domain fit well within.
    const MAX_HANDSHAKE: usize = 1024;

    /// SOCKS has no time window: `now` is not used.
    fn advance(
        &mut self,
        input: &[u8],
        _now: SystemTime,
        out: &mut Vec<u8>,
    ) -> Result<ServerStep<Request>, Refusal> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            let step = match self.state {
                State::Start => self.start(rest, out)?,
                State::UserPass => self.user_pass(rest, out)?,
                State::Request5 => match request5(rest)? {
                    Some((request, used)) => {
                        return Ok(ServerStep::Open {
                            consumed: at + used,
                            request,
                        });
                    }
                    None => None,
                },
            };
            match step {
                Some(Step::Consumed(n)) => at += n,
                Some(Step::Done(request, n)) => {
                    return Ok(ServerStep::Open {
                        consumed: at + n,
                        request,
                    });
                }
                None => return Ok(ServerStep::NeedMore { consumed: at }),
            }
        }
    }
}

impl Handshake<'_> {
    fn start(&mut self, buf: &[u8], out: &mut Vec<u8>) -> Result<Option<Step>, Refusal> {
        match buf.first() {
            None => Ok(None),
            Some(&SOCKS5) => {
                let Some(&n) = buf.get(1) else {
                    return Ok(None);
                };
                let n = usize::from(n);
                if buf.len() < 2 + n {
                    return Ok(None);
                }
                let methods = &buf[2..2 + n];
                let wanted = if self.accounts.is_empty() {
                    METHOD_NONE
                } else {
                    METHOD_USERPASS
                };
                if !methods.contains(&wanted) {
                    return Err(Refusal {
                        reply: vec![SOCKS5, METHOD_UNACCEPTABLE],
                        reason: "socks: no acceptable authentication method",
                    });
                }
                out.extend_from_slice(&[SOCKS5, wanted]);
                self.state = if wanted == METHOD_NONE {
                    State::Request5
                } else {
                    State::UserPass
                };
                Ok(Some(Step::Consumed(2 + n)))
            }
            Some(&SOCKS4) => self
                .socks4(buf)
                .map(|r| r.map(|(req, n)| Step::Done(req, n))),
            Some(_) => Err(Refusal::silent("socks: unsupported version")),
        }
    }

    fn user_pass(&mut self, buf: &[u8], out: &mut Vec<u8>) -> Result<Option<Step>, Refusal> {
        if buf.len() < 2 {
            return Ok(None);
        }
        if buf[0] != USERPASS_VERSION {
            return Err(Refusal::silent("socks: bad username/password version"));
        }
        let ulen = usize::from(buf[1]);
        let Some(&plen) = buf.get(2 + ulen) else {
            return Ok(None);
        };
        let plen = usize::from(plen);
        let end = 3 + ulen + plen;
        if buf.len() < end {
            return Ok(None);
        }
        let user = &buf[2..2 + ulen];
        let pass = &buf[3 + ulen..end];
        let known = self
            .accounts
            .iter()
            .any(|(u, p)| u.as_bytes() == user && p.as_bytes() == pass);
        if !known {
            return Err(Refusal {
                reply: vec![USERPASS_VERSION, 0x01],
                reason: "socks: invalid user",
            });
        }
        out.extend_from_slice(&[USERPASS_VERSION, 0x00]);
        self.state = State::Request5;
        Ok(Some(Step::Consumed(end)))
    }

    fn socks4(&mut self, buf: &[u8]) -> Result<Option<(Request, usize)>, Refusal> {
        let refuse = |reason| Refusal {
            reply: reply_v4(false, unspecified()),
            reason,
        };
        if buf.len() < 8 {
            return Ok(None);
        }
        if !self.accounts.is_empty() {
            // SOCKS4 carries no password, so an inbound with accounts cannot
            // authenticate it.
            return Err(refuse(
                "socks: socks4 cannot authenticate and this inbound requires it",
            ));
        }
        let command = match buf[1] {
            0x01 => Command::Connect,
            _ => return Err(refuse("socks: socks4 command not supported")),
        };
        let port = u16::from_be_bytes([buf[2], buf[3]]);
        let ip = Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
        let Some(user_end) = find_nul(&buf[8..]).map_err(refuse)? else {
            return Ok(None);
        };
        let mut at = 8 + user_end + 1;
        let octets = ip.octets();
        let destination = if octets[..3] == [0, 0, 0] && octets[3] != 0 {
            // SOCKS4a: the domain follows the user id.
            let Some(name_end) = find_nul(&buf[at..]).map_err(refuse)? else {
                return Ok(None);
            };
            let dest = domain_address(&buf[at..at + name_end], port).map_err(refuse)?;
            at += name_end + 1;
            dest
        } else {
            Address::Ip(SocketAddr::new(IpAddr::V4(ip), port))
        };
        Ok(Some((
            Request {
                version: Version::V4,
                command,
                destination,
            },
            at,
        )))
    }
}

enum Step {
    Consumed(usize),
    Done(Request, usize),
}

fn unspecified() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
}

/// The index of the NUL ending a SOCKS4 field, `None` if more bytes are needed.
fn find_nul(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    match buf.iter().position(|&b| b == 0) {
        Some(i) if i <= MAX_SOCKS4_FIELD => Ok(Some(i)),
        Some(_) => Err("socks: socks4 field too long"),
        None if buf.len() > MAX_SOCKS4_FIELD => Err("socks: socks4 field too long"),
        None => Ok(None),
    }
}

fn request5(buf: &[u8]) -> Result<Option<(Request, usize)>, Refusal> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let refuse = |code, reason| Refusal {
        reply: reply_v5(code, unspecified()),
        reason,
    };
    if buf[0] != SOCKS5 {
        return Err(Refusal::silent("socks: bad request version"));
    }
    let command = match buf[1] {
        0x01 => Command::Connect,
        0x03 => Command::UdpAssociate,
        _ => {
            return Err(refuse(
                status::COMMAND_NOT_SUPPORTED,
                "socks: command not supported",
            ))
        }
    };
    let (destination, used) = match read_address(&buf[3..]) {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(None),
        Err(reason) => return Err(refuse(status::ADDRESS_TYPE_NOT_SUPPORTED, reason)),
    };
    Ok(Some((
        Request {
            version: Version::V5,
            command,
            destination,
        },
        3 + used,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts() -> Vec<(String, String)> {
        vec![("user".into(), "pass".into())]
    }

    /// Feeds `input` one byte at a time, as a slow client would, and returns
    /// the request and everything the server sent.
    fn trickle(
        accounts: &[(String, String)],
        input: &[u8],
    ) -> Result<(Request, Vec<u8>, usize), Refusal> {
        let mut core = Handshake::new(accounts);
        let mut out = Vec::new();
        let mut buffered: Vec<u8> = Vec::new();
        let mut total = 0;
        for &byte in input {
            buffered.push(byte);
            match core.advance(&buffered, SystemTime::UNIX_EPOCH, &mut out)? {
                ServerStep::NeedMore { consumed } => {
                    buffered.drain(..consumed);
                    total += consumed;
                }
                ServerStep::Open { consumed, request } => {
                    return Ok((request, out, total + consumed));
                }
            }
        }
        panic!("the request never completed; sent {out:?}");
    }

    #[test]
    fn socks5_connect_to_a_domain_without_auth() {
        let input = b"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb";
        let (request, out, used) = trickle(&[], input).unwrap();
        assert_eq!(out, b"\x05\x00");
        assert_eq!(used, input.len());
        assert_eq!(
            request,
            Request {
                version: Version::V5,
                command: Command::Connect,
                destination: Address::Domain("example.com".into(), 443)
            }
        );
    }

    #[test]
    fn socks5_whole_request_in_one_read_leaves_the_payload() {
        let mut input = b"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50".to_vec();
        input.extend_from_slice(b"GET /");
        let mut out = Vec::new();
        let progress = Handshake::new(&[])
            .advance(&input, SystemTime::UNIX_EPOCH, &mut out)
            .unwrap();
        let ServerStep::Open { consumed, request } = progress else {
            panic!("{progress:?}")
        };
        assert_eq!(&input[consumed..], b"GET /");
        assert_eq!(
            request.destination,
            Address::Ip("127.0.0.1:80".parse().unwrap())
        );
    }

    #[test]
    fn socks5_username_and_password_are_checked() {
        let input = b"\x05\x02\x00\x02\x01\x04user\x04pass\x05\x03\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x35";
        let (request, out, _) = trickle(&accounts(), input).unwrap();
        assert_eq!(out, b"\x05\x02\x01\x00");
        assert_eq!(request.command, Command::UdpAssociate);
        assert_eq!(
            request.destination,
            Address::Ip("[::1]:53".parse().unwrap())
        );

        let wrong = b"\x05\x01\x02\x01\x04user\x04nope";
        let refusal = trickle(&accounts(), wrong).unwrap_err();
        assert_eq!(refusal.reply, b"\x01\x01");
        assert_eq!(refusal.reason, "socks: invalid user");
    }

    #[test]
    fn socks5_without_an_acceptable_method_is_refused() {
        let refusal = trickle(&accounts(), b"\x05\x01\x00").unwrap_err();
        assert_eq!(refusal.reply, b"\x05\xff");
        let refusal = trickle(&[], b"\x05\x01\x02").unwrap_err();
        assert_eq!(refusal.reply, b"\x05\xff");
    }

    #[test]
    fn socks5_bind_is_not_supported() {
        let refusal =
            trickle(&[], b"\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50").unwrap_err();
        assert_eq!(refusal.reply[..2], [0x05, status::COMMAND_NOT_SUPPORTED]);
    }

    #[test]
    fn socks4_and_socks4a_connect() {
        let (request, out, _) = trickle(&[], b"\x04\x01\x00\x50\x0a\x00\x00\x01bob\x00").unwrap();
        assert!(out.is_empty());
        assert_eq!(request.version, Version::V4);
        assert_eq!(
            request.destination,
            Address::Ip("10.0.0.1:80".parse().unwrap())
        );

        let (request, _, used) =
            trickle(&[], b"\x04\x01\x01\xbb\x00\x00\x00\x07\x00example.org\x00").unwrap();
        assert_eq!(used, 21);
        assert_eq!(
            request.destination,
            Address::Domain("example.org".into(), 443)
        );
    }

    fn socks5_connect_to_domain(name: &[u8]) -> Result<Request, Refusal> {
        let mut input = b"\x05\x01\x00\x05\x01\x00\x03".to_vec();
        input.push(name.len() as u8);
        input.extend_from_slice(name);
        input.extend_from_slice(&80u16.to_be_bytes());
        trickle(&[], &input).map(|(request, _, _)| request)
    }

    #[test]
    fn a_socks5_domain_that_is_an_ip_literal_routes_as_an_ip() {
        for (name, ip) in [
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
        ] {
            let request = socks5_connect_to_domain(name.as_bytes()).unwrap();
            assert_eq!(
                request.destination,
                Address::Ip(SocketAddr::new(ip.parse().unwrap(), 80)),
                "{name}"
            );
        }
    }

    #[test]
    fn a_socks4a_domain_that_is_an_ip_literal_routes_as_an_ip() {
        let (request, _, _) =
            trickle(&[], b"\x04\x01\x00\x50\x00\x00\x00\x01\x00127.0.0.1\x00").unwrap();
        assert_eq!(
            request.destination,
            Address::Ip("127.0.0.1:80".parse().unwrap())
        );
    }

    #[test]
    fn a_socks_domain_that_is_no_host_name_is_refused() {
        for name in [
            &b"127.0.0.1\0"[..],
            b"example.com\r\n",
            b"a b",
            b"[example.com]",
        ] {
            let refusal = socks5_connect_to_domain(name).unwrap_err();
            assert_eq!(refusal.reason, "socks: the domain is not a valid host name");
            assert_eq!(refusal.reply[1], status::ADDRESS_TYPE_NOT_SUPPORTED);
        }
        let refusal =
            trickle(&[], b"\x04\x01\x00\x50\x00\x00\x00\x01\x00exa\x07mple\x00").unwrap_err();
        assert_eq!(refusal.reason, "socks: the domain is not a valid host name");
        assert_eq!(refusal.reply[1], 0x5b);
    }

    #[test]
    fn socks4_replies_are_eight_bytes() {
        let request = Request {
            version: Version::V4,
            command: Command::Connect,
            destination: Address::Domain("x".into(), 1),
        };
        assert_eq!(
            request.reply(status::SUCCEEDED, "1.2.3.4:5".parse().unwrap()),
            b"\x00\x5a\x00\x05\x01\x02\x03\x04"
        );
        assert_eq!(
            request.reply(status::CONNECTION_REFUSED, unspecified())[1],
            0x5b
        );
    }

    #[test]
    fn socks4_is_refused_when_the_inbound_needs_a_password() {
        let refusal = trickle(&accounts(), b"\x04\x01\x00\x50\x0a\x00\x00\x01\x00").unwrap_err();
        assert_eq!(refusal.reply[1], 0x5b);
    }

    #[test]
    fn an_unknown_version_is_refused_silently() {
        let refusal = trickle(&[], b"GET / HTTP/1.1\r\n").unwrap_err();
        assert!(refusal.reply.is_empty());
    }
}
