//! `etc inspect plan.bin`: what a plan holds, secrets masked.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use etemenanki_ir::encode::{self, Plan};
use etemenanki_ir::file::{read_regular, PLAN_LIMIT};
use etemenanki_ir::spec::{
    DnsSpec, InboundProtocol, OutboundProtocol, Spec, StreamShape, TransportSpec,
};
use serde_json::json;

use super::{Format, USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan written by `etc build`.
    plan: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: Args) -> ExitCode {
    let plan = match read_regular(&args.plan, PLAN_LIMIT) {
        Ok(bytes) => match encode::decode(&bytes) {
            Ok(plan) => plan,
            Err(err) => {
                errln!("error: {}: {err}", args.plan.display());
                return ExitCode::from(USAGE);
            }
        },
        Err(err) => {
            errln!(
                "error: cannot read {}: {}",
                args.plan.display(),
                crate::lower::io_text(&err)
            );
            return ExitCode::from(USAGE);
        }
    };
    match args.format {
        Format::Human => out!("{}", human(&plan)),
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&as_json(&plan)).expect("json")
        ),
    }
    ExitCode::SUCCESS
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The plan as JSON; `Secret` serializes as `"<secret>"` to JSON.
pub fn as_json(plan: &Plan) -> serde_json::Value {
    json!({
        "format_version": encode::FORMAT_VERSION,
        "compiler_version": plan.compiler_version,
        "source_digest": hex(&plan.source_digest),
        "spec_digest": hex(&plan.spec_digest),
        "spec": serde_json::to_value(&plan.spec).expect("a spec serializes"),
    })
}

/// A one-screen summary of a plan.
pub fn human(plan: &Plan) -> String {
    let mut out = String::new();
    let spec = &plan.spec;
    let _ = writeln!(
        out,
        "plan format {}, compiled by etc {}",
        encode::FORMAT_VERSION,
        plan.compiler_version
    );
    let _ = writeln!(out, "source sha256 {}", hex(&plan.source_digest));
    let _ = writeln!(out, "\ninbounds ({})", spec.inbounds.len());
    for i in &spec.inbounds {
        let extra = match &i.protocol {
            InboundProtocol::Socks { accounts, udp } => {
                format!("udp {}, {} accounts", on(*udp), accounts.len())
            }
            InboundProtocol::Http { accounts } => format!("{} accounts", accounts.len()),
            InboundProtocol::Trojan { passwords, .. } => format!("{} users", passwords.len()),
            InboundProtocol::Vless { ids, .. } | InboundProtocol::Vmess { ids, .. } => {
                format!("{} users", ids.len())
            }
            InboundProtocol::Shadowsocks { .. }
            | InboundProtocol::Ss2022 { .. }
            | InboundProtocol::Hysteria2 { .. } => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<16} {:<17} {}  sniff {}  {}",
            i.tag,
            i.protocol.name(),
            i.listen,
            on(i.sniff),
            extra
        );
    }
    let _ = writeln!(out, "\noutbounds ({})", spec.outbounds.len());
    for o in &spec.outbounds {
        let _ = writeln!(
            out,
            "  {:<16} {:<17} {}  drain {}",
            o.tag,
            o.protocol.name(),
            outbound_detail(&o.protocol),
            o.drain
        );
    }
    if !spec.balancers.is_empty() {
        let _ = writeln!(out, "\nbalancers ({})", spec.balancers.len());
        for b in &spec.balancers {
            let _ = writeln!(
                out,
                "  {:<16} {:<17} [{}]  probe every {} (timeout {})",
                b.tag,
                b.strategy.name(),
                b.members.join(", "),
                etemenanki_ir::format_duration(b.probe_interval),
                etemenanki_ir::format_duration(b.probe_timeout),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nroute: {} rules, default -> {}",
        spec.route.rules().len(),
        spec.route.default()
    );
    let _ = writeln!(out, "dns: {}", dns(spec));
    out
}

fn on(flag: bool) -> &'static str {
    if flag {
        "on"
    } else {
        "off"
    }
}

fn outbound_detail(p: &OutboundProtocol) -> String {
    match p {
        OutboundProtocol::Freedom { address_family } => {
            format!("address family {}", address_family.name())
        }
        OutboundProtocol::Blackhole => "drops every flow".to_owned(),
        OutboundProtocol::Hysteria2(h) => format!("{} (udp), sni {}", h.server, h.server_name),
        OutboundProtocol::Wireguard(w) => format!("{} (udp), mtu {}", w.endpoint, w.mtu),
        other => {
            let upstream = other.upstream().expect("proxy clients have an upstream");
            format!(
                "{} over {}",
                upstream.server,
                transport(&upstream.transport)
            )
        }
    }
}

fn transport(t: &TransportSpec) -> String {
    let shape = match &t.shape {
        StreamShape::Tcp | StreamShape::Tls => t.shape.name().to_owned(),
        StreamShape::Ws { path, host } => format!("ws {host}{path}"),
        StreamShape::Grpc {
            service_name,
            authority,
        } => format!("grpc {authority}/{service_name}"),
    };
    match (&t.tls, &t.shape) {
        (Some(tls), StreamShape::Tls) => format!("tls (sni {})", tls.server_name),
        (Some(tls), _) => format!("{shape} + tls (sni {})", tls.server_name),
        (None, _) => shape,
    }
}

fn dns(spec: &Spec) -> String {
    let list = |l: &[std::net::SocketAddr]| {
        l.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &spec.dns {
        DnsSpec::System => "the host's resolv.conf".to_owned(),
        DnsSpec::Single { servers } => list(servers),
        DnsSpec::Split {
            pre_proxy,
            through_proxy,
        } => {
            format!(
                "pre-proxy {}; through the proxy {}",
                list(pre_proxy),
                list(through_proxy)
            )
        }
    }
}
