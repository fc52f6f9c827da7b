//! The tunnel slot: every flow of one outbound version shares the tunnel
//! it holds. The first flow starts it; a tunnel whose driver stopped is
//! started again, after a backoff when starts keep failing or tunnels keep
//! dying young, on the schedule of [`Backoff`].

use std::future::Future;
use std::io;
use std::sync::Arc;

use etemenanki_proto::backoff::Backoff;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// What a slot holds: anything that can tell whether it still runs.
pub trait Device {
    fn is_alive(&self) -> bool;
    fn started(&self) -> Instant;
}

impl Device for crate::Tunnel {
    fn is_alive(&self) -> bool {
        crate::Tunnel::is_alive(self)
    }

    fn started(&self) -> Instant {
        crate::Tunnel::started(self)
    }
}

pub struct Slot<D> {
    state: Mutex<State<D>>,
}

struct State<D> {
    device: Option<Arc<D>>,
    /// Counts failed starts and short-lived tunnels.
    backoff: Backoff,
}

impl<D> Default for Slot<D> {
    fn default() -> Self {
        Slot {
            state: Mutex::new(State {
                device: None,
                backoff: Backoff::default(),
            }),
        }
    }
}

impl<D: Device> Slot<D> {
    /// The live device, or one `start` brings up now. Dials that arrive
    /// meanwhile wait for it, so one slot never starts two at once.
    pub async fn acquire<F, Fut>(&self, start: F) -> io::Result<Arc<D>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<D>>,
    {
        let mut state = self.state.lock().await;
        let now = Instant::now().into_std();
        if let Some(device) = &state.device {
            if device.is_alive() {
                return Ok(device.clone());
            }
            tracing::warn!("wireguard: tunnel driver stopped, rebuilding");
            let started = device.started().into_std();
            state.backoff.lost(now, started);
            state.device = None;
        }
        if state.backoff.waiting(now) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "wireguard: tunnel is down, waiting before the next attempt",
            ));
        }
        match start().await {
            Ok(device) => {
                let device = Arc::new(device);
                state.device = Some(device.clone());
                Ok(device)
            }
            Err(e) => {
                tracing::warn!("wireguard: tunnel start failed: {e}");
                state.backoff.failed(Instant::now().into_std());
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::Duration;

    use etemenanki_proto::backoff::MIN_HEALTHY_LIFETIME;

    use super::*;

    struct Fake {
        alive: Arc<AtomicBool>,
        started: Instant,
    }

    impl Device for Fake {
        fn is_alive(&self) -> bool {
            self.alive.load(Ordering::SeqCst)
        }

        fn started(&self) -> Instant {
            self.started
        }
    }

    fn refused() -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionRefused, "no")
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_start_backs_off_and_dials_meanwhile_fail_at_once() {
        let slot: Slot<Fake> = Slot::default();
        let starts = AtomicU32::new(0);
        let failing = || async {
            starts.fetch_add(1, Ordering::SeqCst);
            Err::<Fake, _>(refused())
        };
        assert_eq!(
            slot.acquire(failing).await.err().unwrap().kind(),
            io::ErrorKind::ConnectionRefused
        );
        let during = slot.acquire(failing).await.err().unwrap();
        assert_eq!(during.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(
            during.to_string(),
            "wireguard: tunnel is down, waiting before the next attempt"
        );
        assert_eq!(
            starts.load(Ordering::SeqCst),
            1,
            "no start during the backoff"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(slot.acquire(failing).await.is_err());
        assert_eq!(starts.load(Ordering::SeqCst), 2);
        // The second failure waits 4 s.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(
            slot.acquire(failing).await.err().unwrap().kind(),
            io::ErrorKind::BrokenPipe
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let alive = Arc::new(AtomicBool::new(true));
        let device = slot
            .acquire(|| async {
                Ok(Fake {
                    alive: alive.clone(),
                    started: Instant::now(),
                })
            })
            .await
            .unwrap();
        let again = slot
            .acquire(|| async { Err::<Fake, _>(refused()) })
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&device, &again), "a live tunnel is shared");
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_that_dies_young_counts_as_a_failure_and_an_old_one_is_rebuilt_at_once() {
        let slot: Slot<Fake> = Slot::default();
        let alive = Arc::new(AtomicBool::new(true));
        let start = || async {
            Ok(Fake {
                alive: alive.clone(),
                started: Instant::now(),
            })
        };
        slot.acquire(start).await.unwrap();
        tokio::time::advance(Duration::from_secs(3)).await;
        alive.store(false, Ordering::SeqCst);
        assert_eq!(
            slot.acquire(start).await.err().unwrap().kind(),
            io::ErrorKind::BrokenPipe,
            "died within MIN_HEALTHY_LIFETIME: backing off"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        alive.store(true, Ordering::SeqCst);
        slot.acquire(start).await.unwrap();
        tokio::time::advance(MIN_HEALTHY_LIFETIME).await;
        alive.store(false, Ordering::SeqCst);
        let rebuilt = slot.acquire(start).await;
        assert!(
            rebuilt.is_ok(),
            "a tunnel that lived long is rebuilt at once"
        );
    }
}
