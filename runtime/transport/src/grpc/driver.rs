//! The I/O of one pooled HTTP/2 connection, run by whichever task gets to
//! it first: the connection's own task, woken by the socket and by h2, or
//! a flow right after it handed h2 something to send. A flow's message is
//! then framed, sealed and sent in the flow's own task, with no hop to the
//! connection's task (on a runtime of several threads, often on another
//! thread, woken from its sleep) between the two.
//!
//! Whoever polls, h2 is polled with the connection's waker, so every wake
//! h2 and the socket register ends at the connection's task and nothing
//! waits on a flow that has moved on. A wake that comes while someone
//! polls only marks the connection woken, and the poller polls again
//! before it lets go: h2's own wake for the message a flow just queued,
//! and the socket's while the flow writes, cost no task switch. One poller
//! at a time: a flow that finds the connection busy leaves its message to
//! the poller, which the message's wake makes poll again.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{ready, Context, Poll, Wake, Waker};

use bytes::Bytes;

use super::h2_error;
use super::wire::{Tail, Wire};

/// Someone is polling the connection.
const RUNNING: u8 = 1;
/// A wake came since the poll began (or, with no poller, since the last).
const WOKEN: u8 = 2;
/// The connection has ended; its I/O is dropped.
const ENDED: u8 = 4;

/// Polls in a row a claim makes while wakes keep coming, before it leaves
/// the rest to the connection's task.
const ROUNDS: usize = 4;

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is one assignment or one poll that
    // leaves h2 whole between its own steps.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What h2 and the socket wake: the connection's state, and its task.
#[derive(Default)]
struct Signal {
    state: AtomicU8,
    task: Mutex<Option<Waker>>,
}

impl Signal {
    fn wake_task(&self) {
        if let Some(task) = locked(&self.task).as_ref() {
            task.wake_by_ref();
        }
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let before = self.state.fetch_or(WOKEN, Ordering::AcqRel);
        if before & RUNNING == 0 {
            self.wake_task();
        }
    }
}

/// The connection itself and the tail of its wire.
struct Io {
    connection: h2::client::Connection<Wire, Bytes>,
    tail: Tail,
}

pub(super) struct Driver {
    signal: Arc<Signal>,
    /// A waker of `signal`, the one h2 is always polled with.
    waker: Waker,
    io: Mutex<Option<Io>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("state", &self.signal.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Driver {
    pub(super) fn new(connection: h2::client::Connection<Wire, Bytes>, tail: Tail) -> Arc<Self> {
        let signal = Arc::new(Signal::default());
        Arc::new(Driver {
            waker: Waker::from(signal.clone()),
            signal,
            io: Mutex::new(Some(Io { connection, tail })),
        })
    }

    pub(super) fn is_ended(&self) -> bool {
        self.signal.state.load(Ordering::Acquire) & ENDED != 0
    }

    /// Runs `send` (h2 taking a message or a request to send), then the
    /// connection's I/O from this task unless someone else is at it, so
    /// what `send` queued goes out now, and h2's wake for it costs nothing.
    pub(super) fn send<T>(&self, send: impl FnOnce() -> T) -> T {
        let claim = self.claim();
        let sent = send();
        if let Some(claim) = claim {
            claim.run();
        }
        sent
    }

    /// The right to poll the connection now, unless someone else is
    /// polling it or it has ended.
    fn claim(&self) -> Option<Claim<'_>> {
        self.signal
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state & (RUNNING | ENDED) == 0).then_some(RUNNING)
            })
            .ok()
            .map(|_| Claim {
                driver: self,
                released: false,
            })
    }

    /// The connection's task: runs the connection whenever it is woken and
    /// no flow is at it, until it ends.
    pub(super) fn run(self: Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        std::future::poll_fn(move |cx| {
            {
                let mut task = locked(&self.signal.task);
                if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                    *task = Some(cx.waker().clone());
                }
            }
            if let Some(claim) = self.claim() {
                claim.run();
            }
            if self.is_ended() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

/// The one poller's hold on the connection; given up when dropped, and if
/// a wake is still unanswered then (or the holder panicked mid-poll), the
/// connection's task takes over.
struct Claim<'a> {
    driver: &'a Driver,
    released: bool,
}

impl Claim<'_> {
    /// Polls the connection until a poll ends with no wake having come
    /// during it, a few times at most.
    fn run(mut self) {
        let state = &self.driver.signal.state;
        for _ in 0..ROUNDS {
            if self.poll_once() {
                return;
            }
            match state.compare_exchange(RUNNING, 0, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.released = true;
                    return;
                }
                // Woken while it polled: the wake is answered by polling again.
                Err(_) => {
                    state.fetch_and(!WOKEN, Ordering::AcqRel);
                }
            }
        }
    }

    /// One poll of the connection; whether it has ended.
    fn poll_once(&self) -> bool {
        let mut io = locked(&self.driver.io);
        let Some(live) = io.as_mut() else {
            return true;
        };
        let mut cx = Context::from_waker(&self.driver.waker);
        let Poll::Ready(ended) = drive(&mut live.connection, &live.tail, &mut cx) else {
            return false;
        };
        if let Err(e) = ended {
            tracing::debug!("grpc connection ended: {e}");
        }
        *io = None;
        self.driver.signal.state.fetch_or(ENDED, Ordering::AcqRel);
        true
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // Still woken after its rounds, or ended, or unwound mid-poll: the
        // task answers (and ends, if the connection has).
        self.driver
            .signal
            .state
            .fetch_and(!RUNNING, Ordering::AcqRel);
        self.driver.signal.wake_task();
    }
}

/// Runs the connection's I/O as far as it goes for now, sending what h2
/// left gathered each time it has done all it can.
fn drive(
    connection: &mut h2::client::Connection<Wire, Bytes>,
    tail: &Tail,
    cx: &mut Context<'_>,
) -> Poll<std::io::Result<()>> {
    match Pin::new(connection).poll(cx) {
        Poll::Ready(ended) => Poll::Ready(ended.map_err(h2_error)),
        Poll::Pending => {
            ready!(tail.poll_flush(cx))?;
            Poll::Pending
        }
    }
}
