//! The connector of one outbound version: the endpoint is a proxy server,
//! resolved with the `servers` resolver when the tunnel starts; what is
//! reached inside the tunnel is a destination this process resolves
//! itself, with `destinations`, keeping only the families the tunnel has
//! local addresses in (the userspace stack has no routing table to ask).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use etemenanki_ir::spec::{AddressFamily, WireguardSpec};
use etemenanki_proto::Address;
use etemenanki_transport::dial::Dialer;
use etemenanki_transport::resolve::{order, Resolver};

use crate::slot::Slot;
use crate::{Tunnel, WgStream, WgUdp};

/// One TCP connect inside the tunnel, per resolved address.
pub const TCP_CONNECT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct WgConnector {
    spec: Arc<WireguardSpec>,
    slot: Arc<Slot<Tunnel>>,
    dialer: Dialer,
    servers: Resolver,
    destinations: Resolver,
}

/// The families the tunnel-local addresses cover.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FamilySupport {
    v4: bool,
    v6: bool,
}

impl FamilySupport {
    pub(crate) fn from_addrs(addrs: &[IpAddr]) -> FamilySupport {
        FamilySupport {
            v4: addrs.iter().any(IpAddr::is_ipv4),
            v6: addrs.iter().any(IpAddr::is_ipv6),
        }
    }

    fn allows(self, ip: &IpAddr) -> bool {
        if ip.is_ipv4() {
            self.v4
        } else {
            self.v6
        }
    }

    /// What an error says when these families ruled the candidates out.
    fn note(self) -> &'static str {
        match (self.v4, self.v6) {
            (true, false) => " (local address supports IPv4 only)",
            (false, true) => " (local address supports IPv6 only)",
            _ => "",
        }
    }
}

impl WgConnector {
    /// Builds the connector; nothing is resolved, bound or sent until the
    /// first flow.
    pub fn new(
        spec: &WireguardSpec,
        dialer: Dialer,
        servers: Resolver,
        destinations: Resolver,
    ) -> WgConnector {
        WgConnector {
            spec: Arc::new(spec.clone()),
            slot: Arc::new(Slot::default()),
            dialer,
            servers,
            destinations,
        }
    }

    /// The tunnel, started on the first flow and after it stopped.
    pub async fn tunnel(&self) -> io::Result<Arc<Tunnel>> {
        self.slot.acquire(|| self.start()).await
    }

    async fn start(&self) -> io::Result<Tunnel> {
        let spec = &self.spec;
        if spec.addresses.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "wireguard: no tunnel-local addresses configured",
            ));
        }
        let host = spec.endpoint.host.name();
        let found = self.servers.lookup(&host).await?;
        let ip = order(found, spec.endpoint_address_family)
            .into_iter()
            .next()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "wireguard: endpoint domain did not resolve",
                )
            })?;
        let endpoint = SocketAddr::new(ip, spec.endpoint.port);
        let udp = self.dialer.bind_udp(ip.is_ipv6())?;
        udp.connect(endpoint).await?;
        let tunnel = Tunnel::start(spec, udp, endpoint)?;
        tracing::info!("wireguard: tunnel to {endpoint} started");
        Ok(tunnel)
    }

    /// The addresses to try for `destination`, in the address family's
    /// order, inside the tunnel's families. `resolved` holds what routing
    /// resolved a name to, if it did.
    pub async fn candidates(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
    ) -> io::Result<Vec<SocketAddr>> {
        let (found, port) = match destination {
            Address::Ip(addr) => (vec![addr.ip()], addr.port()),
            Address::Domain(host, port) => match resolved {
                Some(addresses) => (addresses.to_vec(), *port),
                None => (self.destinations.lookup(host).await?, *port),
            },
        };
        usable(
            found,
            destination,
            port,
            self.spec.address_family,
            FamilySupport::from_addrs(&self.spec.addresses),
        )
    }

    /// Opens a TCP flow: the candidates in order, each connect bounded by
    /// [`TCP_CONNECT_ATTEMPT_TIMEOUT`].
    pub async fn connect(
        &self,
        destination: &Address,
        resolved: Option<&[IpAddr]>,
    ) -> io::Result<WgStream> {
        let tunnel = self.tunnel().await?;
        let candidates = self.candidates(destination, resolved).await?;
        let mut failures = Vec::new();
        for addr in candidates {
            match tokio::time::timeout(TCP_CONNECT_ATTEMPT_TIMEOUT, tunnel.connect_tcp(addr)).await
            {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => failures.push(format!("{}: {e}", addr.ip())),
                Err(_) => failures.push(format!("{}: connect timed out", addr.ip())),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "wireguard: tunnel TCP connect failed for all resolved addresses ({})",
                failures.join("; ")
            ),
        ))
    }

    /// Opens a UDP link inside the tunnel.
    pub async fn associate(&self) -> io::Result<WgUdp> {
        self.tunnel().await?.open_udp()
    }

    /// The address a datagram for `host:port` goes to: the first usable one.
    pub async fn resolve_datagram(&self, host: &str, port: u16) -> io::Result<IpAddr> {
        let destination = Address::Domain(host.to_owned(), port);
        let found = self.destinations.lookup(host).await?;
        usable(
            found,
            &destination,
            port,
            self.spec.address_family,
            FamilySupport::from_addrs(&self.spec.addresses),
        )?
        .first()
        .map(SocketAddr::ip)
        .ok_or_else(|| io::Error::other("wireguard: destination did not resolve"))
    }
}

