//! A UDP session of a Mux.Cool connection as the link its association
//! relays: the client's packets as the connection's task hands them over,
//! one at a time, and replies handed back to it to seal in the session's
//! keep frames.

use std::io;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use etemenanki_proto::mux::{Key, REPLY_HEADROOM};
use etemenanki_proto::Address;
use tokio::io::ReadBuf;

use super::hub::{lock, Hub};
use crate::buffers;
use crate::outbound::DatagramLink;

pub struct Datagrams<const BUF: usize> {
    hub: Arc<Mutex<Hub>>,
    /// The session's slot; it is another's once the key differs.
    at: usize,
    key: Key,
}

impl<const BUF: usize> Datagrams<BUF> {
    pub fn new(hub: Arc<Mutex<Hub>>, at: usize, key: Key) -> Self {
        Datagrams { hub, at, key }
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
        if hub.gone || hub.udp_ended {
            return Poll::Ready(Err(ended()));
        }
        let Some(udp) = hub.udp(self.at, self.key) else {
            return Poll::Ready(Err(ended()));
        };
        if udp.down.is_some() {
            udp.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        if REPLY_HEADROOM + payload.len() <= BUF {
            let mut buf = buffers::take(BUF);
            buf[REPLY_HEADROOM..REPLY_HEADROOM + payload.len()].copy_from_slice(payload);
            udp.down = Some((buf, payload.len(), to.clone()));
            hub.udp_ready.push_back(self.at);
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
        let ended_all = hub.gone || hub.udp_ended;
        let Some(udp) = hub.udp(self.at, self.key) else {
            return Poll::Ready(Err(ended()));
        };
        let Some((packet, len, to)) = udp.up.take() else {
            if ended_all {
                return Poll::Ready(Err(ended()));
            }
            udp.reader = Some(cx.waker().clone());
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
        if let Some(udp) = hub.udp(self.at, self.key) {
            udp.running = false;
            udp.task = None;
            udp.release();
        }
        hub.wake_mux();
    }
}
