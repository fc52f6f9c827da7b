//! A destination host as routing sees it, and the one place a host written
//! as text becomes one: every text that parses as an IP address is an IP,
//! so a `cidr` or `geoip` rule cannot be stepped around by writing an
//! address as a name.

use std::net::IpAddr;

use super::domain::is_domain_name;

/// A destination as the client addressed it (or, under a domain strategy
/// that resolves, as its name resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host<'a> {
    Domain(&'a str),
    Ip(IpAddr),
}

impl<'a> Host<'a> {
    /// A host as written in a request: an IPv4 literal, an IPv6 literal
    /// bare or in brackets (IPv4-mapped forms included: they match as the
    /// IPv4 address they carry), or a domain name (letters, digits, `-`,
    /// `_`, dots; see [`super::normalize_domain`]). `None` for anything else,
    /// control characters and NULs among it. Allocates nothing.
    pub fn parse(text: &'a str) -> Option<Host<'a>> {
        let bare = text
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Host::Ip(ip));
        }
        is_domain_name(text).then_some(Host::Domain(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<Host<'static>> {
        Some(Host::Ip(text.parse().unwrap()))
    }

    #[test]
    fn a_host_that_parses_as_an_ip_is_an_ip_in_every_written_form() {
        assert_eq!(Host::parse("127.0.0.1"), ip("127.0.0.1"));
        assert_eq!(Host::parse("::1"), ip("::1"));
        assert_eq!(Host::parse("[::1]"), ip("::1"));
        assert_eq!(Host::parse("::ffff:127.0.0.1"), ip("::ffff:127.0.0.1"));
        assert_eq!(Host::parse("[::ffff:127.0.0.1]"), ip("::ffff:127.0.0.1"));
    }

    #[test]
    fn a_name_stays_a_name() {
        assert_eq!(
            Host::parse("example.com"),
            Some(Host::Domain("example.com"))
        );
        assert_eq!(
            Host::parse("Example.COM."),
            Some(Host::Domain("Example.COM."))
        );
        assert_eq!(
            Host::parse("_srv.x-y.example"),
            Some(Host::Domain("_srv.x-y.example"))
        );
    }

    #[test]
    fn a_host_with_control_characters_or_no_name_shape_is_refused() {
        for bad in [
            "127.0.0.1\0",
            "example.com\r\nX: y",
            "exa mple.com",
            "",
            "[example.com]",
            "[::1",
            "a..b",
            "user@example.com",
            "fe80::1%eth0",
            "bücher.de",
        ] {
            assert_eq!(Host::parse(bad), None, "{bad:?}");
        }
    }
}
