//! Two inbounds may not listen on the same address and port. A wildcard
//! address conflicts with every address of its family on that port.

use etemenanki_ir::spec::Spec;

use crate::codes;
use crate::config::Config;
use crate::diagnostic::Diagnostic;

pub fn check(config: &Config, spec: &Spec, diags: &mut Vec<Diagnostic>) {
    for (i, a) in spec.inbounds.iter().enumerate() {
        let Some((j, b)) = spec.inbounds[..i]
            .iter()
            .enumerate()
            .find(|(_, b)| overlap(a.listen, b.listen))
        else {
            continue;
        };
        let here = config.inbounds[i].get_ref();
        let there = config.inbounds[j].get_ref();
        let span = |i: &crate::config::Inbound| {
            i.listen.as_ref().map_or(i.port.span(), |l| {
                l.span().start..i.port.span().end.max(l.span().end)
            })
        };
        diags.push(
            Diagnostic::error(
                codes::LISTEN_CONFLICT,
                span(here),
                format!(
                    "inbounds {} and {} both listen on {}",
                    b.tag, a.tag, a.listen
                ),
            )
            .with_label(format!("{} listens here", a.tag))
            .with_secondary(
                span(there),
                format!("{} already listens on {}", b.tag, b.listen),
            )
            .with_help("give each inbound its own port"),
        );
    }
}

fn overlap(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.port() == b.port()
        && a.is_ipv4() == b.is_ipv4()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}
