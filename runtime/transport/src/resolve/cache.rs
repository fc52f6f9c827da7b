//! The answers a resolver keeps: each for its TTL, negative answers for the
//! SOA minimum (RFC 2308), at most `capacity` of them, the least recently
//! used first out; and the queries in flight, so many clients asking one
//! name at once make one query upstream. Time is passed in.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use lru_cache::LruCache;
use tokio::sync::OnceCell;

/// The longest any answer is kept, whatever its TTL says (a day, as
/// unbound's default `cache-max-ttl`).
const MAX_TTL: Duration = Duration::from_secs(86_400);

/// What a cache entry is found by: the name in lower case and the type.
pub type Key = (Name, RecordType);

/// An answer from upstream, kept as it came.
#[derive(Debug)]
pub struct Answer {
    /// `NoError` or `NXDomain`; anything else is an error, never kept.
    pub rcode: ResponseCode,
    /// The answer section: the records asked for, and the CNAMEs that lead
    /// to them.
    pub records: Vec<Record>,
    /// The SOA of a negative answer (NXDOMAIN or no records).
    pub soa: Option<Record>,
    /// When it came, and for how long it holds.
    pub received: Instant,
    pub ttl: Duration,
}

impl Answer {
    /// An answer from upstream: it holds for the smallest TTL of its
    /// records; a negative one for the SOA's minimum (or the SOA record's
    /// own TTL if that is smaller), and not at all without an SOA.
    pub fn new(
        rcode: ResponseCode,
        records: Vec<Record>,
        soa: Option<Record>,
        now: Instant,
    ) -> Answer {
        let ttl = if records.is_empty() {
            soa.as_ref().map_or(0, |soa| match soa.data() {
                Some(RData::SOA(data)) => data.minimum().min(soa.ttl()),
                _ => 0,
            })
        } else {
            records.iter().map(Record::ttl).min().unwrap_or(0)
        };
        Answer {
            rcode,
            records,
            soa,
            received: now,
            ttl: Duration::from_secs(u64::from(ttl)).min(MAX_TTL),
        }
    }

    /// Whether it still holds at `now`.
    pub fn fresh(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.received) < self.ttl
    }

    /// The seconds left of a TTL of `ttl` seconds at `now`, as a cached
    /// answer is served.
    pub fn remaining(&self, ttl: u32, now: Instant) -> u32 {
        let elapsed = now.saturating_duration_since(self.received).as_secs();
        u32::try_from(u64::from(ttl).saturating_sub(elapsed)).unwrap_or(0)
    }

    /// The addresses among the records.
    pub fn addresses(&self) -> impl Iterator<Item = std::net::IpAddr> + '_ {
        self.records.iter().filter_map(|r| match r.data() {
            Some(RData::A(a)) => Some(std::net::IpAddr::V4(a.0)),
            Some(RData::AAAA(aaaa)) => Some(std::net::IpAddr::V6(aaaa.0)),
            _ => None,
        })
    }
}

/// The error of a failed query, kept for the callers that waited on it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub kind: io::ErrorKind,
    pub text: String,
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure {
            kind: e.kind(),
            text: e.to_string(),
        }
    }
}

impl From<Failure> for io::Error {
    fn from(f: Failure) -> io::Error {
        io::Error::new(f.kind, f.text)
    }
}

pub type Outcome = Result<Arc<Answer>, Failure>;

/// One query in flight: whoever asks the same name while it runs waits on it.
pub type InFlight = Arc<OnceCell<Outcome>>;

pub struct Cache {
    state: Mutex<State>,
}

