//! The loopback servers every measurement talks to: a TCP echo, a TCP sink,
//! an idle TCP server and a UDP echo. They run on one tokio thread of their
//! own for the life of the benchmark, so they cost the same whichever proxy
//! sits in front of them.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// The sink acknowledges every this many bytes; bulk transfers send a
/// multiple of it.
pub const ACK_EVERY: u64 = 4 << 20;

/// The servers' addresses, and how many connections the idle server holds.
pub struct Servers {
    pub echo: SocketAddr,
    pub sink: SocketAddr,
    pub idle: SocketAddr,
    pub udp_echo: SocketAddr,
    idle_open: Arc<AtomicUsize>,
}

impl Servers {
    /// Binds every server on 127.0.0.1 and starts them on a background
    /// thread; they stop when the process exits.
    pub fn start() -> io::Result<Servers> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (echo, sink, idle, udp) = runtime.block_on(async {
            let any: SocketAddr = ([127, 0, 0, 1], 0).into();
            io::Result::Ok((
                TcpListener::bind(any).await?,
                TcpListener::bind(any).await?,
                TcpListener::bind(any).await?,
                UdpSocket::bind(any).await?,
            ))
        })?;
        let idle_open = Arc::new(AtomicUsize::new(0));
        let servers = Servers {
            echo: echo.local_addr()?,
            sink: sink.local_addr()?,
            idle: idle.local_addr()?,
            udp_echo: udp.local_addr()?,
            idle_open: idle_open.clone(),
        };
        std::thread::Builder::new()
            .name("bench-servers".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::spawn(accept_loop(echo, echo_conn));
                    tokio::spawn(accept_loop(sink, sink_conn));
                    tokio::spawn(accept_loop(idle, move |s| idle_conn(s, idle_open.clone())));
                    udp_echo(udp).await;
                })
            })?;
        Ok(servers)
    }

    /// Connections the idle server has accepted and not yet seen closed.
    pub fn idle_open(&self) -> usize {
        self.idle_open.load(Ordering::SeqCst)
    }
}

async fn accept_loop<F, Fut>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream));
            }
            // Out of descriptors or a reset before accept: the measurement
            // that caused it reports the failure from the client side.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

/// Echoes the first read and closes. Closing first puts the TIME_WAIT of
/// the proxy's outgoing connection on the server's fixed port rather than
/// on an ephemeral port of the proxy (see `measure::connects`).
async fn echo_conn(mut stream: TcpStream) {
    let mut buf = [0u8; 1024];
    if let Ok(n @ 1..) = stream.read(&mut buf).await {
        let _ = stream.write_all(&buf[..n]).await;
    }
}

/// Reads until end of stream, and each time another [`ACK_EVERY`] bytes
/// have arrived answers with the count so far (u64, big endian): the client
/// stops its clock when the count of everything it sent comes back. Counts
/// rather than a half-close, since microsocks and v2ray close both ways on
/// the first end of stream.
async fn sink_conn(mut stream: TcpStream) {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total: u64 = 0;
    let mut next_ack = ACK_EVERY;
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        total += n as u64;
        while total >= next_ack {
            if stream.write_all(&next_ack.to_be_bytes()).await.is_err() {
                return;
            }
            next_ack += ACK_EVERY;
        }
    }
}

/// Holds the connection, reading nothing until the peer closes it.
async fn idle_conn(mut stream: TcpStream, open: Arc<AtomicUsize>) {
    open.fetch_add(1, Ordering::SeqCst);
    // Open until the far end closes: a protocol client that sends its
    // request only with the first payload is sent one byte (see
    // measure::idle), which must not count as a close.
    let mut buf = [0u8; 64];
    while let Ok(1..) = stream.read(&mut buf).await {}
    open.fetch_sub(1, Ordering::SeqCst);
}

/// Sends every datagram back to where it came from.
async fn udp_echo(socket: UdpSocket) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(&buf[..n], from).await;
        }
    }
}
