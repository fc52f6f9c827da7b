//! Drains: every outbound version carries a close signal; every flow opened
//! on it holds a [`Guard`] that ends the flow once the signal fires.

use etemenanki_ir::spec::DrainPolicy;
use std::future::pending;
use std::sync::Arc;
use tokio::sync::watch;

/// The error text a drained flow ends with.
pub const DRAINED: &str = "the outbound this flow was opened on was drained";

/// The close signal of one outbound version.
#[derive(Clone)]
pub struct Drain {
    closed: Arc<watch::Sender<bool>>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            closed: Arc::new(watch::channel(false).0),
        }
    }
}

impl Drain {
    pub fn guard(&self) -> Guard {
        Guard {
            closed: self.closed.subscribe(),
        }
    }

    /// Applies a drain policy to the flows of this version: `keep` lets them
    /// run on, `close` aborts them now, `close after` once the grace period
    /// has passed.
    pub fn apply(&self, policy: DrainPolicy) {
        match policy {
            DrainPolicy::Keep => {}
            DrainPolicy::Close => {
                self.closed.send_replace(true);
            }
            DrainPolicy::CloseAfter(grace) => {
                let closed = self.closed.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    closed.send_replace(true);
                });
            }
        }
    }

    /// Closes at once; used for tests of the guard.
    #[cfg(test)]
    fn close(&self) {
        self.apply(DrainPolicy::Close);
    }
}

/// Held by a flow; [`Guard::closed`] resolves when the version is closed.
#[derive(Clone)]
pub struct Guard {
    closed: watch::Receiver<bool>,
}

impl Guard {
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Resolves once the version is closed. If the version was dropped
    /// without being closed (a `keep` drain), it never resolves.
    pub async fn closed(&mut self) {
        if self.closed.wait_for(|closed| *closed).await.is_err() {
            pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn close_ends_the_guard_and_keep_never_does() {
        let kept = Drain::default();
        let mut guard = kept.guard();
        kept.apply(DrainPolicy::Keep);
        drop(kept);
        let waited = tokio::time::timeout(Duration::from_millis(20), guard.closed()).await;
        assert!(waited.is_err(), "a kept version's flow must run on");

        let closed = Drain::default();
        let mut guard = closed.guard();
        closed.close();
        guard.closed().await;
        assert!(guard.is_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn close_after_waits_for_the_grace_period() {
        let drain = Drain::default();
        let mut guard = drain.guard();
        drain.apply(DrainPolicy::CloseAfter(Duration::from_secs(30)));
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert!(!guard.is_closed());
        guard.closed().await;
        assert!(guard.is_closed());
    }
}