/// Orders `found` by `family` and keeps what the tunnel carries.
fn usable(
    found: Vec<IpAddr>,
    destination: &Address,
    port: u16,
    family: AddressFamily,
    support: FamilySupport,
) -> io::Result<Vec<SocketAddr>> {
    if found.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "wireguard: destination did not resolve",
        ));
    }
    let ordered = order(found, family);
    let no_usable = |note: &str| {
        let target = match destination {
            Address::Ip(addr) => addr.to_string(),
            Address::Domain(host, _) => format!("{host}:{port}"),
        };
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "wireguard: no usable {} destination address for {target}{note}",
                family.name()
            ),
        )
    };
    if ordered.is_empty() {
        return Err(no_usable(""));
    }
    let carried: Vec<SocketAddr> = ordered
        .into_iter()
        .filter(|ip| support.allows(ip))
        .map(|ip| SocketAddr::new(ip, port))
        .collect();
    if carried.is_empty() {
        return Err(no_usable(support.note()));
    }
    Ok(carried)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn named() -> Address {
        Address::Domain("example.com".into(), 443)
    }

    #[test]
    fn destinations_outside_the_tunnels_families_are_dropped_and_the_error_says_why() {
        let v4_only = FamilySupport::from_addrs(&ips(&["10.0.0.2"]));
        let found = ips(&["2001:db8::1", "192.0.2.1"]);
        let kept = usable(found, &named(), 443, AddressFamily::Auto, v4_only).unwrap();
        assert_eq!(kept, ["192.0.2.1:443".parse().unwrap()]);

        let e = usable(
            ips(&["2001:db8::1"]),
            &named(),
            443,
            AddressFamily::Auto,
            v4_only,
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable);
        assert_eq!(
            e.to_string(),
            "wireguard: no usable auto destination address for example.com:443 \
             (local address supports IPv4 only)"
        );

        let v6_only = FamilySupport::from_addrs(&ips(&["fd00::2"]));
        let literal = Address::Ip("192.0.2.1:80".parse().unwrap());
        let e = usable(
            ips(&["192.0.2.1"]),
            &literal,
            80,
            AddressFamily::Auto,
            v6_only,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("for 192.0.2.1:80 (local address supports IPv6 only)"),
            "{e}"
        );
    }

    #[test]
    fn the_address_family_filters_before_the_tunnel_and_names_itself() {
        let both = FamilySupport::from_addrs(&ips(&["10.0.0.2", "fd00::2"]));
        let e = usable(
            ips(&["192.0.2.1"]),
            &named(),
            443,
            AddressFamily::Ipv6Only,
            both,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "wireguard: no usable {} destination address for example.com:443",
                AddressFamily::Ipv6Only.name()
            )
        );
        let e = usable(Vec::new(), &named(), 443, AddressFamily::Auto, both).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), "wireguard: destination did not resolve");
        let preferred = usable(
            ips(&["192.0.2.1", "2001:db8::1"]),
            &named(),
            443,
            AddressFamily::PreferIpv6,
            both,
        )
        .unwrap();
        assert!(preferred[0].is_ipv6());
    }
}
