//! Admission before reading: per inbound, live connections and connections
//! in their handshake are bounded, and so are the handshakes of any one
//! source, taken without waiting. A full inbound drops the socket rather
//! than letting the kernel backlog fill silently; a source over its share
//! is dropped so that it cannot keep the inbound closed to everyone else
//! (3,000 silent connections from one address would otherwise hold all
//! 2,048 handshake slots for the 10 s of the watchdog, again and again).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use etemenanki_ir::spec::Limits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The live-connection and handshake semaphores, the sizes they were given
/// (so a reload can grow or shrink them), and the handshakes per source.
pub struct Admission {
    sessions: Arc<Semaphore>,
    handshakes: Arc<Semaphore>,
    sized: Mutex<(u32, u32)>,
    sources: Arc<Sources>,
}

/// Handshakes in progress per source key.
#[derive(Default)]
struct Sources {
    counts: Mutex<HashMap<IpAddr, u32>>,
}

/// A connection in its handshake; dropping it frees its slots.
pub struct Handshaking {
    _permit: OwnedSemaphorePermit,
    _source: SourceSlot,
}

struct SourceSlot {
    sources: Arc<Sources>,
    key: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut counts = self.sources.counts.lock().expect("admission sources lock");
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// Why a connection was not admitted, for the debug log.
pub type Refused = &'static str;

/// What counts as one source: an IPv4 address (an IPv4-mapped IPv6 one
/// included), or an IPv6 /64, the least a single host is usually given.
fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(Ipv6Addr::from(segments))
            }
        },
    }
}

impl Admission {
    pub fn new(limits: &Limits) -> Admission {
        Admission {
            sessions: Arc::new(Semaphore::new(limits.max_connections as usize)),
            handshakes: Arc::new(Semaphore::new(limits.max_handshakes as usize)),
            sized: Mutex::new((limits.max_connections, limits.max_handshakes)),
            sources: Arc::default(),
        }
    }

    /// Admits a connection from `source`: its live-connection permit and its
    /// handshake, or why not.
    pub fn admit(
        &self,
        source: IpAddr,
        limits: &Limits,
    ) -> Result<(OwnedSemaphorePermit, Handshaking), Refused> {
        let session = self
            .sessions
            .clone()
            .try_acquire_owned()
            .map_err(|_| "live connection limit reached")?;
        Ok((session, self.handshake(source, limits)?))
    }

    /// A handshake from `source` on a connection admitted already: each
    /// gRPC stream after the first on one connection (which share its
    /// live-connection permit) handshakes under the same bounds.
    pub fn handshake(&self, source: IpAddr, limits: &Limits) -> Result<Handshaking, Refused> {
        let key = source_key(source);
        let slot = {
            let mut counts = self.sources.counts.lock().expect("admission sources lock");
            let count = counts.entry(key).or_insert(0);
            if *count >= limits.max_handshakes_per_source {
                return Err("handshake limit of this source reached");
            }
            *count += 1;
            SourceSlot {
                sources: self.sources.clone(),
                key,
            }
        };
        let permit = self
            .handshakes
            .clone()
            .try_acquire_owned()
            .map_err(|_| "handshake limit reached")?;
        Ok(Handshaking {
            _permit: permit,
            _source: slot,
        })
    }

    /// Grows at once; shrinks by the permits free now (the rest of a shrink
    /// is not carried over: a busy inbound keeps more room until restarted).
    /// The per-source bound is read from the limits at every admission.
    pub fn resize(&self, limits: &Limits) {
        let mut sized = self.sized.lock().expect("admission sizes lock");
        let resize = |semaphore: &Semaphore, from: u32, to: u32| {
            if to > from {
                semaphore.add_permits((to - from) as usize);
            } else {
                semaphore.forget_permits((from - to) as usize);
            }
        };
        resize(&self.sessions, sized.0, limits.max_connections);
        resize(&self.handshakes, sized.1, limits.max_handshakes);
        *sized = (limits.max_connections, limits.max_handshakes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_source: u32) -> Limits {
        Limits {
            max_handshakes: 10,
            max_handshakes_per_source: per_source,
            ..Limits::default()
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn one_source_cannot_take_every_handshake_slot() {
        let limits = limits(3);
        let admission = Admission::new(&limits);
        let held: Vec<_> = (0..3)
            .map(|_| admission.admit(ip("192.0.2.1"), &limits).unwrap())
            .collect();
        assert_eq!(
            admission.admit(ip("192.0.2.1"), &limits).err(),
            Some("handshake limit of this source reached")
        );
        // Its IPv4-mapped form is the same source.
        assert!(admission.admit(ip("::ffff:192.0.2.1"), &limits).is_err());
        // Everyone else still gets in.
        assert!(admission.admit(ip("192.0.2.2"), &limits).is_ok());
        drop(held);
        assert!(admission.admit(ip("192.0.2.1"), &limits).is_ok());
    }

    #[test]
    fn an_ipv6_slash_64_counts_as_one_source() {
        let limits = limits(2);
        let admission = Admission::new(&limits);
        let _a = admission.admit(ip("2001:db8::1"), &limits).unwrap();
        let _b = admission.admit(ip("2001:db8::ffff:2"), &limits).unwrap();
        assert!(admission.admit(ip("2001:db8::3"), &limits).is_err());
        assert!(admission.admit(ip("2001:db8:0:1::1"), &limits).is_ok());
    }

    #[test]
    fn the_inbound_wide_handshake_limit_still_holds() {
        let limits = limits(64);
        let admission = Admission::new(&limits);
        let _held: Vec<_> = (0..10)
            .map(|i| {
                admission
                    .admit(IpAddr::from([192, 0, 2, i]), &limits)
                    .unwrap()
            })
            .collect();
        assert_eq!(
            admission.admit(ip("198.51.100.1"), &limits).err(),
            Some("handshake limit reached")
        );
        // A refused source leaves no count behind.
        assert!(admission
            .sources
            .counts
            .lock()
            .unwrap()
            .get(&ip("198.51.100.1"))
            .is_none());
    }
}
