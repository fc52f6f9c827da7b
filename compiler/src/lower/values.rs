//! Parsers for the values several blocks share: hosts, socket addresses,
//! base64 keys.

use std::net::{IpAddr, SocketAddr};

use etemenanki_ir::spec::{Host, HostPort};

/// A host name or IP address, as a server is written. Brackets around an
/// IPv6 address are accepted.
pub fn host(text: &str) -> Result<Host, String> {
    let trimmed = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(Host::Ip(ip));
    }
    let name = text.strip_suffix('.').unwrap_or(text);
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(valid_label) {
        return Err(format!("`{text}` is not a host name or IP address"));
    }
    Ok(Host::Domain(name.to_ascii_lowercase()))
}

/// `host:port`, `1.2.3.4:port` or `[v6]:port`.
pub fn host_port(text: &str) -> Result<HostPort, String> {
    let (host_text, port_text) = text
        .rsplit_once(':')
        .filter(|(h, _)| !h.contains(':') || (h.starts_with('[') && h.ends_with(']')))
        .ok_or_else(|| {
            format!("`{text}` is not host:port (write an IPv6 address as [addr]:port)")
        })?;
    let port = port(port_text)
        .ok_or_else(|| format!("`{port_text}` is not a port between 1 and 65535"))?;
    Ok(HostPort {
        host: host(host_text)?,
        port,
    })
}

/// A DNS server as written in `servers`, `pre_proxy` or `through_proxy`.
#[derive(Debug, PartialEq, Eq)]
pub enum DnsUrl {
    /// `8.8.8.8` or `8.8.8.8:53`: plain DNS.
    Plain(SocketAddr),
    /// `tls://host[:port]`, port 853 by default.
    Tls(HostPort),
    /// `https://host[:port][/path]`, port 443 and `/dns-query` by default.
    Https(HostPort, String),
}

/// Parses one DNS server: an IP with an optional port (53), `tls://` or
/// `https://` followed by a host with an optional port.
pub fn dns_url(text: &str) -> Result<DnsUrl, String> {
    let with_port = |authority: &str, default: u16| {
        let bracketed_v6 = authority.starts_with('[') && authority.ends_with(']');
        let bare = !authority.contains(':') || bracketed_v6;
        if bare {
            host(authority).map(|host| HostPort {
                host,
                port: default,
            })
        } else {
            host_port(authority)
        }
    };
    if let Some(rest) = text.strip_prefix("tls://") {
        return with_port(rest, 853).map(DnsUrl::Tls);
    }
    if let Some(rest) = text.strip_prefix("https://") {
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, "/dns-query"),
        };
        return with_port(authority, 443).map(|server| DnsUrl::Https(server, path.to_owned()));
    }
    if let Some((scheme, _)) = text.split_once("://") {
        return Err(format!(
            "`{scheme}://` is not a DNS server kind (write an IP address, tls:// or https://)"
        ));
    }
    ip_with_default_port(text, 53).map(DnsUrl::Plain)
}

pub fn port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// An IP address with an optional port: `1.1.1.1`, `8.8.8.8:53`, `[::1]:53`.
pub fn ip_with_default_port(text: &str, default: u16) -> Result<SocketAddr, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default));
    }
    text.parse::<SocketAddr>()
        .ok()
        .filter(|a| a.port() != 0)
        .ok_or_else(|| format!("`{text}` is not an IP address with an optional port"))
}

/// Base64 of exactly `len` bytes.
pub fn key(text: &str, len: usize) -> Result<Vec<u8>, String> {
    match etemenanki_ir::base64::decode(text) {
        None => Err("is not valid base64".to_owned()),
        Some(bytes) if bytes.len() != len => {
            Err(format!("decodes to {} bytes, expected {len}", bytes.len()))
        }
        Some(bytes) => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_servers_take_their_kind_from_the_scheme_and_default_ports() {
        let hp = |t: &str| host_port(t).unwrap();
        assert_eq!(
            dns_url("8.8.8.8").unwrap(),
            DnsUrl::Plain("8.8.8.8:53".parse().unwrap())
        );
        assert_eq!(
            dns_url("[::1]:5353").unwrap(),
            DnsUrl::Plain("[::1]:5353".parse().unwrap())
        );
        assert_eq!(
            dns_url("tls://1.1.1.1").unwrap(),
            DnsUrl::Tls(hp("1.1.1.1:853"))
        );
        assert_eq!(
            dns_url("tls://[::1]:8853").unwrap(),
            DnsUrl::Tls(hp("[::1]:8853"))
        );
        assert_eq!(
            dns_url("https://dns.example/dns-query").unwrap(),
            DnsUrl::Https(hp("dns.example:443"), "/dns-query".into())
        );
        assert_eq!(
            dns_url("https://127.0.0.1:8443").unwrap(),
            DnsUrl::Https(hp("127.0.0.1:8443"), "/dns-query".into())
        );
        assert!(dns_url("quic://1.1.1.1")
            .unwrap_err()
            .contains("not a DNS server kind"));
        assert!(dns_url("dns.example").is_err());
    }

    #[test]
    fn base64_decodes_a_32_byte_key() {
        let key = key("YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=", 32).unwrap();
        assert_eq!(key, vec![b'a'; 32]);
        assert!(super::key("not base64!", 32).is_err());
    }

    #[test]
    fn host_port_accepts_names_v4_and_bracketed_v6() {
        assert_eq!(
            host_port("example.com:443").unwrap().to_string(),
            "example.com:443"
        );
        assert_eq!(host_port("[::1]:53").unwrap().to_string(), "[::1]:53");
        assert!(host_port("::1:53").is_err());
        assert!(host_port("example.com:0").is_err());
        assert!(host("bad host").is_err());
    }
}
