//! Name resolution: the two resolvers of a DNS spec, each a list of
//! upstream servers asked in order, a cache in front of them, and a carrier
//! that moves the queries (directly, or through the route table). Messages
//! are hickory's; nothing here parses DNS by hand.

pub mod cache;
mod carrier;
mod upstream;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etemenanki_ir::spec::{AddressFamily, DnsServer, DnsSpec};
use hickory_resolver::proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use hickory_resolver::Hosts;

use cache::{Answer, Cache, Outcome};
pub use carrier::{answers, BoxFuture, Carrier, Direct, DnsStream, MAX_MESSAGE};
pub use upstream::exchange_framed;
use upstream::Upstream;

/// How long one server has to answer before the next is asked.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How many answers each resolver keeps.
pub const CACHE_SIZE: usize = 4096;
/// The UDP payload our queries say they accept (the DNS flag day's 1232).
const EDNS_PAYLOAD: u16 = 1232;

tokio::task_local! {
    /// The resolver whose query this task is carrying through the route
    /// table: a lookup on the same resolver from inside it would loop.
    static CARRYING: u64;
}

/// A resolver shared by the outbounds of one DNS spec. Cloning shares it,
/// its cache included.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    /// Distinguishes resolvers for the loop check.
    id: u64,
    servers: Vec<Upstream>,
    carrier: Arc<dyn Carrier>,
    /// Whether the carrier routes: a lookup from inside its own query is
    /// then refused.
    routed: bool,
    /// The host's hosts file, for the system resolver.
    hosts: Option<Hosts>,
    cache: Cache,
}

/// The two resolvers of a DNS spec: `servers` looks up the proxy servers
/// outbounds and probes dial; `destinations` the destinations this process
/// connects to itself (freedom), and answers the DNS service.
#[derive(Clone)]
pub struct Dns {
    pub servers: Resolver,
    pub destinations: Resolver,
}

impl Dns {
    /// Builds the resolvers of `spec`: `direct` carries what is asked
    /// directly, `routed` the through_proxy queries of a split spec.
    pub fn build(
        spec: &DnsSpec,
        direct: Arc<dyn Carrier>,
        routed: Arc<dyn Carrier>,
    ) -> io::Result<Dns> {
        Ok(match spec {
            DnsSpec::System => {
                let system = Resolver::system(direct)?;
                Dns {
                    servers: system.clone(),
                    destinations: system,
                }
            }
            DnsSpec::Single { servers } => {
                let one = Resolver::new(servers, direct, false)?;
                Dns {
                    servers: one.clone(),
                    destinations: one,
                }
            }
            DnsSpec::Split {
                pre_proxy,
                through_proxy,
            } => Dns {
                servers: Resolver::new(pre_proxy, direct, false)?,
                destinations: Resolver::new(through_proxy, routed, true)?,
            },
        })
    }
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Resolver {
    fn new(servers: &[DnsServer], carrier: Arc<dyn Carrier>, routed: bool) -> io::Result<Resolver> {
        let servers = servers
            .iter()
            .map(Upstream::build)
            .collect::<io::Result<_>>()?;
        Ok(Resolver::with(servers, carrier, routed, None))
    }

    fn with(
        servers: Vec<Upstream>,
        carrier: Arc<dyn Carrier>,
        routed: bool,
        hosts: Option<Hosts>,
    ) -> Resolver {
        Resolver {
            inner: Arc::new(Inner {
                id: next_id(),
                servers,
                carrier,
                routed,
                hosts,
                cache: Cache::new(CACHE_SIZE),
            }),
        }
    }

    /// The host's resolv.conf servers (plain DNS) and its hosts file.
    pub fn system(carrier: Arc<dyn Carrier>) -> io::Result<Resolver> {
        let (config, _) = hickory_resolver::system_conf::read_system_conf().map_err(|e| {
            io::Error::other(format!(
                "dns: cannot read the system resolver configuration: {e}"
            ))
        })?;
        let mut servers = Vec::new();
        for server in config.name_servers() {
            if !servers.contains(&server.socket_addr) {
                servers.push(server.socket_addr);
            }
        }
        let servers = servers.into_iter().map(Upstream::Plain).collect();
        Ok(Resolver::with(servers, carrier, false, Some(Hosts::new())))
    }

    /// The addresses of `host` in either family; an IP literal is its own
    /// answer.
    pub async fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        self.lookup_family(host, AddressFamily::Auto).await
    }

