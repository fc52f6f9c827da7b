//! `etc route FILE tcp|udp HOST:PORT`: which rule a flow would match and
//! where it would go, computed by the same compiled table the runtime uses.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use etemenanki_ir::route::{FlowKey, Host, Network};

use super::{report_failure, Format, USAGE};
use crate::compile_file;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A configuration file (.et or .toml).
    file: PathBuf,
    /// The flow's network.
    network: NetworkArg,
    /// The destination: `example.com:443`, `1.2.3.4:80` or `[::1]:53`.
    destination: String,
    /// The client's address, for `source_cidr` rules.
    #[arg(long, value_name = "IP")]
    source: Option<IpAddr>,
    /// The inbound the flow arrived on, for `inbound_tag` rules.
    #[arg(long, value_name = "TAG")]
    inbound: Option<String>,
    /// A domain sniffed from TLS SNI or an HTTP Host header.
    #[arg(long, value_name = "NAME")]
    sniffed: Option<String>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum NetworkArg {
    Tcp,
    Udp,
}

pub fn run(args: Args) -> ExitCode {
    let (host, port) = match parse_destination(&args.destination) {
        Ok(destination) => destination,
        Err(why) => {
            errln!("error: {why}");
            return ExitCode::from(USAGE);
        }
    };
    let (_, compiled) = match compile_file(&args.file) {
        Ok(compiled) => compiled,
        Err(failure) => return report_failure(&failure, Format::Human),
    };
    let table = &compiled.spec.route;
    let flow = FlowKey {
        network: match args.network {
            NetworkArg::Tcp => Network::Tcp,
            NetworkArg::Udp => Network::Udp,
        },
        destination: host,
        port,
        source: args.source,
        inbound_tag: args.inbound.as_deref(),
        sniffed: args.sniffed.as_deref(),
    };
    let decision = table.route(&flow);
    match decision.rule {
        Some(index) => {
            let rule = &table.rules()[index];
            let why = rule.explain(&flow).unwrap_or_default();
            outln!(
                "rule {} (line {}) -> {}: {why}",
                index + 1,
                rule.line,
                decision.target
            );
        }
        None => outln!("default -> {}: no rule matches", decision.target),
    }
    ExitCode::SUCCESS
}

/// Splits `HOST:PORT`; an IPv6 host is written in brackets.
fn parse_destination(text: &str) -> Result<(Host<'_>, u16), String> {
    let usage = || {
        format!("`{text}` is not HOST:PORT (for example example.com:443, 1.2.3.4:80 or [::1]:53)")
    };
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (ip, port) = rest.split_once("]:").ok_or_else(usage)?;
            let ip: IpAddr = ip.parse().map_err(|_| usage())?;
            (Host::Ip(ip), port)
        }
        None => {
            let (host, port) = text.rsplit_once(':').ok_or_else(usage)?;
            if host.is_empty() {
                return Err(usage());
            }
            if host.contains(':') {
                return Err(format!(
                    "{}: write an IPv6 address in brackets, as [{host}]:{port}",
                    usage()
                ));
            }
            let host = host.parse().map_or(Host::Domain(host), Host::Ip);
            (host, port)
        }
    };
    let port = port
        .parse()
        .map_err(|_| format!("`{port}` in `{text}` is not a port between 0 and 65535"))?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_a_name_an_ipv4_or_a_bracketed_ipv6_with_a_port() {
        assert_eq!(
            parse_destination("example.com:443"),
            Ok((Host::Domain("example.com"), 443))
        );
        assert_eq!(
            parse_destination("1.2.3.4:80"),
            Ok((Host::Ip("1.2.3.4".parse().unwrap()), 80))
        );
        assert_eq!(
            parse_destination("[::1]:53"),
            Ok((Host::Ip("::1".parse().unwrap()), 53))
        );
    }

    #[test]
    fn a_malformed_destination_says_what_is_expected() {
        let usage =
            "`example.com` is not HOST:PORT (for example example.com:443, 1.2.3.4:80 or [::1]:53)";
        assert_eq!(parse_destination("example.com").unwrap_err(), usage);
        assert_eq!(
            parse_destination("example.com:https").unwrap_err(),
            "`https` in `example.com:https` is not a port between 0 and 65535"
        );
        assert_eq!(
            parse_destination("::1:53").unwrap_err(),
            "`::1:53` is not HOST:PORT (for example example.com:443, 1.2.3.4:80 or [::1]:53): write an IPv6 address in brackets, as [::1]:53"
        );
        assert!(parse_destination("[::1]53").is_err());
        assert!(parse_destination("[nope]:53").is_err());
        assert!(parse_destination(":53").is_err());
    }
}
