//! `etc route FILE tcp|udp HOST:PORT`: which rule a flow would match and
//! where it would go, computed by the same compiled table the runtime uses.
//!
//! Under a domain strategy that resolves, a flow addressed by name may be
//! routed again by its addresses. `etc` resolves nothing itself: the
//! runtime asks the DNS servers of the plan, which this host may not reach
//! or may see answer differently. `--resolved IP` (repeatable) says what
//! the name resolves to; without it the second line says the runtime would
//! resolve it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use etemenanki_ir::route::{Decision, DomainStrategy, FlowKey, Host, Network, RouteTable};

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
    /// An address the destination name resolves to, for a domain strategy
    /// that routes a name by its addresses; repeat it for each address.
    #[arg(long, value_name = "IP")]
    resolved: Vec<IpAddr>,
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
    let Host::Domain(name) = flow.destination else {
        print_decision(table, &flow, decision, None);
        return ExitCode::SUCCESS;
    };
    let strategy = table.domain_strategy();
    let note = if strategy == DomainStrategy::AsIs {
        print_decision(table, &flow, decision, None);
        if args.resolved.is_empty() {
            return ExitCode::SUCCESS;
        }
        "names are not resolved for routing, so --resolved is ignored".to_owned()
    } else if !table.wants_addresses(&flow, &decision) {
        print_decision(table, &flow, decision, None);
        not_resolved_because(table, decision).to_owned()
    } else if args.resolved.is_empty() {
        print_decision(table, &flow, decision, None);
        format!(
            "the runtime resolves {name} and routes again by its addresses; \
             pass --resolved IP to see where they go"
        )
    } else {
        let (resolved, by) = table.route_resolved(&flow, decision, &args.resolved);
        print_decision(table, &flow, resolved, by);
        let addresses: Vec<String> = args.resolved.iter().map(IpAddr::to_string).collect();
        let outcome = match (by, decision.rule) {
            (Some(_), _) => "",
            (None, None) => "; no rule matches its addresses either",
            (None, Some(_)) => "; no address matches an earlier rule",
        };
        format!("{name} resolved to {}{outcome}", addresses.join(", "))
    };
    outln!("domain strategy {strategy}: {note}");
    ExitCode::SUCCESS
}

/// The decision's line: the rule with its number, line and why, or the
/// default; `by` is the resolved address that matched, if one did.
fn print_decision(
    table: &RouteTable,
    flow: &FlowKey<'_>,
    decision: Decision<'_>,
    by: Option<IpAddr>,
) {
    let Some(index) = decision.rule else {
        outln!("default -> {}: no rule matches", shown(decision.target));
        return;
    };
    let rule = &table.rules()[index];
    let why = match by {
        Some(ip) => {
            let resolved = FlowKey {
                destination: Host::Ip(ip),
                ..*flow
            };
            let why = rule.explain(&resolved).unwrap_or_default();
            format!("{why} (resolved {ip})")
        }
        None => rule.explain(flow).unwrap_or_default(),
    };
    outln!(
        "rule {} (line {}) -> {}: {why}",
        index + 1,
        rule.line,
        shown(decision.target)
    );
}

/// A route target as `etc route` names it: the tag, and for `dns` what it
/// is.
fn shown(target: &str) -> String {
    match target == etemenanki_ir::spec::DNS_TARGET {
        true => format!("{target} (the internal DNS service)"),
        false => target.to_owned(),
    }
}

/// Why a strategy that resolves leaves this name alone.
fn not_resolved_because(table: &RouteTable, decision: Decision<'_>) -> &'static str {
    match (table.first_ip_rule().is_some(), decision.rule) {
        (false, _) => "no rule has cidr or geoip, so the name is not resolved",
        (true, Some(_)) if table.domain_strategy() == DomainStrategy::IpOnDemand => {
            "a rule matches the name before any cidr or geoip rule, so it is not resolved"
        }
        _ => "a rule matches the name, so it is not resolved",
    }
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
            let host = Host::parse(host).ok_or_else(|| {
                format!("`{host}` in `{text}` is neither an IP address nor a domain name")
            })?;
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
        assert_eq!(
            parse_destination("exa mple.com:80").unwrap_err(),
            "`exa mple.com` in `exa mple.com:80` is neither an IP address nor a domain name"
        );
        assert!(parse_destination("[::1]53").is_err());
        assert!(parse_destination("[nope]:53").is_err());
        assert!(parse_destination(":53").is_err());
    }
}
