//! The client side of CONNECT, for the http outbound, as a [`ClientCodec`].

use std::io;

use super::head_end;
use crate::codec::{ClientCodec, ClientStep};
use crate::Address;

/// The longest response head accepted from the proxy.
const MAX_RESPONSE_HEAD: usize = 8 * 1024;

/// One `CONNECT host:port` request, with Basic credentials when there is an
/// account; the tunnel opens on a 2xx answer.
pub struct Connect<'a> {
    destination: &'a Address,
    account: Option<(&'a str, &'a str)>,
}

impl<'a> Connect<'a> {
    pub fn new(destination: &'a Address, account: Option<(&'a str, &'a str)>) -> Self {
        Connect {
            destination,
            account,
        }
    }
}

impl ClientCodec for Connect<'_> {
    type Reply = ();

    /// 1 KiB: a CONNECT to a 255-byte name with its Host header takes 551
    /// bytes, which leaves room for Proxy-Authorization credentials of up
    /// to 333 bytes.
    const STAGING_RESERVE: usize = 1024;

    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        use std::io::Write;
        let authority = match self.destination {
            Address::Ip(addr) => addr.to_string(),
            Address::Domain(name, port) => format!("{name}:{port}"),
        };
        // Writing to a Vec cannot fail.
        let _ = write!(out, "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
        if let Some((user, pass)) = self.account {
            let token = etemenanki_ir::base64::encode(format!("{user}:{pass}").as_bytes());
            let _ = write!(out, "Proxy-Authorization: Basic {token}\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Ok(ClientStep::Read)
    }

    fn decode(
        &mut self,
        input: &[u8],
        _out: &mut Vec<u8>,
    ) -> io::Result<Option<(usize, ClientStep<()>)>> {
        match parse_connect_response(input) {
            Ok(Some(len)) => Ok(Some((len, ClientStep::Open(())))),
            Ok(None) if input.len() > MAX_RESPONSE_HEAD => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "http: CONNECT response head too long",
            )),
            Ok(None) => Ok(None),
            Err(ResponseError::Malformed) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "http: malformed CONNECT response",
            )),
            Err(ResponseError::Status(code)) => Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("http: the proxy answered CONNECT with {code}"),
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResponseError {
    Malformed,
    Status(u16),
}

/// The length of a whole 2xx response head at the start of `buf`,
/// `Ok(None)` if more is needed.
fn parse_connect_response(buf: &[u8]) -> Result<Option<usize>, ResponseError> {
    let Some(len) = head_end(buf) else {
        return Ok(None);
    };
    let line = buf[..len].split(|&b| b == b'\r').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| ResponseError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(ResponseError::Malformed);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ResponseError::Malformed);
    }
    let code: u16 = code.parse().map_err(|_| ResponseError::Malformed)?;
    if !(200..300).contains(&code) {
        return Err(ResponseError::Status(code));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::codec::{ServerCore, ServerRequest, ServerStep};
    use crate::http::{Core, RESPONSE_AUTH_REQUIRED, RESPONSE_ESTABLISHED};

    #[test]
    fn the_client_request_is_what_the_server_core_opens() {
        let dest = Address::Domain("example.com".into(), 443);
        let mut request = Vec::new();
        let mut codec = Connect::new(&dest, Some(("u", "p")));
        assert_eq!(codec.start(&mut request).unwrap(), ClientStep::Read);
        let accounts = [("u".to_owned(), "p".to_owned())];
        let mut out = Vec::new();
        let step = Core::new(&accounts)
            .advance(&request, SystemTime::UNIX_EPOCH, &mut out)
            .unwrap();
        let ServerStep::Open {
            consumed,
            request: head,
        } = step
        else {
            panic!("{step:?}")
        };
        assert_eq!(consumed, request.len());
        assert_eq!(head.destination, dest);
        let mut reply = Vec::new();
        head.on_connected("127.0.0.1:1".parse().unwrap(), &mut reply);
        assert_eq!(reply, RESPONSE_ESTABLISHED);
        assert_eq!(
            codec.decode(&reply, &mut out).unwrap(),
            Some((reply.len(), ClientStep::Open(())))
        );
    }

    #[test]
    fn a_response_split_across_reads_opens_once_whole_and_leaves_what_follows() {
        let dest = Address::Domain("example.com".into(), 443);
        let mut codec = Connect::new(&dest, None);
        let mut out = Vec::new();
        codec.start(&mut out).unwrap();
        let mut input = RESPONSE_ESTABLISHED.to_vec();
        input.extend_from_slice(b"220 smtp ready\r\n");
        for cut in 0..RESPONSE_ESTABLISHED.len() {
            assert_eq!(codec.decode(&input[..cut], &mut out).unwrap(), None);
        }
        let (used, step) = codec.decode(&input, &mut out).unwrap().unwrap();
        assert_eq!(
            (&input[used..], step),
            (&b"220 smtp ready\r\n"[..], ClientStep::Open(()))
        );
    }

    #[test]
    fn only_a_2xx_response_opens_the_tunnel() {
        let dest = Address::Domain("example.com".into(), 443);
        let mut codec = Connect::new(&dest, None);
        let mut out = Vec::new();
        let e = codec.decode(RESPONSE_AUTH_REQUIRED, &mut out).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::ConnectionRefused,
                "http: the proxy answered CONNECT with 407".to_owned()
            )
        );
        let e = codec.decode(b"SSH-2.0\r\n\r\n", &mut out).unwrap_err();
        assert_eq!(e.to_string(), "http: malformed CONNECT response");
        let endless = vec![b'x'; MAX_RESPONSE_HEAD + 1];
        let e = codec.decode(&endless, &mut out).unwrap_err();
        assert_eq!(e.to_string(), "http: CONNECT response head too long");
    }
}
