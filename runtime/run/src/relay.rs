//! The relay: both directions of one connection in the connection's own
//! task, with half-close, the idle timeout and the drain guard.
//!
//! A direction holds a buffer only while bytes move: it waits for
//! readiness with no buffer, takes one to read, and gives it back once the
//! bytes are written and the next read would block. An idle connection
//! therefore holds no relay buffer at all. Backpressure is simply not
//! reading: while a direction's bytes are unwritten it does not read more.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::drain::{Guard, DRAINED};

/// The relay buffer of one direction, as seed 003's `RELAY_BUF`.
const RELAY_BUF: usize = 16 * 1024;
/// Reads one direction may make in one poll before yielding to the rest of
/// the runtime.
const READS_PER_POLL: u32 = 16;

/// How a relay ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Both sides finished sending.
    Done,
    /// Nothing moved for the idle timeout.
    Idle,
}

#[derive(Default)]
struct Half {
    buf: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
}

impl Half {
    /// Moves bytes from `from` to `to` until it would block; `Ready` once
    /// `from` ended and `to` was shut down for writing.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        from: &TcpStream,
        to: &mut TcpStream,
        moved: &mut bool,
    ) -> Poll<io::Result<()>> {
        let mut reads = 0;
        loop {
            if self.start < self.end {
                let buf = self.buf.as_ref().expect("pending bytes live in a buffer");
                let n = ready!(Pin::new(&mut *to).poll_write(cx, &buf[self.start..self.end]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.start += n;
                *moved = true;
                continue;
            }
            if self.eof {
                ready!(Pin::new(&mut *to).poll_shutdown(cx))?;
                self.done = true;
                return Poll::Ready(Ok(()));
            }
            if reads == READS_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(from.poll_read_ready(cx))?;
            let buf = self
                .buf
                .get_or_insert_with(|| vec![0; RELAY_BUF].into_boxed_slice());
            match from.try_read(buf) {
                Ok(0) => {
                    self.eof = true;
                    self.buf = None;
                }
                Ok(n) => {
                    (self.start, self.end) = (0, n);
                    reads += 1;
                    *moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.buf = None,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// Relays until both directions have ended, nothing moved for `idle`, the
/// guard's outbound version is closed, or either side fails.
pub async fn relay(
    client: &mut TcpStream,
    outbound: &mut TcpStream,
    idle: Duration,
    guard: &mut Guard,
) -> io::Result<Ended> {
    let mut up = Half::default();
    let mut down = Half::default();
    let mut last = Instant::now();
    let mut sleep = pin!(tokio::time::sleep_until(last + idle));
    let mut drained = pin!(guard.closed());
    poll_fn(|cx| {
        let mut moved = false;
        if !up.done {
            if let Poll::Ready(Err(e)) = up.poll(cx, client, outbound, &mut moved) {
                return Poll::Ready(Err(e));
            }
        }
        if !down.done {
            if let Poll::Ready(Err(e)) = down.poll(cx, outbound, client, &mut moved) {
                return Poll::Ready(Err(e));
            }
        }
        if up.done && down.done {
            return Poll::Ready(Ok(Ended::Done));
        }
        if drained.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                DRAINED,
            )));
        }
        if moved {
            last = Instant::now();
        }
        // The timer is re-armed only when it fires, not on every byte.
        while sleep.as_mut().poll(cx).is_ready() {
            if last.elapsed() >= idle {
                return Poll::Ready(Ok(Ended::Idle));
            }
            sleep.as_mut().reset(last + idle);
        }
        Poll::Pending
    })
    .await
}

/// The relay against blackhole: the client reads EOF at once, and what it
/// sends is swallowed until it finishes or goes idle.
pub async fn swallow(client: &mut TcpStream, idle: Duration) -> io::Result<Ended> {
    use tokio::io::AsyncWriteExt;
    client.shutdown().await?;
    loop {
        match tokio::time::timeout(idle, client.readable()).await {
            Err(_) => return Ok(Ended::Idle),
            Ok(ready) => ready?,
        }
        let mut scratch = [0u8; 2048];
        match client.try_read(&mut scratch) {
            Ok(0) => return Ok(Ended::Done),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Drain;
    use etemenanki_ir::spec::DrainPolicy;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Two connected socket pairs: (client app, proxy's client side) and
    /// (proxy's outbound side, server app).
    async fn pairs() -> (TcpStream, TcpStream, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (d, _) = listener.accept().await.unwrap();
        (a, b, c, d)
    }

    #[tokio::test]
    async fn half_close_propagates_both_ways_and_finishes() {
        let (mut app, mut proxy_in, mut proxy_out, mut server) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            relay(
                &mut proxy_in,
                &mut proxy_out,
                Duration::from_secs(30),
                &mut guard,
            )
            .await
        });
        app.write_all(b"request").await.unwrap();
        app.shutdown().await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got, b"request",
            "the server sees the client's EOF after its bytes"
        );
        // The other direction still works after the client half-closed.
        server.write_all(b"response").await.unwrap();
        server.shutdown().await.unwrap();
        let mut got = Vec::new();
        app.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"response");
        assert_eq!(relay.await.unwrap().unwrap(), Ended::Done);
    }

    #[tokio::test]
    async fn a_large_transfer_arrives_whole() {
        let (mut app, mut proxy_in, mut proxy_out, mut server) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            relay(
                &mut proxy_in,
                &mut proxy_out,
                Duration::from_secs(30),
                &mut guard,
            )
            .await
        });
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            app.write_all(&sent).await.unwrap();
            app.shutdown().await.unwrap();
            app
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert!(got == data, "the bytes differ");
        drop(server);
        drop(writer.await.unwrap());
        relay.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_moving_for_the_idle_timeout_ends_the_relay() {
        let (_app, mut proxy_in, mut proxy_out, _server) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let ended = relay(
            &mut proxy_in,
            &mut proxy_out,
            Duration::from_secs(300),
            &mut guard,
        )
        .await;
        assert_eq!(ended.unwrap(), Ended::Idle);
    }

    #[tokio::test]
    async fn a_close_drain_aborts_the_relay() {
        let (_app, mut proxy_in, mut proxy_out, _server) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            relay(
                &mut proxy_in,
                &mut proxy_out,
                Duration::from_secs(300),
                &mut guard,
            )
            .await
        });
        drain.apply(DrainPolicy::Close);
        let err = relay.await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), DRAINED);
    }
}
