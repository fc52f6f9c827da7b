//! The relay: both directions of one connection in the connection's own
//! task, with half-close, the idle timeout and the drain guard. One relay
//! for every pair of streams; when both are plain TCP sockets, bytes move
//! in the kernel (splice) instead of through user space.
//!
//! Each direction ([`half`]) holds a pipe or a buffer only while bytes
//! move, so an idle connection holds neither.

mod half;
#[cfg(target_os = "linux")]
mod pipe;
#[cfg(target_os = "linux")]
mod pool;

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use etemenanki_proto::codec::StreamCodec;
use etemenanki_transport::grpc::GrpcStream;
use etemenanki_transport::tls::WIRE_BUF;
use etemenanki_transport::ws::{WsStream, FRAME_BUF};
use etemenanki_transport::{Prefixed, Stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::drain::{Guard, DRAINED};
use crate::framed::Framed;
use half::{Half, Mode, RELAY_BUF};

/// A stream the relay moves bytes to and from.
pub trait Relayed: AsyncRead + AsyncWrite + Unpin {
    /// The socket itself when nothing is layered over it, so bytes may
    /// move in the kernel.
    fn plain_tcp(&mut self) -> Option<&mut TcpStream>;

    /// The stream's own frame buffers, when it seals what it writes in
    /// them (a [`Framed`], a WebSocket, a gun stream): the relay then
    /// reads straight into those instead of through a buffer of its own.
    fn fills(&mut self) -> Option<&mut dyn Fills> {
        None
    }

    /// The stream's own frame buffers, when it opens what it reads in
    /// them (a [`Framed`]): the relay then writes the opened payload out
    /// from there.
    fn drains(&mut self) -> Option<&mut dyn Drains> {
        None
    }

    /// The relay buffer a direction from or to this stream carries its
    /// bytes in, when it needs one: the direction takes the larger of its
    /// two ends'.
    fn buffer_len(&mut self) -> usize {
        RELAY_BUF
    }

    /// The stream holds its first bytes back to send them with the first
    /// payload (a framed client's request): the relay flushes them alone
    /// once the client has sent nothing for [`FIRST_PAYLOAD_WAIT`], so a
    /// protocol whose server speaks first (SSH, SMTP) still opens.
    fn holds_first_bytes(&self) -> bool {
        false
    }

    /// The local address of the connection under the stream, where there
    /// is one: what a SOCKS reply reports as bound.
    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}

/// How long an outbound's first bytes wait for the client's first payload
/// before they go alone ([`Relayed::holds_first_bytes`]): v2ray's and
/// Xray's wait for the same.
pub const FIRST_PAYLOAD_WAIT: Duration = Duration::from_millis(100);

/// A stream that seals what it sends where the relay read it.
pub trait Fills {
    /// Reads once from `from` into its own buffer and sends it on, sealed;
    /// `Ready(Ok(0))` is `from`'s end of stream.
    fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>>;
}

/// A stream that hands the relay opened payload from where it was opened.
pub trait Drains {
    /// Writes opened payload to `to` once; `Ready(Ok(0))` is the end of
    /// its stream.
    fn poll_drain_into(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut (dyn AsyncWrite + Unpin),
    ) -> Poll<io::Result<usize>>;
}

impl Relayed for TcpStream {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
}

impl Relayed for Stream {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        self.as_plain_tcp()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        Stream::local_addr(self).ok()
    }

    /// A WebSocket or gun stream decodes in its reader's buffer, so it is
    /// only filled.
    fn fills(&mut self) -> Option<&mut dyn Fills> {
        match self {
            Stream::Ws(ws) => Some(&mut **ws),
            Stream::Grpc(grpc) => Some(&mut **grpc),
            Stream::Tcp(_) | Stream::Tls(_) => None,
        }
    }

    /// A TLS session's records (16 KiB of plaintext each) go out and come
    /// in up to [`WIRE_BUF`] at a time: a relay read of as much seals or
    /// opens several, so the plain socket at the other end is read or
    /// written once for them all, not once a record. A WebSocket's frames
    /// are up to [`FRAME_BUF`] long: a relay read of as much takes one
    /// whole, so the other end is written once a frame.
    fn buffer_len(&mut self) -> usize {
        match self {
            Stream::Tls(_) => WIRE_BUF,
            Stream::Ws(_) => FRAME_BUF,
            Stream::Tcp(_) | Stream::Grpc(_) => RELAY_BUF,
        }
    }
}

