//! Admission before reading: per inbound, live connections and connections
//! in their handshake are bounded, taken without waiting. A full inbound
//! drops the socket rather than letting the kernel backlog fill silently.
//! Handshake slots are shared fairly among sources only while they are
//! scarce ([`share`]): a local client's burst is never dropped, and one
//! address opening thousands of silent connections cannot keep the inbound
//! closed to everyone else for the length of the handshake watchdog. What
//! is turned away is reported once a second ([`refusals`]).

mod refusals;
mod share;

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use etemenanki_ir::spec::Limits;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use refusals::{report, Refusals};
use share::{Share, Ticket};

/// Why a connection was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `max_connections` are live.
    ConnectionsFull = 0,
    /// Every handshake slot is held, none by a source over its share.
    HandshakesFull = 1,
    /// Slots are scarce and its source holds its fair share already.
    OverShare = 2,
    /// Not a refusal at accept: a handshaking connection ended to make room
    /// for a source within its share.
    Shed = 3,
}

impl Refusal {
    const ALL: [Refusal; 4] = [
        Refusal::ConnectionsFull,
        Refusal::HandshakesFull,
        Refusal::OverShare,
        Refusal::Shed,
    ];

    pub fn text(self) -> &'static str {
        match self {
            Refusal::ConnectionsFull => "live connection slots full",
            Refusal::HandshakesFull => "handshake slots full",
            Refusal::OverShare | Refusal::Shed => "source over its fair share of handshake slots",
        }
    }
}

/// The slot table's handle on a handshaking connection: notified to shed
/// it. A connection whose handshake ends normally is never notified, so its
/// task is not woken for it.
type ShedHandle = Arc<ShedState>;

/// Shared by a handshaking connection's slot and its [`Shed`].
#[derive(Default)]
pub struct ShedState {
    /// Set when the slot is given to another source.
    shed: AtomicBool,
    /// Set once the handshake ended: from then on, [`Shed`] waits for
    /// nothing and costs a load a poll.
    done: AtomicBool,
    /// The connection's task, woken when it is shed.
    waker: Mutex<Option<Waker>>,
}

impl ShedState {
    fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        if let Some(waker) = lock(&self.waker).take() {
            waker.wake();
        }
    }
}

/// The live-connection semaphore and the size it was given (so a reload can
/// grow or shrink it), the handshake slots, and what was turned away.
pub struct Admission {
    sessions: Arc<Semaphore>,
    sized: Mutex<u32>,
    share: Arc<Mutex<Share<ShedHandle>>>,
    refusals: Mutex<Refusals>,
    /// Told when a refusal opens a window, so its report gets written.
    reported: Notify,
}

/// A connection in its handshake; dropping it frees its slot.
pub struct Handshaking {
    share: Arc<Mutex<Share<ShedHandle>>>,
    ticket: Ticket,
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        if let Some(state) = lock(&self.share).release(self.ticket) {
            state.done.store(true, Ordering::Release);
        }
    }
}

/// Resolves when the connection admitted with it is shed, which happens
/// only while it holds its [`Handshaking`]; after that it never resolves,
/// and polling it is one load.
pub struct Shed(Option<Arc<ShedState>>);

impl Shed {
    /// One that never resolves: for a slot shed with something else.
    pub fn never() -> Shed {
        Shed(None)
    }
}

