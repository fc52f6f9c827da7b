//! The TCPRequest and TCPResponse frames that open a proxied stream
//! (PROTOCOL.md, "Proxy Requests"), sans-IO: encoders append to a
//! caller-owned buffer, decoders take what has arrived and say how many
//! bytes they used, or that they need more.

use std::io;

use crate::varint;

/// The frame type that starts every proxied stream.
pub const TCP_REQUEST_ID: u64 = 0x401;
/// The longest address, message and padding a peer may send, as
/// sing-box and hysteria bound them.
pub const MAX_ADDRESS_LEN: u64 = 2048;
pub const MAX_MESSAGE_LEN: u64 = 2048;
pub const MAX_PADDING_LEN: u64 = 4096;

/// Appends a TCPRequest for `address` (`host:port`) with `padding`.
pub fn encode_request(address: &str, padding: &[u8], out: &mut Vec<u8>) {
    varint::put(out, TCP_REQUEST_ID);
    varint::put(out, address.len() as u64);
    out.extend_from_slice(address.as_bytes());
    varint::put(out, padding.len() as u64);
    out.extend_from_slice(padding);
}

/// Appends a TCPResponse; `message` is cut at [`MAX_MESSAGE_LEN`].
pub fn encode_response(ok: bool, message: &str, padding: &[u8], out: &mut Vec<u8>) {
    let message = &message.as_bytes()[..message.len().min(MAX_MESSAGE_LEN as usize)];
    out.push(if ok { 0 } else { 1 });
    varint::put(out, message.len() as u64);
    out.extend_from_slice(message);
    varint::put(out, padding.len() as u64);
    out.extend_from_slice(padding);
}

/// A decoded TCPResponse.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub ok: bool,
    pub message: String,
}

fn bad(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// A length-prefixed field at `buf[at..]`: its range, or `None` when it
/// has not all arrived.
fn field(
    buf: &[u8],
    at: usize,
    max: u64,
    what: &'static str,
) -> io::Result<Option<(usize, usize)>> {
    let Some((len, n)) = buf.get(at..).and_then(varint::read) else {
        return Ok(None);
    };
    if len > max {
        return Err(bad(what));
    }
    let start = at + n;
    let end = start + len as usize;
    Ok((buf.len() >= end).then_some((start, end)))
}

/// Decodes a TCPResponse from the start of `buf`: the response and the
/// bytes it took (what follows is the stream's data), or `None` to wait
/// for more.
pub fn decode_response(buf: &[u8]) -> io::Result<Option<(Response, usize)>> {
    let Some(&status) = buf.first() else {
        return Ok(None);
    };
    let Some((start, end)) = field(
        buf,
        1,
        MAX_MESSAGE_LEN,
        "hysteria2: the server's response message is too long",
    )?
    else {
        return Ok(None);
    };
    let Some((_, used)) = field(
        buf,
        end,
        MAX_PADDING_LEN,
        "hysteria2: the server's response padding is too long",
    )?
    else {
        return Ok(None);
    };
    let message = String::from_utf8_lossy(&buf[start..end]).into_owned();
    Ok(Some((
        Response {
            ok: status == 0,
            message,
        },
        used,
    )))
}

/// Decodes a TCPRequest, frame type included, from the start of `buf`: the
/// address and the bytes it took, or `None` to wait for more.
pub fn decode_request(buf: &[u8]) -> io::Result<Option<(String, usize)>> {
    let Some((id, n)) = varint::read(buf) else {
        return Ok(None);
    };
    if id != TCP_REQUEST_ID {
        return Err(bad("hysteria2: the stream is not a tcp request"));
    }
    let Some((start, end)) = field(
        buf,
        n,
        MAX_ADDRESS_LEN,
        "hysteria2: the requested address is too long",
    )?
    else {
        return Ok(None);
    };
    if start == end {
        return Err(bad("hysteria2: the requested address is empty"));
    }
    let Some((_, used)) = field(
        buf,
        end,
        MAX_PADDING_LEN,
        "hysteria2: the request padding is too long",
    )?
    else {
        return Ok(None);
    };
    let address = std::str::from_utf8(&buf[start..end])
        .map_err(|_| bad("hysteria2: the requested address is not utf-8"))?;
    Ok(Some((address.to_owned(), used)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_decodes_byte_by_byte_and_leaves_the_data_after_it() {
        let mut wire = Vec::new();
        encode_request("example.com:443", &[b'x'; 100], &mut wire);
        let frame = wire.len();
        wire.extend_from_slice(b"payload");
        for cut in 0..frame {
            assert_eq!(decode_request(&wire[..cut]).unwrap(), None, "cut at {cut}");
        }
        let (address, used) = decode_request(&wire).unwrap().unwrap();
        assert_eq!(address, "example.com:443");
        assert_eq!(&wire[used..], b"payload");
    }

    #[test]
    fn a_response_decodes_ok_and_error() {
        let mut wire = Vec::new();
        encode_response(false, "connection refused", b"pad", &mut wire);
        wire.push(7);
        let (response, used) = decode_response(&wire).unwrap().unwrap();
        assert_eq!(
            response,
            Response {
                ok: false,
                message: "connection refused".into()
            }
        );
        assert_eq!(&wire[used..], [7]);
        let mut ok = Vec::new();
        encode_response(true, "", &[], &mut ok);
        assert_eq!(ok, [0, 0, 0]);
        assert!(decode_response(&ok).unwrap().unwrap().0.ok);
        assert_eq!(decode_response(&ok[..2]).unwrap(), None);
    }

    #[test]
    fn oversized_fields_and_other_frames_are_refused() {
        let mut wire = Vec::new();
        varint::put(&mut wire, TCP_REQUEST_ID);
        varint::put(&mut wire, MAX_ADDRESS_LEN + 1);
        assert!(decode_request(&wire).is_err());
        let mut other = Vec::new();
        varint::put(&mut other, 0x01);
        assert!(decode_request(&other).is_err());
        let mut response = vec![0];
        varint::put(&mut response, 0);
        varint::put(&mut response, MAX_PADDING_LEN + 1);
        assert!(decode_response(&response).is_err());
        let mut empty = Vec::new();
        encode_request("", &[], &mut empty);
        assert!(decode_request(&empty).is_err());
    }
}
