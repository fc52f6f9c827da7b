//! A TCP flow inside the tunnel. Its bytes wait in its own smoltcp socket
//! buffers: a write the send buffer has no room for is `Pending` until the
//! peer acknowledges, so a flow whose far end stops reading stops its
//! client, and no other flow of the tunnel waits behind it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::tunnel::{tunnel_gone, Tunnel};

pub struct WgStream {
    tunnel: Arc<Tunnel>,
    handle: SocketHandle,
    port: u16,
    /// The peer's FIN was read: a later close is no reset.
    eof: bool,
}

impl WgStream {
    pub(crate) fn new(tunnel: Arc<Tunnel>, handle: SocketHandle, port: u16) -> WgStream {
        WgStream {
            tunnel,
            handle,
            port,
            eof: false,
        }
    }

    /// Ready once the connection is established; an error when the peer's
    /// side refused it or the tunnel stopped.
    pub(crate) fn poll_established(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut stack = self.tunnel.lock();
        let down = stack.down;
        let socket = stack.sockets.get_mut::<tcp::Socket>(self.handle);
        match socket.state() {
            tcp::State::SynSent | tcp::State::SynReceived if !down => {
                socket.register_send_waker(cx.waker());
                Poll::Pending
            }
            tcp::State::Closed | tcp::State::SynSent | tcp::State::SynReceived => {
                Poll::Ready(Err(if down {
                    tunnel_gone()
                } else {
                    io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused")
                }))
            }
            _ => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncRead for WgStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut stack = this.tunnel.lock();
        let down = stack.down;
        let socket = stack.sockets.get_mut::<tcp::Socket>(this.handle);
        if socket.can_recv() {
            // Past half full, the window this read opens must be announced.
            let window_low = socket.recv_queue() > socket.recv_capacity() / 2;
            return match socket.recv_slice(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    drop(stack);
                    if window_low {
                        this.tunnel.poke();
                    }
                    Poll::Ready(Ok(()))
                }
                Err(_) => Poll::Ready(Err(reset())),
            };
        }
        if socket.may_recv() {
            socket.register_recv_waker(cx.waker());
            return Poll::Pending;
        }
        if down {
            return Poll::Ready(Err(tunnel_gone()));
        }
        match socket.state() {
            // Closed without the peer's FIN: a reset, or our own timeout.
            tcp::State::Closed if !this.eof => Poll::Ready(Err(reset())),
            _ => {
                this.eof = true;
                Poll::Ready(Ok(()))
            }
        }
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "wireguard: connection reset inside the tunnel",
    )
}

impl AsyncWrite for WgStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut stack = this.tunnel.lock();
        let down = stack.down;
        let socket = stack.sockets.get_mut::<tcp::Socket>(this.handle);
        if !socket.may_send() {
            return Poll::Ready(Err(if down {
                tunnel_gone()
            } else {
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "wireguard: the connection inside the tunnel is closed for sending",
                )
            }));
        }
        if !socket.can_send() {
            socket.register_send_waker(cx.waker());
            return Poll::Pending;
        }
        match socket.send_slice(buf) {
            Ok(n) => {
                drop(stack);
                this.tunnel.poke();
                Poll::Ready(Ok(n))
            }
            Err(_) => Poll::Ready(Err(reset())),
        }
    }

    /// Bytes leave as the peer's window allows; nothing is held here.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Sends FIN after what is buffered; reading goes on.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tunnel
            .lock()
            .sockets
            .get_mut::<tcp::Socket>(this.handle)
            .close();
        this.tunnel.poke();
        Poll::Ready(Ok(()))
    }
}

impl Drop for WgStream {
    fn drop(&mut self) {
        self.tunnel.lock().release_tcp(self.handle, self.port);
        self.tunnel.poke();
    }
}
