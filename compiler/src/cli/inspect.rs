//! `etc inspect plan.bin`: what a plan holds, secrets masked.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use etemenanki_ir::encode::{self, Plan};
use etemenanki_ir::file::{read_regular, PLAN_LIMIT};
use etemenanki_ir::spec::{
    DnsSpec, InboundProtocol, InboundTransport, OutboundProtocol, ServerShape, ServerTls, Spec,
    StreamShape, TransportSpec,
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
        let extra = inbound_detail(&i.protocol);
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
        "\nroute: {} rules, default -> {}, domain strategy {}",
        spec.route.rules().len(),
        spec.route.default(),
        spec.route.domain_strategy()
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

fn inbound_detail(p: &InboundProtocol) -> String {
    match p {
        InboundProtocol::Socks { accounts, udp, tls } => format!(
            "udp {}, {} accounts{}",
            on(*udp),
            accounts.len(),
            over_tls(tls.as_ref())
        ),
        InboundProtocol::Http { accounts, tls } => {
            format!("{} accounts{}", accounts.len(), over_tls(tls.as_ref()))
        }
        InboundProtocol::Trojan {
            passwords,
            transport,
            fallback,
        } => format!(
            "{} users over {}{}",
            passwords.len(),
            server_transport(transport),
            fallback_to(*fallback)
        ),
        InboundProtocol::Vless {
            ids,
            transport,
            fallback,
        } => format!(
            "{} users over {}{}",
            ids.len(),
            server_transport(transport),
            fallback_to(*fallback)
        ),
        InboundProtocol::Vmess { ids, transport } => {
            format!("{} users over {}", ids.len(), server_transport(transport))
        }
        InboundProtocol::Hysteria2 { tls, .. } => format!("quic, {}", server_tls(tls)),
        InboundProtocol::Shadowsocks { udp, .. } => format!("udp {}", on(*udp)),
        InboundProtocol::Ss2022 { users, udp, .. } => {
            format!("udp {}, {} users", on(*udp), users.len())
        }
        InboundProtocol::Dns => "udp and tcp, answered by the DNS service".to_owned(),
    }
}

/// `, fallback <address>` after the transport of a trojan or vless inbound.
fn fallback_to(fallback: Option<SocketAddr>) -> String {
    fallback.map_or_else(String::new, |addr| format!(", fallback {addr}"))
}

/// `, over tls (...)` after the settings of an inbound serving TLS on TCP.
fn over_tls(tls: Option<&ServerTls>) -> String {
    tls.map_or_else(String::new, |tls| format!(", over {}", server_tls(tls)))
}

fn server_transport(t: &InboundTransport) -> String {
    let shape = match &t.shape {
        ServerShape::Tcp => "tcp".to_owned(),
        ServerShape::Ws { path, host: None } => format!("ws {path}"),
        ServerShape::Ws {
            path,
            host: Some(host),
        } => format!("ws {path} (host {host})"),
        ServerShape::Grpc { service_name } => format!("grpc {service_name}"),
    };
    match (&t.tls, &t.shape) {
        (Some(tls), ServerShape::Tcp) => server_tls(tls),
        (Some(tls), _) => format!("{shape} + {}", server_tls(tls)),
        (None, _) => shape,
    }
}

/// The certificate's path and the ALPN list; never the key.
fn server_tls(tls: &ServerTls) -> String {
    if tls.alpn.is_empty() {
        format!("tls (cert {})", tls.cert_path)
    } else {
        format!("tls (cert {}, alpn {})", tls.cert_path, tls.alpn.join(" "))
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
        StreamShape::Ws {
            path,
            host,
            early_data: None,
        } => format!("ws {host}{path}"),
        StreamShape::Ws {
            path,
            host,
            early_data: Some(early),
        } => format!(
            "ws {host}{path} (early data {} bytes in {})",
            early.max, early.header
        ),
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
    let list = |l: &[etemenanki_ir::spec::DnsServer]| {
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
