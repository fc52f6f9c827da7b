//! Two inbounds may not listen on the same address and port. A wildcard
//! address conflicts with every address of its family on that port.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::Checked;
use crate::codes;
use crate::config::Inbound;
use crate::diagnostic::Diagnostic;

pub(super) fn check(checked: &Checked, diags: &mut Vec<Diagnostic>) {
    let inbounds = &checked.spec.inbounds;
    let listens: Vec<SocketAddr> = inbounds.iter().map(|i| i.listen).collect();
    for (i, earlier) in first_conflicts(&listens).into_iter().enumerate() {
        let Some(j) = earlier else { continue };
        let (a, b) = (&inbounds[i], &inbounds[j]);
        let here = checked.config.inbounds[checked.origins.inbounds[i]].get_ref();
        let there = checked.config.inbounds[checked.origins.inbounds[j]].get_ref();
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

/// Where an inbound says where it listens: its listen address and port.
fn span(inbound: &Inbound) -> std::ops::Range<usize> {
    inbound.listen.as_ref().map_or(inbound.port.span(), |l| {
        l.span().start..inbound.port.span().end.max(l.span().end)
    })
}

/// The addresses seen so far on one port and address family.
struct Port {
    /// The first of them.
    first: usize,
    /// The first that is the wildcard address.
    wildcard: Option<usize>,
    /// The first on each address.
    by_ip: HashMap<IpAddr, usize>,
}

/// For each address, the first one before it that it conflicts with, in
/// one pass.
fn first_conflicts(listens: &[SocketAddr]) -> Vec<Option<usize>> {
    let mut ports: HashMap<(u16, bool), Port> = HashMap::new();
    let mut found = Vec::with_capacity(listens.len());
    for (i, listen) in listens.iter().enumerate() {
        let ip = listen.ip();
        let port = ports
            .entry((listen.port(), listen.is_ipv4()))
            .or_insert_with(|| Port {
                first: i,
                wildcard: None,
                by_ip: HashMap::new(),
            });
        found.push(if port.first == i {
            None
        } else if ip.is_unspecified() {
            Some(port.first)
        } else {
            port.by_ip
                .get(&ip)
                .copied()
                .into_iter()
                .chain(port.wildcard)
                .min()
        });
        if ip.is_unspecified() {
            port.wildcard.get_or_insert(i);
        }
        port.by_ip.entry(ip).or_insert(i);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: the same port and family, and the same address or
    /// either one the wildcard.
    fn overlap(a: SocketAddr, b: SocketAddr) -> bool {
        a.port() == b.port()
            && a.is_ipv4() == b.is_ipv4()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    }

    #[test]
    fn the_first_conflict_found_in_one_pass_is_the_first_by_definition() {
        let addresses: Vec<SocketAddr> = ["127.0.0.1", "0.0.0.0", "10.0.0.1", "::1", "::"]
            .iter()
            .flat_map(|ip| [1u16, 2].map(|port| SocketAddr::new(ip.parse().unwrap(), port)))
            .collect();
        // Every sequence of four of the ten addresses.
        let n = addresses.len();
        for mut code in 0..n.pow(4) {
            let listens: Vec<SocketAddr> = (0..4)
                .map(|_| {
                    let address = addresses[code % n];
                    code /= n;
                    address
                })
                .collect();
            let expected: Vec<Option<usize>> = (0..listens.len())
                .map(|i| (0..i).find(|&j| overlap(listens[i], listens[j])))
                .collect();
            assert_eq!(first_conflicts(&listens), expected, "{listens:?}");
        }
    }
}
