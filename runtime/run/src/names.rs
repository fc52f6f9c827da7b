//! The names a UDP association's packets were addressed by, looked up for
//! the route table's domain strategy without stalling the association: a
//! lookup runs beside the association's other work, holding the packet that
//! asked for it, and its answer is kept for the packets after.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use etemenanki_proto::Address;
use etemenanki_transport::resolve::Resolver;

/// How long an answer is kept.
const TTL: Duration = Duration::from_secs(60);
/// Answers kept per association; the oldest goes first.
const KEPT: usize = 16;
/// Lookups in flight per association; a packet past them is dropped.
const IN_FLIGHT: usize = 8;

type Lookup = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// A lookup and the packet that asked for it.
struct Pending {
    name: String,
    lookup: Lookup,
    held: (Vec<u8>, Address),
}

#[derive(Default)]
pub struct Names {
    /// (name, addresses, when looked up), oldest first.
    known: Vec<(String, Vec<IpAddr>, Instant)>,
    pending: Vec<Pending>,
}

/// What [`Names::poll_resolved`] gives back: a held packet whose name is
/// known now.
pub type Released = (Vec<u8>, Address);

impl Names {
    /// The addresses `name` was looked up to, while they are fresh. An
    /// answer with none (a failed lookup) routes the name by itself.
    pub fn get(&self, name: &str) -> Option<&[IpAddr]> {
        self.known
            .iter()
            .find(|(known, _, at)| known == name && at.elapsed() < TTL)
            .map(|(_, addresses, _)| addresses.as_slice())
    }

    /// Looks `name` up for the packet `payload` to `to`, which is held
    /// until the answer comes. A packet for a name already being looked
    /// up, or past the lookups in flight, is dropped, as a lossy link
    /// drops it.
    pub fn resolve(&mut self, resolver: &Resolver, name: &str, payload: &[u8], to: &Address) {
        if self.pending.iter().any(|p| p.name == name) || self.pending.len() >= IN_FLIGHT {
            tracing::debug!("udp fan-out: {name} is being looked up, dropping a packet");
            return;
        }
        let resolver = resolver.clone();
        let host = name.to_owned();
        let lookup: Lookup = Box::pin(async move { resolver.lookup(&host).await });
        self.pending.push(Pending {
            name: name.to_owned(),
            lookup,
            held: (payload.to_vec(), to.clone()),
        });
    }

    /// Drives the lookups in flight; returns a held packet whose name was
    /// answered (call again for the next).
    pub fn poll_resolved(&mut self, cx: &mut Context<'_>) -> Poll<Released> {
        for i in 0..self.pending.len() {
            let Poll::Ready(answer) = self.pending[i].lookup.as_mut().poll(cx) else {
                continue;
            };
            let Pending { name, held, .. } = self.pending.swap_remove(i);
            let addresses = answer.unwrap_or_else(|e| {
                tracing::debug!("udp fan-out: looking up {name} failed ({e}); routed by its name");
                Vec::new()
            });
            self.known.retain(|(known, ..)| *known != name);
            if self.known.len() >= KEPT {
                self.known.remove(0);
            }
            self.known.push((name, addresses, Instant::now()));
            return Poll::Ready(held);
        }
        Poll::Pending
    }
}