/// A stream with bytes read ahead of it is the stream itself once they are
/// read: before, the kernel must not move its bytes past them. What is
/// written to it goes to the stream as it is.
impl Relayed for Prefixed<Stream> {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        if self.pending().is_empty() {
            self.get_mut().as_plain_tcp()
        } else {
            None
        }
    }

    fn fills(&mut self) -> Option<&mut dyn Fills> {
        self.get_mut().fills()
    }

    fn buffer_len(&mut self) -> usize {
        self.get_mut().buffer_len()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        Relayed::local_addr(self.get_ref())
    }
}

impl<T: Relayed + ?Sized> Relayed for Box<T> {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        (**self).plain_tcp()
    }

    fn fills(&mut self) -> Option<&mut dyn Fills> {
        (**self).fills()
    }

    fn drains(&mut self) -> Option<&mut dyn Drains> {
        (**self).drains()
    }

    fn buffer_len(&mut self) -> usize {
        (**self).buffer_len()
    }

    fn holds_first_bytes(&self) -> bool {
        (**self).holds_first_bytes()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        (**self).local_addr()
    }
}

/// A WebSocket is filled: the relay reads straight behind a frame
/// header's room, so a frame costs no copy and fits one TLS record.
impl Fills for WsStream {
    fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        WsStream::poll_fill_from(self, cx, from)
    }
}

/// A gun stream is filled: the relay reads straight behind a message
/// header's room, up to a whole message a read, with no copy into it.
impl Fills for GrpcStream {
    fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        GrpcStream::poll_fill_from(self, cx, from)
    }
}

