//! The SOCKS5 client handshake for CONNECT, one round trip at a time: the
//! runtime writes each message and reads each answer; these functions build
//! and check the bytes.

use super::{read_address, write_address};
use crate::Address;

const SOCKS5: u8 = 0x05;

/// The method greeting: user/password when there is an account, else none.
pub fn greeting(with_account: bool) -> [u8; 3] {
    [SOCKS5, 0x01, if with_account { 0x02 } else { 0x00 }]
}

/// Checks the server's method choice (two bytes).
pub fn check_method(answer: [u8; 2], with_account: bool) -> Result<(), &'static str> {
    let wanted = if with_account { 0x02 } else { 0x00 };
    if answer[0] != SOCKS5 {
        return Err("unexpected server version");
    }
    if answer[1] != wanted {
        return Err("auth method not supported");
    }
    Ok(())
}

pub fn auth_request(user: &str, pass: &str) -> Vec<u8> {
    let user = &user.as_bytes()[..user.len().min(255)];
    let pass = &pass.as_bytes()[..pass.len().min(255)];
    let mut out = vec![0x01, user.len() as u8];
    out.extend_from_slice(user);
    out.push(pass.len() as u8);
    out.extend_from_slice(pass);
    out
}

pub fn check_auth(answer: [u8; 2]) -> Result<(), &'static str> {
    if answer[1] != 0x00 {
        return Err("server rejects account");
    }
    Ok(())
}

/// UDP ASSOCIATE naming no source (`0.0.0.0:0`), as RFC 1928 has a client
/// do when it does not know the address it will send from.
pub fn associate_request() -> [u8; 10] {
    [SOCKS5, 0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
}

pub fn connect_request(destination: &Address) -> Vec<u8> {
    let mut out = vec![SOCKS5, 0x01, 0x00];
    write_address(destination, &mut out);
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyError {
    Malformed(&'static str),
    Rejected(u8),
}

/// The length of a whole reply at the start of `buf` and the address it
/// names, `Ok(None)` if more is needed.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(usize, Address)>, ReplyError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    if buf[0] != SOCKS5 {
        return Err(ReplyError::Malformed("unexpected server version"));
    }
    if buf[1] != 0x00 {
        return Err(ReplyError::Rejected(buf[1]));
    }
    match read_address(&buf[3..]) {
        Ok(Some((bound, used))) => Ok(Some((3 + used, bound))),
        Ok(None) => Ok(None),
        Err(reason) => Err(ReplyError::Malformed(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socks::{Handshake, Progress};

    #[test]
    fn the_client_and_server_cores_agree() {
        let accounts = vec![("u".to_owned(), "p".to_owned())];
        let mut server = Handshake::new(&accounts);
        let mut out = Vec::new();
        let dest = Address::Domain("example.com".into(), 443);
        let progress = server.advance(&greeting(true), &mut out).unwrap();
        assert_eq!(progress, Progress::NeedMore { consumed: 3 });
        check_method([out[0], out[1]], true).unwrap();
        out.clear();
        server.advance(&auth_request("u", "p"), &mut out).unwrap();
        check_auth([out[0], out[1]]).unwrap();
        let Progress::Request { request, .. } =
            server.advance(&connect_request(&dest), &mut out).unwrap()
        else {
            panic!("no request")
        };
        assert_eq!(request.destination, dest);
        let reply = request.reply(0, "127.0.0.1:1".parse().unwrap());
        let bound = Address::Ip("127.0.0.1:1".parse().unwrap());
        assert_eq!(parse_reply(&reply), Ok(Some((reply.len(), bound))));
        assert_eq!(parse_reply(&reply[..5]), Ok(None));
    }

    #[test]
    fn refusals_are_errors() {
        assert_eq!(
            check_method([5, 0xff], false),
            Err("auth method not supported")
        );
        assert_eq!(check_auth([1, 1]), Err("server rejects account"));
        assert_eq!(
            parse_reply(b"\x05\x05\x00\x01\0\0\0\0\0\0"),
            Err(ReplyError::Rejected(5))
        );
    }
}
