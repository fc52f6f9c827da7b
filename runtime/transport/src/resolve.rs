//! Name resolution with hickory-resolver, and the address-family order a
//! dial tries candidates in.

use std::io;
use std::net::{IpAddr, SocketAddr};

use etemenanki_ir::spec::{AddressFamily, DnsSpec};
use hickory_resolver::config::{NameServerConfig, Protocol, ResolverConfig, ResolverOpts};
use hickory_resolver::error::ResolveErrorKind;
use hickory_resolver::TokioAsyncResolver;

/// A resolver shared by the outbounds of one DNS spec.
#[derive(Clone)]
pub struct Resolver {
    inner: TokioAsyncResolver,
}

/// The two resolvers of a DNS spec: `servers` looks up the proxy servers
/// outbounds and probes dial; `destinations` the destinations this process
/// connects to itself (freedom).
#[derive(Clone)]
pub struct Dns {
    pub servers: Resolver,
    pub destinations: Resolver,
}

impl Dns {
    /// Builds the resolvers of `spec`. `Split` asks its through_proxy
    /// servers directly for now: sending DNS queries through the route table
    /// arrives with the DNS issue.
    pub fn build(spec: &DnsSpec) -> io::Result<Dns> {
        Ok(match spec {
            DnsSpec::System => {
                let system = Resolver::system()?;
                Dns {
                    servers: system.clone(),
                    destinations: system,
                }
            }
            DnsSpec::Single { servers } => {
                let one = Resolver::with_servers(servers);
                Dns {
                    servers: one.clone(),
                    destinations: one,
                }
            }
            DnsSpec::Split {
                pre_proxy,
                through_proxy,
            } => Dns {
                servers: Resolver::with_servers(pre_proxy),
                destinations: Resolver::with_servers(through_proxy),
            },
        })
    }
}

impl Resolver {
    /// The host's resolv.conf and hosts file.
    pub fn system() -> io::Result<Resolver> {
        let inner = TokioAsyncResolver::tokio_from_system_conf().map_err(|e| {
            io::Error::other(format!(
                "dns: cannot read the system resolver configuration: {e}"
            ))
        })?;
        Ok(Resolver { inner })
    }

    fn with_servers(servers: &[SocketAddr]) -> Resolver {
        let mut config = ResolverConfig::new();
        for server in servers {
            config.add_name_server(NameServerConfig::new(*server, Protocol::Udp));
            config.add_name_server(NameServerConfig::new(*server, Protocol::Tcp));
        }
        Resolver {
            inner: TokioAsyncResolver::tokio(config, ResolverOpts::default()),
        }
    }

    /// The addresses of `host`; an IP literal is its own answer.
    pub async fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        if let Ok(ip) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(vec![ip]);
        }
        match self.inner.lookup_ip(host).await {
            Ok(found) => Ok(found.iter().collect()),
            Err(e) if matches!(e.kind(), ResolveErrorKind::NoRecordsFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(io::Error::other(format!("dns: {e}"))),
        }
    }
}

/// Orders candidates: auto keeps the resolver's order, the `_only` families
/// filter, the `prefer_` families sort stably so the other family stays as a
/// fallback.
pub fn order(mut ips: Vec<IpAddr>, family: AddressFamily) -> Vec<IpAddr> {
    match family {
        AddressFamily::Auto => {}
        AddressFamily::Ipv4Only => ips.retain(IpAddr::is_ipv4),
        AddressFamily::Ipv6Only => ips.retain(IpAddr::is_ipv6),
        AddressFamily::PreferIpv4 => ips.sort_by_key(|ip| !ip.is_ipv4()),
        AddressFamily::PreferIpv6 => ips.sort_by_key(|ip| !ip.is_ipv6()),
    }
    ips
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn families_filter_or_sort_stably() {
        let all = ips(&["::1", "127.0.0.1", "::2", "127.0.0.2"]);
        assert_eq!(order(all.clone(), AddressFamily::Auto), all);
        assert_eq!(
            order(all.clone(), AddressFamily::Ipv4Only),
            ips(&["127.0.0.1", "127.0.0.2"])
        );
        assert_eq!(
            order(all.clone(), AddressFamily::Ipv6Only),
            ips(&["::1", "::2"])
        );
        assert_eq!(
            order(all.clone(), AddressFamily::PreferIpv4),
            ips(&["127.0.0.1", "127.0.0.2", "::1", "::2"])
        );
        assert_eq!(
            order(all, AddressFamily::PreferIpv6),
            ips(&["::1", "::2", "127.0.0.1", "127.0.0.2"])
        );
    }
}