impl<S: Relayed, C: StreamCodec + Unpin, const BUF: usize> Relayed for Framed<S, C, BUF> {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.get_ref().local_addr()
    }

    fn fills(&mut self) -> Option<&mut dyn Fills> {
        Some(self)
    }

    fn drains(&mut self) -> Option<&mut dyn Drains> {
        Some(self)
    }

    fn holds_first_bytes(&self) -> bool {
        self.holds_header()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin, C: StreamCodec + Unpin, const BUF: usize> Fills
    for Framed<S, C, BUF>
{
    fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        Framed::poll_fill_from(self, cx, from)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin, C: StreamCodec + Unpin, const BUF: usize> Drains
    for Framed<S, C, BUF>
{
    fn poll_drain_into(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut (dyn AsyncWrite + Unpin),
    ) -> Poll<io::Result<usize>> {
        Framed::poll_drain_into(self, cx, to)
    }
}

/// How a relay ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Both sides finished sending.
    Done,
    /// Nothing moved for the idle timeout.
    Idle,
}

/// Relays until both directions have ended, nothing moved for `idle`, the
/// guard's outbound version is closed, or either side fails.
pub async fn relay<C: Relayed, O: Relayed>(
    client: &mut C,
    outbound: &mut O,
    idle: Duration,
    guard: &mut Guard,
) -> io::Result<Ended> {
    let up = mode(client, outbound);
    let down = mode(outbound, client);
    relay_by([up, down], client, outbound, idle, guard).await
}

/// How one direction carries its bytes: in the kernel between two plain
/// sockets; else in a framed end's own buffers, the writer's first; else
/// through a buffer of the relay's.
fn mode<R: Relayed, W: Relayed>(from: &mut R, to: &mut W) -> Mode {
    if from.plain_tcp().is_some() && to.plain_tcp().is_some() {
        Mode::Splice
    } else if to.fills().is_some() {
        Mode::Fill
    } else if from.drains().is_some() {
        Mode::Drain
    } else {
        Mode::Buffer(from.buffer_len().max(to.buffer_len()))
    }
}

/// [`relay`] with each direction (up, down) carrying its bytes as `modes`
/// say.
async fn relay_by<C: Relayed, O: Relayed>(
    [up, down]: [Mode; 2],
    client: &mut C,
    outbound: &mut O,
    idle: Duration,
    guard: &mut Guard,
) -> io::Result<Ended> {
    let mut up = Half::new(up);
    let mut down = Half::new(down);
    let mut last = Instant::now();
    // While the outbound holds its first bytes, the timer fires when they
    // are to go alone; `release` once it has, until they went.
    let mut hold = outbound
        .holds_first_bytes()
        .then(|| last + FIRST_PAYLOAD_WAIT.min(idle));
    let mut release = false;
    let mut sleep = pin!(tokio::time::sleep_until(hold.unwrap_or(last + idle)));
    let mut drained = pin!(guard.closed());
    poll_fn(|cx| {
        let mut moved = false;
        if !up.done() {
            if let Poll::Ready(Err(e)) = up.poll(cx, client, outbound, &mut moved) {
                return Poll::Ready(Err(e));
            }
        }
        if !down.done() {
            if let Poll::Ready(Err(e)) = down.poll(cx, outbound, client, &mut moved) {
                return Poll::Ready(Err(e));
            }
        }
        if up.done() && down.done() {
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
            if hold.take().is_some() {
                release = true;
            }
            sleep.as_mut().reset(last + idle);
        }
        if release {
            if !outbound.holds_first_bytes() {
                release = false;
            } else if let Poll::Ready(done) = Pin::new(&mut *outbound).poll_flush(cx) {
                done?;
                release = false;
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::drain::Drain;
    use etemenanki_ir::spec::DrainPolicy;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    /// Every way a direction can carry its bytes; each test runs in both.
    const MODES: [Mode; 2] = [Mode::Splice, Mode::Buffer(RELAY_BUF)];

    /// Two connected socket pairs: (client app, proxy's client side) and
    /// (proxy's outbound side, server app).
    pub(crate) async fn pairs() -> (TcpStream, TcpStream, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        let c = TcpStream::connect(addr).await.unwrap();
        let (d, _) = listener.accept().await.unwrap();
        (a, b, c, d)
    }

    /// The client app, the server app, and the relay between them on its
    /// own task, closed by `drain`.
    async fn relayed(
        mode: Mode,
        idle: Duration,
        drain: &Drain,
    ) -> (TcpStream, TcpStream, JoinHandle<io::Result<Ended>>) {
        let (app, mut proxy_in, mut proxy_out, server) = pairs().await;
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            relay_by(
                [mode, mode],
                &mut proxy_in,
                &mut proxy_out,
                idle,
                &mut guard,
            )
            .await
        });
        (app, server, relay)
    }

    /// `len` bytes that differ from those of another `seed`.
    fn pattern(len: u32, seed: u32) -> Vec<u8> {
        (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
    }

    /// Writes `data` to `stream` and half-closes it, while reading
    /// everything the other side sends until it half-closes.
    pub(crate) async fn exchange(stream: TcpStream, data: Vec<u8>) -> Vec<u8> {
        let (mut read, mut write) = stream.into_split();
        let writer = tokio::spawn(async move {
            write.write_all(&data).await.unwrap();
            write.shutdown().await.unwrap();
            write
        });
        let mut got = Vec::new();
        read.read_to_end(&mut got).await.unwrap();
        drop(writer.await.unwrap());
        got
    }

    #[tokio::test]
    async fn half_close_propagates_both_ways_and_finishes() {
        for mode in MODES {
            let drain = Drain::default();
            let (mut app, mut server, relay) = relayed(mode, Duration::from_secs(30), &drain).await;
            app.write_all(b"request").await.unwrap();
            app.shutdown().await.unwrap();
            let mut got = Vec::new();
            server.read_to_end(&mut got).await.unwrap();
            assert_eq!(
                got, b"request",
                "{mode:?}: the server sees the client's EOF after its bytes"
            );
            // The other direction still works after the client half-closed.
            server.write_all(b"response").await.unwrap();
            server.shutdown().await.unwrap();
            let mut got = Vec::new();
            app.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"response", "{mode:?}");
            assert_eq!(relay.await.unwrap().unwrap(), Ended::Done, "{mode:?}");
        }
    }

    #[tokio::test]
    async fn the_server_half_closing_first_propagates_too() {
        for mode in MODES {
            let drain = Drain::default();
            let (mut app, mut server, relay) = relayed(mode, Duration::from_secs(30), &drain).await;
            server.write_all(b"banner").await.unwrap();
            server.shutdown().await.unwrap();
            let mut got = Vec::new();
            app.read_to_end(&mut got).await.unwrap();
            assert_eq!(
                got, b"banner",
                "{mode:?}: the client sees the server's EOF after its bytes"
            );
            app.write_all(b"late request").await.unwrap();
            app.shutdown().await.unwrap();
            let mut got = Vec::new();
            server.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"late request", "{mode:?}");
            assert_eq!(relay.await.unwrap().unwrap(), Ended::Done, "{mode:?}");
        }
    }

    #[tokio::test]
    async fn large_transfers_arrive_whole_in_both_directions_at_once() {
        transfer_both_ways().await;
    }

    /// The relay yields every READS_PER_POLL reads; on the runtime's own
    /// scheduler, with idle workers about, it is polled again each time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_transfers_arrive_whole_on_a_multi_thread_runtime_too() {
        transfer_both_ways().await;
    }

    async fn transfer_both_ways() {
        for mode in MODES {
            let drain = Drain::default();
            let (app, server, relay) = relayed(mode, Duration::from_secs(30), &drain).await;
            let up = pattern(6_000_000, 1);
            let down = pattern(5_000_001, 2);
            let (at_server, at_app) =
                tokio::join!(exchange(server, down.clone()), exchange(app, up.clone()));
            assert!(at_server == up, "{mode:?}: the bytes up differ");
            assert!(at_app == down, "{mode:?}: the bytes down differ");
            assert_eq!(relay.await.unwrap().unwrap(), Ended::Done, "{mode:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn relays_one_after_another_reuse_spare_pipes_cleanly() {
        // Each relay gives its pipes back when it runs dry; the next one
        // must find them empty.
        for round in 0..8u32 {
            let drain = Drain::default();
            let (app, server, relay) = relayed(Mode::Splice, Duration::from_secs(30), &drain).await;
            let up = pattern(300_000 + round, round);
            let down = pattern(200_000 + round, round + 100);
            let (at_server, at_app) =
                tokio::join!(exchange(server, down.clone()), exchange(app, up.clone()));
            assert!(at_server == up && at_app == down, "round {round}");
            relay.await.unwrap().unwrap();
        }
        // The relays ran on this thread (a current-thread runtime) and
        // carried their bytes in pipes, which are spares now.
        assert!(pool::spare_pipes() > 0, "the relays used pipes");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_relay_ended_by_a_reset_gives_its_pipe_back() {
        // Short connections mostly end with the client's reset; the read
        // that fails on it must hand the (empty) pipe back, not close it.
        let drain = Drain::default();
        let (mut app, mut server, relay) =
            relayed(Mode::Splice, Duration::from_secs(30), &drain).await;
        app.write_all(b"x").await.unwrap();
        let mut got = [0u8; 1];
        server.read_exact(&mut got).await.unwrap();
        socket2::SockRef::from(&app)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(app);
        let err = relay.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        // This test's thread made only the one pipe the client's direction
        // used; it is a spare again.
        assert_eq!(pool::spare_pipes(), 1, "the reset relay kept its pipe");
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_moving_for_the_idle_timeout_ends_the_relay() {
        for mode in MODES {
            let drain = Drain::default();
            let (mut app, mut server, relay) =
                relayed(mode, Duration::from_secs(300), &drain).await;
            // Bytes that moved once do not keep an idle relay alive.
            app.write_all(b"ping").await.unwrap();
            let mut got = [0u8; 4];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(relay.await.unwrap().unwrap(), Ended::Idle, "{mode:?}");
            let mut rest = Vec::new();
            server.read_to_end(&mut rest).await.unwrap();
            assert!(
                rest.is_empty(),
                "{mode:?}: the relay closed the server side"
            );
        }
    }

    #[tokio::test]
    async fn a_close_drain_aborts_an_idle_relay() {
        for mode in MODES {
            let drain = Drain::default();
            let (_app, _server, relay) = relayed(mode, Duration::from_secs(300), &drain).await;
            drain.apply(DrainPolicy::Close);
            let err = relay.await.unwrap().unwrap_err();
            assert_eq!(err.to_string(), DRAINED, "{mode:?}");
        }
    }

    #[tokio::test]
    async fn a_close_drain_aborts_a_relay_mid_transfer() {
        const TOTAL: usize = 64 << 20;
        for mode in MODES {
            let drain = Drain::default();
            let (app, mut server, relay) = relayed(mode, Duration::from_secs(300), &drain).await;
            let (_app_read, mut app_write) = app.into_split();
            // The client sends far more than the relay lets through before
            // the drain; its writes fail once the relay is gone.
            let writer = tokio::spawn(async move {
                let chunk = vec![7u8; 64 * 1024];
                let mut sent = 0;
                while sent < TOTAL {
                    if app_write.write_all(&chunk).await.is_err() {
                        break;
                    }
                    sent += chunk.len();
                }
                sent
            });
            let mut got = vec![0u8; 1 << 20];
            server.read_exact(&mut got).await.unwrap();
            drain.apply(DrainPolicy::Close);
            let err = relay.await.unwrap().unwrap_err();
            assert_eq!(err.to_string(), DRAINED, "{mode:?}");
            // The relay's sockets are closed: the server's stream ends
            // (cleanly or by reset) before the client finished sending.
            let mut rest = Vec::new();
            let received = got.len()
                + server
                    .read_to_end(&mut rest)
                    .await
                    .map_or(0, |_| rest.len());
            assert!(received < TOTAL, "{mode:?}: the drain stopped the transfer");
            assert!(
                writer.await.unwrap() < TOTAL,
                "{mode:?}: the client's writes failed"
            );
        }
    }

    #[tokio::test]
    async fn a_relay_to_blackhole_gives_the_client_eof_and_swallows_its_bytes() {
        let (mut app, mut proxy_in, _c, _d) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            let mut outbound = crate::outbound::Blackhole;
            relay(
                &mut proxy_in,
                &mut outbound,
                Duration::from_secs(30),
                &mut guard,
            )
            .await
        });
        let mut got = Vec::new();
        app.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty(), "blackhole sends nothing");
        app.write_all(&pattern(100_000, 3)).await.unwrap();
        app.shutdown().await.unwrap();
        assert_eq!(relay.await.unwrap().unwrap(), Ended::Done);
    }

    #[tokio::test]
    async fn buffered_relays_take_their_buffers_from_the_pool_and_give_them_back() {
        let mut spares = None;
        for round in 0..4u32 {
            let drain = Drain::default();
            let (app, server, relay) =
                relayed(Mode::Buffer(RELAY_BUF), Duration::from_secs(30), &drain).await;
            let up = pattern(200_000 + round, round);
            let down = pattern(100_000 + round, round + 7);
            let (at_server, at_app) =
                tokio::join!(exchange(server, down.clone()), exchange(app, up.clone()));
            assert!(at_server == up && at_app == down, "round {round}");
            relay.await.unwrap().unwrap();
            // At most one buffer per direction was in flight; they are
            // spares again, and later rounds reuse them instead of
            // allocating more.
            let now = crate::buffers::spares(RELAY_BUF);
            assert!((1..=2).contains(&now), "round {round}: {now} spares");
            assert_eq!(*spares.get_or_insert(now), now, "round {round}");
        }
    }

    /// A socket that is not plain (as a TLS session over it is not) and
    /// asks for `WIRE_BUF` relay buffers.
    struct Wide(TcpStream);

    impl AsyncRead for Wide {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Wide {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    impl Relayed for Wide {
        fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
            None
        }

        fn buffer_len(&mut self) -> usize {
            WIRE_BUF
        }
    }

    #[tokio::test]
    async fn both_directions_take_the_larger_buffer_of_their_two_ends() {
        let (app, mut proxy_in, proxy_out, server) = pairs().await;
        let mut wide = Wide(proxy_out);
        assert_eq!(mode(&mut proxy_in, &mut wide), Mode::Buffer(WIRE_BUF));
        assert_eq!(mode(&mut wide, &mut proxy_in), Mode::Buffer(WIRE_BUF));
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            let idle = Duration::from_secs(30);
            relay(&mut proxy_in, &mut wide, idle, &mut guard).await
        });
        let up = pattern(1_000_000, 5);
        let down = pattern(700_001, 6);
        let (at_server, at_app) =
            tokio::join!(exchange(server, down.clone()), exchange(app, up.clone()));
        assert!(at_server == up && at_app == down);
        assert_eq!(relay.await.unwrap().unwrap(), Ended::Done);
        // The relay ran on this thread and carried its bytes in buffers of
        // WIRE_BUF bytes, which are spares now.
        assert!(crate::buffers::spares(WIRE_BUF) > 0);
    }
}