    /// The addresses of `host` a dial under `family` may use: an `_only`
    /// family asks for its records alone; the others ask for both (the
    /// other family stays as a fallback), A before AAAA in the result.
    pub async fn lookup_family(
        &self,
        host: &str,
        family: AddressFamily,
    ) -> io::Result<Vec<IpAddr>> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        // On the heap: the queries' future is kilobytes, which every
        // future that may resolve a name (routing, every dial) would carry,
        // and move, when it has an address to go to.
        Box::pin(self.lookup_name(host, family)).await
    }

    /// [`Resolver::lookup_family`] for a name that is no IP literal.
    async fn lookup_name(&self, host: &str, family: AddressFamily) -> io::Result<Vec<IpAddr>> {
        let name = Name::from_ascii(host).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("dns: {host}: {e}"))
        })?;
        let v4 = !matches!(family, AddressFamily::Ipv6Only);
        let v6 = !matches!(family, AddressFamily::Ipv4Only);
        let (a, aaaa) = tokio::join!(
            async {
                match v4 {
                    true => Some(self.query(&name, RecordType::A).await),
                    false => None,
                }
            },
            async {
                match v6 {
                    true => Some(self.query(&name, RecordType::AAAA).await),
                    false => None,
                }
            }
        );
        let mut found = Vec::new();
        let mut failed = None;
        for outcome in [a, aaaa].into_iter().flatten() {
            match outcome {
                Ok(answer) => found.extend(answer.addresses()),
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            // One family failing is no failure while the other answered.
            Some(e) if found.is_empty() => Err(e),
            _ => Ok(found),
        }
    }

    /// The answer for `name` and `rtype`: from the cache while it holds,
    /// else from the first server that answers (each within
    /// [`QUERY_TIMEOUT`]), one query upstream however many ask at once.
    /// `localhost` and its subdomains are loopback (RFC 6761).
    pub async fn query(&self, name: &Name, rtype: RecordType) -> io::Result<Arc<Answer>> {
        let mut name = name.to_lowercase();
        name.set_fqdn(true);
        let now = Instant::now();
        if let Some(answer) = local(&name, rtype, now) {
            return Ok(Arc::new(answer));
        }
        if self.inner.routed
            && CARRYING
                .try_with(|id| *id == self.inner.id)
                .unwrap_or(false)
        {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "dns: refusing a query that loops back into its own resolver",
            ));
        }
        if let Some(answer) = self.hosts(&name, rtype, now) {
            return Ok(Arc::new(answer));
        }
        let key = (name, rtype);
        let flight = match self.inner.cache.get(&key, now) {
            Ok(answer) => return Ok(answer),
            Err(flight) => flight,
        };
        let outcome: Outcome = flight
            .get_or_init(|| async {
                self.ask(&key.0, rtype)
                    .await
                    .map(Arc::new)
                    .map_err(Into::into)
            })
            .await
            .clone();
        self.inner.cache.finish(&key, &flight, &outcome);
        outcome.map_err(Into::into)
    }

    fn hosts(&self, name: &Name, rtype: RecordType, now: Instant) -> Option<Answer> {
        let hosts = self.inner.hosts.as_ref()?;
        let found = hosts.lookup_static_host(&Query::query(name.clone(), rtype))?;
        let records = found.records().to_vec();
        Some(Answer::new(ResponseCode::NoError, records, None, now))
    }

    /// Asks the servers in order until one answers.
    async fn ask(&self, name: &Name, rtype: RecordType) -> io::Result<Answer> {
        let query = encode_query(name, rtype)?;
        let mut failures = Vec::new();
        for server in &self.inner.servers {
            let exchange = server.exchange(self.inner.carrier.as_ref(), &query);
            let carried = async {
                match self.inner.routed {
                    true => CARRYING.scope(self.inner.id, exchange).await,
                    false => exchange.await,
                }
            };
            let answer = match tokio::time::timeout(QUERY_TIMEOUT, carried).await {
                Ok(Ok(bytes)) => decode_answer(&bytes, name, rtype),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")),
            };
            match answer {
                Ok(answer) => return Ok(answer),
                Err(e) => {
                    tracing::debug!("dns: {name} {rtype} from {}: {e}", server.name());
                    failures.push(format!("{}: {e}", server.name()));
                }
            }
        }
        if failures.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("dns: no server to ask for {name}"),
            ));
        }
        Err(io::Error::other(format!(
            "dns: no server answered for {name} ({})",
            failures.join("; ")
        )))
    }
}

