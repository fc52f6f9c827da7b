//! A UDP link inside the tunnel: one smoltcp socket on a port of its own,
//! each datagram sent to its own address and received with its source.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use smoltcp::iface::SocketHandle;
use smoltcp::socket::udp;
use tokio::io::ReadBuf;

use crate::tunnel::{tunnel_gone, Tunnel};

pub struct WgUdp {
    tunnel: Arc<Tunnel>,
    handle: SocketHandle,
    port: u16,
}

impl WgUdp {
    pub(crate) fn new(tunnel: Arc<Tunnel>, handle: SocketHandle, port: u16) -> WgUdp {
        WgUdp {
            tunnel,
            handle,
            port,
        }
    }

    /// Sends `payload` to `to`: `Pending` while the socket's buffer is
    /// full; a datagram to a family the tunnel has no address in is
    /// dropped, as UDP drops what it cannot route.
    pub fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: SocketAddr,
    ) -> Poll<io::Result<()>> {
        let mut stack = self.tunnel.lock();
        if stack.down {
            return Poll::Ready(Err(tunnel_gone()));
        }
        let socket = stack.sockets.get_mut::<udp::Socket>(self.handle);
        match socket.send_slice(payload, to) {
            Ok(()) => {
                drop(stack);
                self.tunnel.poke();
                Poll::Ready(Ok(()))
            }
            Err(udp::SendError::BufferFull) => {
                socket.register_send_waker(cx.waker());
                Poll::Pending
            }
            Err(udp::SendError::Unaddressable) => {
                tracing::debug!("wireguard: dropping a datagram to unaddressable {to}");
                Poll::Ready(Ok(()))
            }
        }
    }

    /// The next datagram, truncated to `buf` if it does not fit.
    pub fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let mut stack = self.tunnel.lock();
        if stack.down {
            return Poll::Ready(Err(tunnel_gone()));
        }
        let socket = stack.sockets.get_mut::<udp::Socket>(self.handle);
        match socket.recv() {
            Ok((payload, meta)) => {
                let n = payload.len().min(buf.remaining());
                buf.put_slice(&payload[..n]);
                let from = SocketAddr::new(meta.endpoint.addr.into(), meta.endpoint.port);
                Poll::Ready(Ok(from))
            }
            Err(_) => {
                socket.register_recv_waker(cx.waker());
                Poll::Pending
            }
        }
    }
}

impl Drop for WgUdp {
    fn drop(&mut self) {
        self.tunnel.lock().release_udp(self.handle, self.port);
    }
}