struct State {
    answers: LruCache<Key, Arc<Answer>>,
    in_flight: HashMap<Key, InFlight>,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            state: Mutex::new(State {
                answers: LruCache::new(capacity.max(1)),
                in_flight: HashMap::new(),
            }),
        }
    }

    /// The answer kept for `key` if it still holds at `now` (an expired one
    /// is dropped), or else the query in flight for it, joined or started.
    pub fn get(&self, key: &Key, now: Instant) -> Result<Arc<Answer>, InFlight> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.answers.get_mut(key) {
            Some(answer) if answer.fresh(now) => return Ok(answer.clone()),
            Some(_) => {
                state.answers.remove(key);
            }
            None => {}
        }
        Err(state.in_flight.entry(key.clone()).or_default().clone())
    }

    /// The query `flight` for `key` is done: it is no longer in flight, and
    /// its answer is kept if it holds for any time at all.
    pub fn finish(&self, key: &Key, flight: &InFlight, outcome: &Outcome) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state
            .in_flight
            .get(key)
            .is_some_and(|f| Arc::ptr_eq(f, flight))
        {
            state.in_flight.remove(key);
        }
        if let Ok(answer) = outcome {
            if !answer.ttl.is_zero() {
                state.answers.insert(key.clone(), answer.clone());
            }
        }
    }

    /// How many answers are kept.
    #[cfg(test)]
    pub fn kept(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.answers.len()
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use hickory_resolver::proto::rr::rdata::{A, SOA};

    use super::*;

    fn name(text: &str) -> Name {
        Name::from_str(text).unwrap()
    }

    fn a(ttl: u32) -> Record {
        Record::from_rdata(name("a.test."), ttl, RData::A(A::new(192, 0, 2, 1)))
    }

    fn soa(ttl: u32, minimum: u32) -> Record {
        let data = SOA::new(
            name("ns.test."),
            name("admin.test."),
            1,
            60,
            60,
            600,
            minimum,
        );
        Record::from_rdata(name("test."), ttl, RData::SOA(data))
    }

    fn key(text: &str) -> Key {
        (name(text), RecordType::A)
    }

    fn answered(cache: &Cache, key: &Key, answer: Answer) {
        let flight = cache.get(key, answer.received).unwrap_err();
        cache.finish(key, &flight, &Ok(Arc::new(answer)));
    }

    #[test]
    fn an_answer_is_kept_for_its_smallest_ttl() {
        let cache = Cache::new(8);
        let t0 = Instant::now();
        let k = key("a.test.");
        answered(
            &cache,
            &k,
            Answer::new(ResponseCode::NoError, vec![a(30), a(10)], None, t0),
        );
        let kept = cache.get(&k, t0 + Duration::from_secs(9)).unwrap();
        assert_eq!(kept.remaining(30, t0 + Duration::from_secs(9)), 21);
        assert!(cache.get(&k, t0 + Duration::from_secs(10)).is_err());
        assert_eq!(cache.kept(), 0, "the expired answer is dropped");
    }

    #[test]
    fn a_negative_answer_is_kept_for_the_soa_minimum_and_none_without_an_soa() {
        let cache = Cache::new(8);
        let t0 = Instant::now();
        let nx = key("nx.test.");
        answered(
            &cache,
            &nx,
            Answer::new(ResponseCode::NXDomain, vec![], Some(soa(300, 5)), t0),
        );
        assert!(cache.get(&nx, t0 + Duration::from_secs(4)).is_ok());
        assert!(cache.get(&nx, t0 + Duration::from_secs(5)).is_err());
        let bare = key("bare.test.");
        answered(
            &cache,
            &bare,
            Answer::new(ResponseCode::NXDomain, vec![], None, t0),
        );
        assert!(cache.get(&bare, t0).is_err(), "no SOA, not kept");
    }

    #[test]
    fn the_least_recently_used_answer_goes_first() {
        let cache = Cache::new(2);
        let t0 = Instant::now();
        for k in ["x.test.", "y.test."] {
            answered(
                &cache,
                &key(k),
                Answer::new(ResponseCode::NoError, vec![a(60)], None, t0),
            );
        }
        assert!(cache.get(&key("x.test."), t0).is_ok(), "x used again");
        answered(
            &cache,
            &key("z.test."),
            Answer::new(ResponseCode::NoError, vec![a(60)], None, t0),
        );
        assert!(cache.get(&key("x.test."), t0).is_ok());
        assert!(cache.get(&key("z.test."), t0).is_ok());
        assert!(cache.get(&key("y.test."), t0).is_err(), "y went first");
    }

    #[test]
    fn askers_of_one_name_in_flight_share_one_query() {
        let cache = Cache::new(8);
        let t0 = Instant::now();
        let k = key("a.test.");
        let first = cache.get(&k, t0).unwrap_err();
        let second = cache.get(&k, t0).unwrap_err();
        assert!(Arc::ptr_eq(&first, &second));
        let outcome: Outcome = Err(io::Error::other("dns: no server answered").into());
        cache.finish(&k, &first, &outcome);
        let third = cache.get(&k, t0).unwrap_err();
        assert!(!Arc::ptr_eq(&first, &third), "a failure is not kept");
    }
}