/// `localhost.` and `*.localhost.`: loopback, never asked upstream. `name`
/// is in lower case.
fn local(name: &Name, rtype: RecordType, now: Instant) -> Option<Answer> {
    if name.iter().next_back() != Some(b"localhost".as_slice()) {
        return None;
    }
    let data = match rtype {
        RecordType::A => RData::A(Ipv4Addr::LOCALHOST.into()),
        RecordType::AAAA => RData::AAAA(Ipv6Addr::LOCALHOST.into()),
        _ => return Some(Answer::new(ResponseCode::NoError, vec![], None, now)),
    };
    let record = Record::from_rdata(name.clone(), 0, data);
    Some(Answer::new(ResponseCode::NoError, vec![record], None, now))
}

/// A recursive query for `name` and `rtype` with a random id.
fn encode_query(name: &Name, rtype: RecordType) -> io::Result<Vec<u8>> {
    let mut id = [0u8; 2];
    openssl::rand::rand_bytes(&mut id).map_err(|e| io::Error::other(format!("dns: {e}")))?;
    let mut message = Message::new();
    message
        .set_id(u16::from_be_bytes(id))
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name.clone(), rtype));
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    message.set_edns(edns);
    message
        .to_vec()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("dns: {e}")))
}

/// The answer in `bytes` to the query for `name` and `rtype`: NOERROR and
/// NXDOMAIN are answers; any other code is this server's failure.
fn decode_answer(bytes: &[u8], name: &Name, rtype: RecordType) -> io::Result<Answer> {
    let message = Message::from_vec(bytes).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("malformed answer: {e}"))
    })?;
    let asked = message
        .queries()
        .first()
        .is_some_and(|q| q.query_type() == rtype && q.name().to_lowercase() == *name);
    if message.message_type() != MessageType::Response || !asked {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the answer is not for the query",
        ));
    }
    let rcode = message.response_code();
    if !matches!(rcode, ResponseCode::NoError | ResponseCode::NXDomain) {
        return Err(io::Error::other(format!("the server answered {rcode}")));
    }
    let mut message = message;
    let records = message.take_answers();
    let soa = message
        .take_name_servers()
        .into_iter()
        .find(|r| r.record_type() == RecordType::SOA);
    Ok(Answer::new(rcode, records, soa, Instant::now()))
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

#[cfg(test)]
mod resolver_tests {
    use std::sync::Mutex;

    use arc_swap::ArcSwap;
    use etemenanki_ir::spec::{Limits, SocketPolicy};
    use hickory_resolver::proto::rr::rdata::{A, AAAA};
    use tokio::net::UdpSocket;

    use super::*;
    use crate::dial::Dialer;

