//! The name a datagram link's packets were last addressed to and the
//! address it resolved to: an association sends packet after packet to the
//! same name, so one lookup serves them while it is fresh, and a lookup in
//! flight is polled by the send that needs it.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

/// How long a name a link resolved keeps its address before the next
/// packet to it looks it up again.
const NAME_TTL: Duration = Duration::from_secs(60);

/// A lookup in flight: the usable address, or none.
pub type Lookup = Pin<Box<dyn Future<Output = Option<IpAddr>> + Send>>;

#[derive(Default)]
pub struct LinkNames {
    /// The lookup of the name the packet being sent is addressed to.
    lookup: Option<(String, Lookup)>,
    /// The name last resolved, its address and when.
    resolved: Option<(String, IpAddr, Instant)>,
}

impl LinkNames {
    /// The address for `host`: from the last lookup while it is fresh,
    /// else from a lookup this call starts with `start` or continues.
    /// `Ready(None)` when the name resolves to nothing usable.
    pub fn poll_resolve(
        &mut self,
        cx: &mut Context<'_>,
        host: &str,
        start: impl FnOnce(String) -> Lookup,
    ) -> Poll<Option<IpAddr>> {
        if let Some((name, ip, at)) = &self.resolved {
            if name == host && at.elapsed() < NAME_TTL {
                return Poll::Ready(Some(*ip));
            }
        }
        if !matches!(&self.lookup, Some((name, _)) if name == host) {
            self.lookup = Some((host.to_owned(), start(host.to_owned())));
        }
        let Some((_, lookup)) = &mut self.lookup else {
            return Poll::Ready(None);
        };
        let usable = ready!(lookup.as_mut().poll(cx));
        let Some((name, _)) = self.lookup.take() else {
            return Poll::Ready(None);
        };
        if let Some(ip) = usable {
            self.resolved = Some((name, ip, Instant::now()));
        }
        Poll::Ready(usable)
    }
}
