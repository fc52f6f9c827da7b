//! Sniffing a domain from the first bytes of a flow: the SNI of a TLS
//! ClientHello or the Host header of an HTTP/1 request. The runtime bounds
//! the window (300 ms, 4 KiB); this module only reads bytes.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sniffed {
    Domain(String),
    /// The bytes so far could still become a ClientHello or a request head.
    NeedMore,
    /// Neither protocol, or one that names no domain.
    Nothing,
}

/// Sniffs TLS first, then HTTP.
pub fn sniff(buf: &[u8]) -> Sniffed {
    match buf.first() {
        None => Sniffed::NeedMore,
        Some(0x16) => tls_sni(buf),
        Some(_) => http_host(buf),
    }
}

/// The server name of a TLS ClientHello.
pub fn tls_sni(buf: &[u8]) -> Sniffed {
    let mut r = Reader { buf, at: 0 };
    // Record header: type, version, length.
    let Some(header) = r.take(5) else {
        return Sniffed::NeedMore;
    };
    if header[0] != 0x16 || header[1] != 0x03 {
        return Sniffed::Nothing;
    }
    let record_len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    let Some(record) = r.take(record_len) else {
        return Sniffed::NeedMore;
    };
    parse_client_hello(record).map_or(Sniffed::Nothing, Sniffed::Domain)
}

fn parse_client_hello(record: &[u8]) -> Option<String> {
    let mut r = Reader { buf: record, at: 0 };
    if r.u8()? != 0x01 {
        return None;
    }
    r.take(3)?; // handshake length; the ClientHello must fit the record
    r.take(2 + 32)?; // legacy version, random
    let session = usize::from(r.u8()?);
    r.take(session)?;
    let suites = usize::from(r.u16()?);
    r.take(suites)?;
    let compression = usize::from(r.u8()?);
    r.take(compression)?;
    let ext_len = usize::from(r.u16()?);
    let mut exts = Reader {
        buf: r.take(ext_len)?,
        at: 0,
    };
    while let Some(kind) = exts.u16() {
        let len = usize::from(exts.u16()?);
        let body = exts.take(len)?;
        if kind != 0x0000 {
            continue;
        }
        let mut sni = Reader { buf: body, at: 0 };
        let list_len = usize::from(sni.u16()?);
        let mut list = Reader {
            buf: sni.take(list_len)?,
            at: 0,
        };
        while let Some(name_type) = list.u8() {
            let len = usize::from(list.u16()?);
            let name = list.take(len)?;
            if name_type == 0 {
                let name = std::str::from_utf8(name).ok()?;
                return valid_name(name).then(|| name.to_ascii_lowercase());
            }
        }
        return None;
    }
    None
}

/// The host (without its port) of an HTTP/1 request's Host header.
pub fn http_host(buf: &[u8]) -> Sniffed {
    const METHODS: &[&[u8]] = &[
        b"GET ",
        b"POST ",
        b"HEAD ",
        b"PUT ",
        b"DELETE ",
        b"OPTIONS ",
        b"PATCH ",
        b"CONNECT ",
        b"TRACE ",
    ];
    let could_be = METHODS.iter().any(|m| {
        let n = m.len().min(buf.len());
        m[..n] == buf[..n]
    });
    if !could_be {
        return Sniffed::Nothing;
    }
    let end = crate::http::head_end(buf);
    let head = &buf[..end.unwrap_or(buf.len())];
    let Ok(text) = std::str::from_utf8(head) else {
        return Sniffed::Nothing;
    };
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("host") {
            continue;
        }
        // A line is whole only when a CRLF follows it.
        if end.is_none() && !text.contains(&format!("{line}\r\n")) {
            return Sniffed::NeedMore;
        }
        let value = value.trim();
        let host = if let Some(rest) = value.strip_prefix('[') {
            rest.split(']').next().unwrap_or_default()
        } else {
            value.rsplit_once(':').map_or(value, |(h, _)| h)
        };
        return if valid_name(host) {
            Sniffed::Domain(host.to_ascii_lowercase())
        } else {
            Sniffed::Nothing
        };
    }
    if end.is_some() {
        Sniffed::Nothing
    } else {
        Sniffed::NeedMore
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.buf.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal TLS 1.2 ClientHello record with one SNI extension.
    pub(crate) fn client_hello(name: &str) -> Vec<u8> {
        let name = name.as_bytes();
        let mut sni = Vec::new();
        sni.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
        sni.extend_from_slice(name);
        let mut exts = Vec::new();
        exts.extend_from_slice(&[0x00, 0x0a, 0x00, 0x02, 0x00, 0x17]); // another extension first
        exts.extend_from_slice(&[0x00, 0x00]);
        exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        exts.extend_from_slice(&sni);
        let mut hello = vec![0x03, 0x03];
        hello.extend_from_slice(&[7; 32]);
        hello.push(0);
        hello.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]);
        hello.extend_from_slice(&[0x01, 0x00]);
        hello.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        hello.extend_from_slice(&exts);
        let mut handshake = vec![0x01];
        handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
        handshake.extend_from_slice(&hello);
        let mut record = vec![0x16, 0x03, 0x01];
        record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
        record.extend_from_slice(&handshake);
        record
    }

    #[test]
    fn the_sni_of_a_client_hello_is_found() {
        assert_eq!(
            sniff(&client_hello("Example.COM")),
            Sniffed::Domain("example.com".into())
        );
    }

    #[test]
    fn a_partial_client_hello_needs_more() {
        let hello = client_hello("example.com");
        for len in 1..hello.len() {
            assert_eq!(sniff(&hello[..len]), Sniffed::NeedMore, "at {len}");
        }
    }

    #[test]
    fn the_host_of_an_http_request_is_found_without_its_port() {
        let req = b"GET / HTTP/1.1\r\nUser-Agent: x\r\nHost: www.example.org:8080\r\n\r\n";
        assert_eq!(sniff(req), Sniffed::Domain("www.example.org".into()));
        assert_eq!(sniff(&req[..30]), Sniffed::NeedMore);
        assert_eq!(sniff(b"GE"), Sniffed::NeedMore);
    }

    #[test]
    fn other_protocols_name_nothing() {
        assert_eq!(sniff(b"SSH-2.0-OpenSSH\r\n"), Sniffed::Nothing);
        assert_eq!(
            sniff(b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"),
            Sniffed::Nothing
        );
        assert_eq!(sniff(b"\x16\x03\x01\x00\x01\x02"), Sniffed::Nothing);
    }
}