    /// A loopback DNS server answering every A with 192.0.2.1 and every
    /// AAAA with 2001:db8::1 (TTL 60) after `delay`; it records the type
    /// of every query it hears.
    async fn server(delay: Duration) -> (std::net::SocketAddr, Arc<Mutex<Vec<RecordType>>>) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            loop {
                let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                let query = Message::from_vec(&buf[..n]).unwrap();
                let question = query.queries()[0].clone();
                log.lock().unwrap().push(question.query_type());
                let data = match question.query_type() {
                    RecordType::A => RData::A(A::new(192, 0, 2, 1)),
                    _ => RData::AAAA(AAAA::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
                };
                let mut answer = Message::new();
                answer
                    .set_id(query.id())
                    .set_message_type(MessageType::Response)
                    .add_query(question.clone())
                    .add_answer(Record::from_rdata(question.name().clone(), 60, data));
                tokio::time::sleep(delay).await;
                socket
                    .send_to(&answer.to_vec().unwrap(), from)
                    .await
                    .unwrap();
            }
        });
        (addr, heard)
    }

    fn resolver(server: std::net::SocketAddr) -> Resolver {
        let limits = Arc::new(ArcSwap::from_pointee(Limits::default()));
        let direct: Arc<dyn Carrier> =
            Arc::new(Direct::new(Dialer::new(SocketPolicy::default(), limits)));
        let spec = DnsSpec::Single {
            servers: vec![DnsServer::Plain(server)],
        };
        Dns::build(&spec, direct.clone(), direct)
            .unwrap()
            .destinations
    }

    #[tokio::test]
    async fn an_only_family_asks_for_its_records_alone_and_auto_for_both() {
        let (addr, heard) = server(Duration::ZERO).await;
        let resolver = resolver(addr);
        let v4 = resolver
            .lookup_family("v4.test", AddressFamily::Ipv4Only)
            .await
            .unwrap();
        assert_eq!(v4, [IpAddr::from([192, 0, 2, 1])]);
        assert_eq!(*heard.lock().unwrap(), [RecordType::A]);
        let v6 = resolver
            .lookup_family("v6.test", AddressFamily::Ipv6Only)
            .await
            .unwrap();
        assert_eq!(v6, ["2001:db8::1".parse::<IpAddr>().unwrap()]);
        let both = resolver.lookup("both.test").await.unwrap();
        assert_eq!(
            both,
            [
                "192.0.2.1".parse::<IpAddr>().unwrap(),
                "2001:db8::1".parse().unwrap()
            ]
        );
        assert_eq!(heard.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn many_askers_of_one_name_share_one_query_and_then_the_cache() {
        let (addr, heard) = server(Duration::from_millis(100)).await;
        let resolver = resolver(addr);
        let askers: Vec<_> = (0..10)
            .map(|_| {
                let resolver = resolver.clone();
                tokio::spawn(async move {
                    resolver
                        .lookup_family("one.test", AddressFamily::Ipv4Only)
                        .await
                })
            })
            .collect();
        for asker in askers {
            assert_eq!(
                asker.await.unwrap().unwrap(),
                [IpAddr::from([192, 0, 2, 1])]
            );
        }
        let again = resolver
            .lookup_family("ONE.test", AddressFamily::Ipv4Only)
            .await
            .unwrap();
        assert_eq!(again, [IpAddr::from([192, 0, 2, 1])]);
        assert_eq!(heard.lock().unwrap().len(), 1, "one query upstream");
    }

    #[tokio::test]
    async fn an_ip_literal_is_its_own_answer_from_a_future_of_a_few_words() {
        let resolver = resolver("127.0.0.1:9".parse().unwrap());
        // A name's queries wait on the heap: every future that may
        // resolve a name (routing, each dial) would otherwise carry and
        // move their kilobytes when it has an address to go to.
        let lookup = resolver.lookup("[::1]");
        assert!(
            std::mem::size_of_val(&lookup) <= 128,
            "{}",
            std::mem::size_of_val(&lookup)
        );
        assert_eq!(lookup.await.unwrap(), ["::1".parse::<IpAddr>().unwrap()]);
        assert_eq!(
            resolver
                .lookup_family("192.0.2.7", AddressFamily::Ipv6Only)
                .await
                .unwrap(),
            [IpAddr::from([192, 0, 2, 7])]
        );
    }

    #[tokio::test]
    async fn localhost_is_loopback_without_asking_anyone() {
        let resolver = resolver("127.0.0.1:9".parse().unwrap());
        let found = resolver.lookup("api.localhost").await.unwrap();
        assert_eq!(
            found,
            [IpAddr::from([127, 0, 0, 1]), "::1".parse().unwrap()]
        );
    }
}
