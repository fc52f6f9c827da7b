//! One TCP session of a Mux.Cool connection as a stream of its own, served
//! like any accepted flow: reads take the bytes of the client's keep
//! frames, writes become keep frames, a shutdown the session's end frame.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use etemenanki_proto::mux::DATA_HEADER_LEN;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::hub::{gone, lock, Hub, SESSION_BUF, SESSION_DATA};
use crate::buffers;
use crate::relay::Relayed;

pub struct Session {
    hub: Arc<Mutex<Hub>>,
    slot: usize,
}

fn aborted() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "mux: the client aborted the session",
    )
}

impl Session {
    pub fn new(hub: Arc<Mutex<Hub>>, slot: usize) -> Session {
        Session { hub, slot }
    }
}

impl AsyncRead for Session {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut hub = lock(&self.hub);
        if hub.gone {
            return Poll::Ready(Err(gone()));
        }
        let Some(slot) = hub.slot(self.slot) else {
            return Poll::Ready(Err(gone()));
        };
        if slot.aborted {
            return Poll::Ready(Err(aborted()));
        }
        if let Some(up) = &slot.up {
            let n = slot.up_at.len().min(buf.remaining());
            buf.put_slice(&up[slot.up_at.start..slot.up_at.start + n]);
            slot.up_at.start += n;
            if slot.up_at.is_empty() {
                if let Some(up) = slot.up.take() {
                    buffers::give(up);
                }
                slot.up_at = 0..0;
            }
            if hub.stalled {
                hub.stalled = false;
                hub.wake_mux();
            }
            return Poll::Ready(Ok(()));
        }
        if slot.up_end {
            return Poll::Ready(Ok(()));
        }
        slot.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for Session {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let at = self.slot;
        let mut hub = lock(&self.hub);
        if hub.gone {
            return Poll::Ready(Err(gone()));
        }
        let Some(slot) = hub.slot(at) else {
            return Poll::Ready(Err(gone()));
        };
        if slot.aborted {
            return Poll::Ready(Err(aborted()));
        }
        if slot.shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if slot.sending || slot.down_len == SESSION_DATA {
            slot.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let down = slot.down.get_or_insert_with(|| buffers::take(SESSION_BUF));
        let n = data.len().min(SESSION_DATA - slot.down_len);
        let start = DATA_HEADER_LEN + slot.down_len;
        down[start..start + n].copy_from_slice(&data[..n]);
        slot.down_len += n;
        hub.queue(at);
        Poll::Ready(Ok(n))
    }

    /// The connection's task sends what was written as soon as it can;
    /// nothing is held back for a flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// The session's end frame goes after its bytes.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let at = self.slot;
        let mut hub = lock(&self.hub);
        if let Some(slot) = hub.slot(at) {
            slot.shut = true;
        }
        hub.queue(at);
        Poll::Ready(Ok(()))
    }
}

impl Relayed for Session {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
}

impl Drop for Session {
    /// The end frame (with the error bit, unless the session was shut
    /// down) goes after the bytes not yet sent, and the slot is freed.
    fn drop(&mut self) {
        let at = self.slot;
        let mut hub = lock(&self.hub);
        if let Some(slot) = hub.slot(at) {
            slot.dropped = true;
            if let Some(up) = slot.up.take() {
                buffers::give(up);
            }
            slot.up_at = 0..0;
        }
        hub.queue(at);
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use etemenanki_proto::mux::Server;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::inbound::mux::hub::Slot;

    /// A hub with one TCP session's slot, and that session's stream.
    fn session() -> (Arc<Mutex<Hub>>, Session) {
        let mut server = Server::new();
        let mut open = vec![0, 12, 0, 1, 1, 0, 1, 0, 80, 1, 192, 0, 2, 1];
        open[1] = (open.len() - 2) as u8;
        let step = server.open_frame(&open).unwrap().unwrap();
        let etemenanki_proto::mux::Event::Open { key, .. } = step.event else {
            panic!("an open")
        };
        let hub = Arc::new(Mutex::new(Hub::default()));
        lock(&hub).slots.push(Some(Slot::new(key)));
        (hub.clone(), Session::new(hub, 0))
    }

    #[tokio::test]
    async fn a_session_holds_a_buffer_only_while_its_bytes_wait() {
        let (hub, mut session) = session();
        {
            let mut hub = lock(&hub);
            let slot = hub.slot(0).unwrap();
            assert!(slot.up.is_none() && slot.down.is_none(), "idle: no buffer");
            let mut up = buffers::take(SESSION_BUF);
            up[..5].copy_from_slice(b"hello");
            slot.up = Some(up);
            slot.up_at = 0..5;
        }
        let mut got = [0u8; 3];
        session.read_exact(&mut got).await.unwrap();
        assert!(lock(&hub).slot(0).unwrap().up.is_some(), "two bytes left");
        session.read_exact(&mut got[..2]).await.unwrap();
        assert!(
            lock(&hub).slot(0).unwrap().up.is_none(),
            "drained: given back"
        );

        // Writes fill one frame's worth, then wait for it to be sent.
        let big = vec![7u8; SESSION_DATA + 10];
        let n = poll_fn(|cx| Pin::new(&mut session).poll_write(cx, &big))
            .await
            .unwrap();
        assert_eq!(n, SESSION_DATA);
        {
            let hub = lock(&hub);
            assert_eq!(hub.ready, [0], "queued once for the connection's task");
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut session)
            .poll_write(&mut cx, b"x")
            .is_pending());
        {
            // The connection's task sends the bytes and gives the buffer
            // back.
            let mut hub = lock(&hub);
            let slot = hub.slot(0).unwrap();
            let down = slot.down.take().unwrap();
            buffers::give(down);
            slot.down_len = 0;
        }
        session.write_all(b"x").await.unwrap();
        session.shutdown().await.unwrap();
        let slot_state = {
            let mut hub = lock(&hub);
            let slot = hub.slot(0).unwrap();
            (slot.down_len, slot.shut)
        };
        assert_eq!(slot_state, (1, true));
        // The client's end is the session's end of stream.
        lock(&hub).slot(0).unwrap().up_end = true;
        assert_eq!(session.read(&mut got).await.unwrap(), 0);
        drop(session);
        assert!(lock(&hub).slot(0).unwrap().dropped);
    }
}