impl Future for Shed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(state) = &self.0 else {
            return Poll::Pending;
        };
        if state.shed.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if state.done.load(Ordering::Acquire) {
            // The handshake is over: it is served to the end.
            self.0 = None;
            return Poll::Pending;
        }
        {
            let mut waker = lock(&state.waker);
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        // A shed between the first look and the waker's registration.
        match state.shed.load(Ordering::Acquire) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

/// The runtime's clock, which tests may pause.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Admission {
    pub fn new(limits: &Limits) -> Admission {
        Admission {
            sessions: Arc::new(Semaphore::new(limits.max_connections as usize)),
            sized: Mutex::new(limits.max_connections),
            share: Arc::new(Mutex::new(Share::new(
                limits.max_handshakes,
                limits.max_handshakes_per_source,
            ))),
            refusals: Mutex::default(),
            reported: Notify::new(),
        }
    }

    /// Admits a connection from `source`: its live-connection permit and its
    /// handshake slot, or why not (counted for the report).
    pub fn admit(
        &self,
        source: IpAddr,
        limits: &Limits,
    ) -> Result<(OwnedSemaphorePermit, Handshaking, Shed), Refusal> {
        let Ok(session) = self.sessions.clone().try_acquire_owned() else {
            return Err(self.refuse(Refusal::ConnectionsFull));
        };
        let (handshake, shed) = self.handshake(source, limits)?;
        Ok((session, handshake, shed))
    }

    /// A handshake from `source` on a connection admitted already: each
    /// gRPC stream after the first on one connection (which share its
    /// live-connection permit) handshakes under the same bounds.
    pub fn handshake(
        &self,
        source: IpAddr,
        limits: &Limits,
    ) -> Result<(Handshaking, Shed), Refusal> {
        let shed = Arc::new(ShedState::default());
        let admitted = {
            let mut share = lock(&self.share);
            share.resize(limits.max_handshakes, limits.max_handshakes_per_source);
            share.admit(source, shed.clone())
        };
        let (ticket, victim) = admitted.map_err(|refusal| self.refuse(refusal))?;
        if let Some(victim) = victim {
            victim.shed();
            self.refuse(Refusal::Shed);
        }
        let handshaking = Handshaking {
            share: self.share.clone(),
            ticket,
        };
        Ok((handshaking, Shed(Some(shed))))
    }

    /// Connections of this inbound in their handshake now.
    pub fn handshaking(&self) -> u32 {
        lock(&self.share).held()
    }

    /// Counts `refusal` for the report, and returns it.
    fn refuse(&self, refusal: Refusal) -> Refusal {
        if lock(&self.refusals).record(refusal, now()) {
            self.reported.notify_one();
        }
        refusal
    }

    /// Logs what was turned away, at most once a second, for as long as the
    /// inbound runs.
    pub async fn report(&self, tag: &str) {
        loop {
            let due = lock(&self.refusals).poll_timeout();
            let Some(due) = due else {
                self.reported.notified().await;
                continue;
            };
            tokio::time::sleep_until(due.into()).await;
            let counts = lock(&self.refusals).handle_timeout(now());
            for (count, refusal) in counts {
                tracing::warn!("{}", report(tag, count, refusal));
            }
        }
    }

    /// Grows at once; shrinks by the permits free now (the rest of a shrink
    /// is not carried over: a busy inbound keeps more room until restarted).
    /// The handshake slots are sized at every admission.
    pub fn resize(&self, limits: &Limits) {
        let mut sized = lock(&self.sized);
        let to = limits.max_connections;
        if to > *sized {
            self.sessions.add_permits((to - *sized) as usize);
        } else {
            self.sessions.forget_permits((*sized - to) as usize);
        }
        *sized = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(handshakes: u32, per_source: u32) -> Limits {
        Limits {
            max_handshakes: handshakes,
            max_handshakes_per_source: per_source,
            ..Limits::default()
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[tokio::test]
    async fn a_shed_connection_is_told_and_one_that_finished_its_handshake_never_is() {
        let limits = limits(2, 1);
        let admission = Admission::new(&limits);
        let (_s1, first, first_shed) = admission.admit(ip("192.0.2.3"), &limits).unwrap();
        let (_s2, second, second_shed) = admission.admit(ip("192.0.2.3"), &limits).unwrap();
        // The second finishes its handshake: it can no longer be shed.
        drop(second);
        let finished = tokio::spawn(second_shed);
        let (_s3, _third, _) = admission.admit(ip("192.0.2.3"), &limits).unwrap();
        // Full, and another source comes: the oldest of the flood goes.
        let (_s4, _newcomer, _) = admission.admit(ip("192.0.2.1"), &limits).unwrap();
        first_shed.await;
        drop(first);
        tokio::task::yield_now().await;
        assert!(!finished.is_finished());
        finished.abort();
    }

    #[tokio::test]
    async fn a_connection_shed_before_it_waits_is_told_at_its_first_poll() {
        let limits = limits(2, 1);
        let admission = Admission::new(&limits);
        let (_s1, _oldest, shed) = admission.admit(ip("192.0.2.3"), &limits).unwrap();
        let (_s2, _flood, _) = admission.admit(ip("192.0.2.3"), &limits).unwrap();
        let (_s3, _newcomer, _) = admission.admit(ip("192.0.2.1"), &limits).unwrap();
        shed.await;
    }

    #[test]
    fn a_full_inbound_refuses_by_live_connections_first() {
        let limits = Limits {
            max_connections: 1,
            ..limits(8, 8)
        };
        let admission = Admission::new(&limits);
        let _held = admission.admit(ip("192.0.2.1"), &limits).unwrap();
        assert_eq!(
            admission.admit(ip("192.0.2.2"), &limits).err(),
            Some(Refusal::ConnectionsFull)
        );
        // The refused connection took no handshake slot.
        assert_eq!(lock(&admission.share).held(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_are_logged_once_a_second_not_per_socket() {
        let limits = Limits {
            max_connections: 0,
            ..limits(8, 8)
        };
        let admission = Admission::new(&limits);
        for _ in 0..117 {
            assert!(admission.admit(ip("192.0.2.1"), &limits).is_err());
        }
        assert_eq!(
            lock(&admission.refusals).handle_timeout(now() + refusals::WINDOW),
            [(117, Refusal::ConnectionsFull)]
        );
    }
}
