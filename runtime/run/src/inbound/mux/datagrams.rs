//! The UDP sessions of a Mux.Cool connection as the one link its UDP
//! association relays: the client's packets as the connection's task
//! hands them over, one at a time, and replies handed back to it to seal
//! in the session that asked.

use std::io;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use etemenanki_proto::mux::REPLY_HEADROOM;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use super::hub::{lock, Hub};
use crate::buffers;
use crate::outbound::DatagramLink;

pub struct Datagrams<const BUF: usize> {
    hub: Arc<Mutex<Hub>>,
}

impl<const BUF: usize> Datagrams<BUF> {
    pub fn new(hub: Arc<Mutex<Hub>>) -> Self {
        Datagrams { hub }
    }
}

/// The association ends with the client's stream.
fn ended() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the client closed the stream the datagrams ride on",
    )
}

impl<const BUF: usize> DatagramLink for Datagrams<BUF> {
    /// A reply too long for the buffer is dropped, as UDP may.
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        let mut hub = lock(&self.hub);
        if hub.gone || hub.udp.ended {
            return Poll::Ready(Err(ended()));
        }
        if hub.udp.down.is_some() {
            hub.udp.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        if REPLY_HEADROOM + payload.len() <= BUF {
            let mut buf = buffers::take(BUF);
            buf[REPLY_HEADROOM..REPLY_HEADROOM + payload.len()].copy_from_slice(payload);
            hub.udp.down = Some((buf, payload.len(), to.clone()));
            hub.wake_mux();
        }
        Poll::Ready(Ok(()))
    }

    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let mut hub = lock(&self.hub);
        if hub.gone {
            return Poll::Ready(Err(ended()));
        }
        let Some((packet, len, to)) = hub.udp.up.take() else {
            if hub.udp.ended {
                return Poll::Ready(Err(ended()));
            }
            hub.udp.reader = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let n = len.min(buf.remaining());
        buf.put_slice(&packet[..n]);
        buffers::give(packet);
        if hub.stalled {
            hub.stalled = false;
            hub.wake_mux();
        }
        Poll::Ready(Ok(to))
    }
}

impl<const BUF: usize> Drop for Datagrams<BUF> {
    /// The association ended (idle, or failed): a later packet starts
    /// another.
    fn drop(&mut self) {
        let mut hub = lock(&self.hub);
        hub.udp.running = false;
        hub.udp.release();
        hub.wake_mux();
    }
}
