//! A Mux.Cool connection (VLESS's and VMess's mux command): one task reads
//! the client's frames and writes this side's, and each session is served
//! like any accepted flow. A TCP session is a [`Session`] stream, routed
//! by its target, dialed and relayed in a task of its own; each UDP
//! session is an association of its own ([`Datagrams`]), started by its
//! first packet, each packet routed by the fan-out, as v2ray dispatches
//! each session: two sessions sending to one destination each get their
//! own socket, and their own replies. Every session's task lives
//! in the connection's task and shares its admission: when the connection
//! ends, they all end.
//!
//! - Reading: frames are read into a buffer of `BUF` bytes (a frame longer
//!   fails the connection) and their data copied into the session's
//!   buffer. A session that has not taken its bytes stalls the reading,
//!   as v2ray's does: Mux.Cool has no flow control of its own, and nothing
//!   is buffered without bound or dropped.
//! - Writing: each session's bytes go out in keep frames, in turn, the end
//!   frame after its last ones; a UDP reply in a keep frame of its
//!   session naming its source; end frames owed in answer to the client's frames.
//! - Ends: the client's end frame shuts the target's write side; the
//!   target's end sends the session's end frame (with the error bit when
//!   the session failed, a dial for one). The client's stream ending is
//!   every session's end from the client; the connection ends when its
//!   sessions have, or once nothing moved for the relay's idle timeout.

mod datagrams;
mod hub;
mod session;

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use etemenanki_proto::codec::{FlowKind, ServerRequest};
use etemenanki_proto::mux::{Event, Key, Server, Step, DATA_HEADER_LEN, END_LEN, REPLY_HEADROOM};
use etemenanki_proto::Address;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::handshake::open_and_relay;
use super::Shared;
use crate::buffers;
use datagrams::Datagrams;
use hub::{lock, Hub, Slot};
use session::Session;

/// Frames handled in one poll before yielding to the rest of the runtime.
const STEPS_PER_POLL: u32 = 32;

/// The most end frames sent in one write.
const CONTROL_FRAMES: usize = 8;

/// Serves the Mux.Cool stream `client` after `header` (the server's
/// answer, if it is sent in clear); `early` is what the client sent after
/// its request, the first frames.
pub async fn serve<S, const BUF: usize>(
    shared: &Arc<Shared>,
    mut client: S,
    peer: SocketAddr,
    early: &[u8],
    header: &[u8],
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if !header.is_empty() {
        client.write_all(header).await?;
        client.flush().await?;
    }
    if early.len() > BUF {
        return Err(frame_too_large());
    }
    let mut conn = Connection::<S, BUF> {
        shared: shared.clone(),
        peer,
        client,
        server: Server::new(),
        hub: Arc::new(Mutex::new(Hub::default())),
        tasks: JoinSet::new(),
        read: None,
        filled: 0..0,
        pending: None,
        eof: false,
        sending: None,
        unflushed: false,
    };
    if !early.is_empty() {
        let mut buf = buffers::take(BUF);
        buf[..early.len()].copy_from_slice(early);
        conn.read = Some(buf);
        conn.filled = 0..early.len();
    }
    let idle = shared.limits.load().relay_idle_timeout;
    let mut last = Instant::now();
    let mut sleep = pin!(tokio::time::sleep_until(last + idle));
    poll_fn(|cx| {
        let mut steps = 0;
        loop {
            let moved = match conn.poll_step(cx) {
                Poll::Ready(Ok(moved)) => moved,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => false,
            };
            if conn.finished() {
                return Poll::Ready(Ok(()));
            }
            if !moved {
                break;
            }
            last = Instant::now();
            steps += 1;
            if steps == STEPS_PER_POLL {
                return etemenanki_transport::yield_task(cx);
            }
        }
        while sleep.as_mut().poll(cx).is_ready() {
            if last.elapsed() >= idle {
                return Poll::Ready(Ok(()));
            }
            sleep.as_mut().reset(last + idle);
        }
        Poll::Pending
    })
    .await
}

fn frame_too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "upstream frame larger than the client runtime's buffer",
    )
}

/// A frame's data waiting for its session to take it: where it lies in
/// the read buffer.
enum Pending {
    Tcp {
        slot: usize,
        data: Range<usize>,
    },
    Udp {
        slot: usize,
        to: Address,
        data: Range<usize>,
    },
}

/// What is being written to the client.
enum Sending {
    /// A keep frame of the session in `slot`, in its own buffer.
    Session {
        slot: usize,
        buf: Box<[u8]>,
        at: Range<usize>,
    },
    /// A UDP reply's keep frame, of the session in `slot`.
    Udp {
        slot: usize,
        buf: Box<[u8]>,
        at: Range<usize>,
    },
    /// End frames.
    Control {
        bytes: [u8; END_LEN * CONTROL_FRAMES],
        at: Range<usize>,
    },
}

impl Sending {
    fn rest(&self) -> &[u8] {
        match self {
            Sending::Session { buf, at, .. } | Sending::Udp { buf, at, .. } => &buf[at.clone()],
            Sending::Control { bytes, at } => &bytes[at.clone()],
        }
    }

    fn advance(&mut self, n: usize) {
        match self {
            Sending::Session { at, .. } | Sending::Udp { at, .. } | Sending::Control { at, .. } => {
                at.start += n
            }
        }
    }
}

struct Connection<S, const BUF: usize> {
    shared: Arc<Shared>,
    peer: SocketAddr,
    client: S,
    server: Server,
    hub: Arc<Mutex<Hub>>,
    tasks: JoinSet<()>,
    /// Bytes read, `read[filled]` not yet taken.
    read: Option<Box<[u8]>>,
    filled: Range<usize>,
    pending: Option<Pending>,
    /// The client ended its stream.
    eof: bool,
    sending: Option<Sending>,
    unflushed: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin, const BUF: usize> Connection<S, BUF> {
    /// Moves what can move: `Ready(Ok(true))` when something did.
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        {
            let mut hub = lock(&self.hub);
            if !hub.mux.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                hub.mux = Some(cx.waker().clone());
            }
        }
        let mut moved = false;
        while let Poll::Ready(Some(_)) = self.tasks.poll_join_next(cx) {}
        match self.poll_write(cx) {
            Poll::Ready(Ok(wrote)) => moved |= wrote,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        match self.poll_read(cx) {
            Poll::Ready(Ok(())) => moved = true,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        Poll::Ready(Ok(moved))
    }

    /// Whether the client ended and every session with it.
    fn finished(&self) -> bool {
        if !self.eof || self.sending.is_some() || self.server.owes() {
            return false;
        }
        let hub = lock(&self.hub);
        hub.slots.iter().all(Option::is_none)
            && hub
                .udp
                .iter()
                .flatten()
                .all(|udp| !udp.running && udp.down.is_none())
    }

    /// Writes what there is to send; `Ready(Ok(true))` when bytes went,
    /// `Ready(Ok(false))` when there was nothing.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let mut wrote = false;
        loop {
            if let Some(sending) = &mut self.sending {
                while !sending.rest().is_empty() {
                    let n = match Pin::new(&mut self.client).poll_write(cx, sending.rest()) {
                        Poll::Ready(n) => n?,
                        Poll::Pending if wrote => return Poll::Ready(Ok(true)),
                        Poll::Pending => return Poll::Pending,
                    };
                    if n == 0 {
                        return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                    }
                    sending.advance(n);
                    wrote = true;
                }
                self.unflushed = true;
                if let Some(sent) = self.sending.take() {
                    self.sent(sent);
                }
            }
            self.sending = self.next();
            if self.sending.is_none() {
                break;
            }
        }
        if self.unflushed {
            match Pin::new(&mut self.client).poll_flush(cx) {
                Poll::Ready(flushed) => flushed?,
                Poll::Pending if wrote => return Poll::Ready(Ok(true)),
                Poll::Pending => return Poll::Pending,
            }
            self.unflushed = false;
        }
        Poll::Ready(Ok(wrote))
    }

    /// Gives back what a frame was sent from.
    fn sent(&mut self, sent: Sending) {
        match sent {
            Sending::Session { slot: at, buf, .. } => {
                buffers::give(buf);
                let mut hub = lock(&self.hub);
                let Some(slot) = hub.slot(at) else { return };
                slot.sending = false;
                slot.down_len = 0;
                if let Some(writer) = slot.writer.take() {
                    writer.wake();
                }
                if slot.shut || slot.dropped || slot.aborted {
                    hub.queue(at);
                }
            }
            Sending::Udp { slot, buf, .. } => {
                buffers::give(buf);
                let mut hub = lock(&self.hub);
                let writer = hub
                    .udp
                    .get_mut(slot)
                    .and_then(Option::as_mut)
                    .and_then(|udp| udp.writer.take());
                if let Some(writer) = writer {
                    writer.wake();
                }
            }
            Sending::Control { .. } => {}
        }
    }

    /// The next frame to send: end frames owed first, then the sessions'
    /// frames in turn, then a UDP reply.
    fn next(&mut self) -> Option<Sending> {
        if self.server.owes() {
            let mut bytes = [0u8; END_LEN * CONTROL_FRAMES];
            let n = self.server.write_owed(&mut bytes);
            return Some(Sending::Control { bytes, at: 0..n });
        }
        let mut hub = lock(&self.hub);
        while let Some(at) = hub.ready.pop_front() {
            let Some(slot) = hub.slot(at) else { continue };
            slot.queued = false;
            if slot.sending {
                continue;
            }
            let key = slot.key;
            if slot.aborted {
                slot.release();
                if slot.dropped {
                    hub.slots[at] = None;
                }
                continue;
            }
            if slot.down_len > 0 {
                let len = slot.down_len;
                let header = u16::try_from(len)
                    .ok()
                    .and_then(|len| self.server.data_header(key, len));
                match (header, slot.down.take()) {
                    (Some(header), Some(mut buf)) => {
                        buf[..DATA_HEADER_LEN].copy_from_slice(&header);
                        slot.sending = true;
                        return Some(Sending::Session {
                            slot: at,
                            buf,
                            at: 0..DATA_HEADER_LEN + len,
                        });
                    }
                    // The session lost its id: nothing more of it is sent.
                    (_, down) => {
                        if let Some(down) = down {
                            buffers::give(down);
                        }
                        slot.release();
                        slot.end_sent = true;
                    }
                }
            }
            let end = (slot.shut || slot.dropped) && !slot.end_sent;
            let error = !slot.shut;
            slot.end_sent |= end;
            if slot.dropped {
                slot.release();
                hub.slots[at] = None;
            }
            let frame = if end {
                self.server.end(key, error)
            } else {
                None
            };
            if hub.slots.get(at).is_some_and(Option::is_none) {
                self.server.closed(key);
            }
            if let Some(frame) = frame {
                let mut bytes = [0u8; END_LEN * CONTROL_FRAMES];
                bytes[..END_LEN].copy_from_slice(&frame);
                return Some(Sending::Control {
                    bytes,
                    at: 0..END_LEN,
                });
            }
        }
        while let Some(at) = hub.udp_ready.pop_front() {
            let Some(udp) = hub.udp.get_mut(at).and_then(Option::as_mut) else {
                continue;
            };
            let Some((mut buf, len, source)) = udp.down.take() else {
                continue;
            };
            let sealed =
                self.server
                    .seal_reply(udp.key, &mut buf[..REPLY_HEADROOM + len], len, &source);
            match sealed {
                Ok(range) if !range.is_empty() => {
                    return Some(Sending::Udp {
                        slot: at,
                        buf,
                        at: range,
                    })
                }
                // The session ended: dropped, as UDP may.
                _ => {
                    buffers::give(buf);
                    if let Some(writer) = udp.writer.take() {
                        writer.wake();
                    }
                }
            }
        }
        None
    }

    /// Reads and takes frames until a session stalls them or the client
    /// has nothing more now; `Ready(Ok)` when something was taken.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut took = false;
        loop {
            if let Some(pending) = self.pending.take() {
                if let Some(pending) = self.deliver(pending) {
                    self.pending = Some(pending);
                    return if took {
                        Poll::Ready(Ok(()))
                    } else {
                        Poll::Pending
                    };
                }
                took = true;
            }
            if self.eof {
                return Poll::Pending;
            }
            if let Some(read) = &self.read {
                if let Some(step) = self.server.open_frame(&read[self.filled.clone()])? {
                    if step.consumed == 0 || step.consumed > self.filled.len() {
                        return Poll::Ready(Err(io::Error::other(
                            "mux: a frame of an impossible length",
                        )));
                    }
                    let base = self.filled.start;
                    self.filled.start += step.consumed;
                    self.take(step, base);
                    took = true;
                    // What the frame owes is written before more is read.
                    if self.server.owes() {
                        return Poll::Ready(Ok(()));
                    }
                    continue;
                }
            }
            match self.poll_fill(cx) {
                Poll::Ready(Ok(true)) => {}
                Poll::Ready(Ok(false)) => {
                    self.client_ended();
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if took => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Reads more behind what is held; `Ready(Ok(false))` at the client's
    /// end of stream between two frames.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let buf = self.read.get_or_insert_with(|| buffers::take(BUF));
        if self.filled.is_empty() {
            self.filled = 0..0;
        } else if self.filled.end == BUF {
            if self.filled.start == 0 {
                return Poll::Ready(Err(frame_too_large()));
            }
            buf.copy_within(self.filled.clone(), 0);
            self.filled = 0..self.filled.len();
        }
        let mut read = ReadBuf::new(&mut buf[self.filled.end..]);
        match Pin::new(&mut self.client).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                if self.filled.is_empty() {
                    if let Some(buf) = self.read.take() {
                        buffers::give(buf);
                    }
                }
                return Poll::Pending;
            }
        }
        let n = read.filled().len();
        if n == 0 {
            if !self.filled.is_empty() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "mux: the client closed inside a frame",
                )));
            }
            return Poll::Ready(Ok(false));
        }
        self.filled.end += n;
        Poll::Ready(Ok(true))
    }

    /// The client's stream ended: so did every session's bytes from it.
    fn client_ended(&mut self) {
        self.eof = true;
        if let Some(buf) = self.read.take() {
            buffers::give(buf);
        }
        let mut hub = lock(&self.hub);
        for slot in hub.slots.iter_mut().flatten() {
            slot.up_end = true;
            if let Some(reader) = slot.reader.take() {
                reader.wake();
            }
        }
        hub.end_udp();
    }

    /// Does what a frame read at `base` in the read buffer asks.
    fn take(&mut self, step: Step, base: usize) {
        let data = base + step.data.start..base + step.data.end;
        if let Some(key) = step.aborted {
            self.abort(key);
        }
        self.pending = match step.event {
            Event::Nothing => None,
            Event::Open { key, target } => {
                let slot = self.open(key, target);
                Some(Pending::Tcp { slot, data })
            }
            Event::Data { key } => {
                find(&lock(&self.hub), key).map(|slot| Pending::Tcp { slot, data })
            }
            Event::End { key } => {
                let mut hub = lock(&self.hub);
                if let Some(slot) = find(&hub, key).and_then(|at| hub.slot(at)) {
                    slot.up_end = true;
                    if let Some(reader) = slot.reader.take() {
                        reader.wake();
                    }
                }
                None
            }
            Event::Packet { key, peer } => {
                let slot = self.udp_slot(key);
                Some(Pending::Udp {
                    slot,
                    to: peer,
                    data,
                })
            }
        };
    }

    /// UDP session `key`'s slot, a new one for a new session.
    fn udp_slot(&mut self, key: Key) -> usize {
        let mut hub = lock(&self.hub);
        if let Some(at) = find_udp(&hub, key) {
            return at;
        }
        let at = vacant(&mut hub.udp);
        hub.udp[at] = Some(hub::Udp::new(key));
        at
    }

    /// Drops a session the client aborted or ended (a UDP one): its task
    /// is cancelled, its bytes are dropped, and nothing more of it is
    /// sent.
    fn abort(&mut self, key: Key) {
        let mut hub = lock(&self.hub);
        if let Some(at) = find_udp(&hub, key) {
            if let Some(mut udp) = hub.udp[at].take() {
                if let Some(task) = udp.task.take() {
                    task.abort();
                }
                udp.release();
            }
            return;
        }
        let Some(at) = find(&hub, key) else {
            return;
        };
        if let Some(slot) = hub.slot(at) {
            slot.aborted = true;
            if !slot.sending {
                slot.release();
            }
            if let Some(task) = slot.task.take() {
                task.abort();
            }
            for waker in [slot.reader.take(), slot.writer.take()]
                .into_iter()
                .flatten()
            {
                waker.wake();
            }
        }
        hub.queue(at);
    }

    /// A new TCP session to `target`: its stream, served in a task of its
    /// own like any accepted flow.
    fn open(&mut self, key: Key, target: Address) -> usize {
        let mut hub = lock(&self.hub);
        let at = vacant(&mut hub.slots);
        hub.slots[at] = Some(Slot::new(key));
        drop(hub);
        tracing::debug!("mux: a tcp session to {target} from {}", self.peer);
        let stream = Session::new(self.hub.clone(), at);
        let shared = self.shared.clone();
        let peer = self.peer;
        let task = self.tasks.spawn(async move {
            let request = Target(target);
            if let Err(e) = open_and_relay(&shared, stream, peer, &request, Vec::new()).await {
                tracing::debug!("mux session to {} from {peer} ended: {e}", request.0);
            }
        });
        if let Some(slot) = lock(&self.hub).slot(at) {
            slot.task = Some(task);
        }
        at
    }

    /// Hands a frame's data to its session; what the session cannot take
    /// yet comes back, still pending.
    fn deliver(&mut self, pending: Pending) -> Option<Pending> {
        let Some(read) = &self.read else {
            return None;
        };
        match pending {
            Pending::Tcp { slot: at, data } => {
                let mut hub = lock(&self.hub);
                let slot = hub.slot(at)?;
                if slot.aborted || slot.dropped || slot.up_end || data.is_empty() {
                    return None;
                }
                let up = slot
                    .up
                    .get_or_insert_with(|| buffers::take(hub::SESSION_BUF));
                if slot.up_at.is_empty() {
                    slot.up_at = 0..0;
                } else if slot.up_at.end == up.len() {
                    up.copy_within(slot.up_at.clone(), 0);
                    slot.up_at = 0..slot.up_at.len();
                }
                let n = data.len().min(up.len() - slot.up_at.end);
                up[slot.up_at.end..slot.up_at.end + n]
                    .copy_from_slice(&read[data.start..data.start + n]);
                slot.up_at.end += n;
                if n > 0 {
                    if let Some(reader) = slot.reader.take() {
                        reader.wake();
                    }
                }
                if n == data.len() {
                    return None;
                }
                // Set under the lock the session takes to drain, so its
                // wake is not missed.
                hub.stalled = true;
                Some(Pending::Tcp {
                    slot: at,
                    data: data.start + n..data.end,
                })
            }
            Pending::Udp { slot: at, to, data } => {
                let mut guard = lock(&self.hub);
                let hub = &mut *guard;
                let udp = hub.udp.get_mut(at).and_then(Option::as_mut)?;
                if udp.up.is_some() {
                    hub.stalled = true;
                    return Some(Pending::Udp { slot: at, to, data });
                }
                if data.len() > BUF {
                    return None;
                }
                let mut packet = buffers::take(BUF);
                packet[..data.len()].copy_from_slice(&read[data.clone()]);
                udp.up = Some((packet, data.len(), to));
                if let Some(reader) = udp.reader.take() {
                    reader.wake();
                }
                if udp.running {
                    return None;
                }
                udp.running = true;
                let key = udp.key;
                drop(guard);
                let link = Datagrams::<BUF>::new(self.hub.clone(), at, key);
                let shared = self.shared.clone();
                let source = self.peer.ip();
                let task = self.tasks.spawn(async move {
                    if let Err(e) = super::datagrams::relay(&shared, link, source).await {
                        tracing::debug!("mux udp from {source} ended: {e}");
                    }
                });
                if let Some(udp) = lock(&self.hub).udp(at, key) {
                    udp.task = Some(task);
                }
                None
            }
        }
    }
}

impl<S, const BUF: usize> Drop for Connection<S, BUF> {
    fn drop(&mut self) {
        lock(&self.hub).end();
        if let Some(buf) = self.read.take() {
            buffers::give(buf);
        }
        if let Some(Sending::Session { buf, .. } | Sending::Udp { buf, .. }) = self.sending.take() {
            buffers::give(buf);
        }
    }
}

/// The slot of TCP session `key`.
fn find(hub: &Hub, key: Key) -> Option<usize> {
    hub.slots
        .iter()
        .position(|s| s.as_ref().is_some_and(|s| s.key == key))
}

/// The slot of UDP session `key`.
fn find_udp(hub: &Hub, key: Key) -> Option<usize> {
    hub.udp
        .iter()
        .position(|udp| udp.as_ref().is_some_and(|udp| udp.key == key))
}

/// A free place in `slots`, made at its end if none is.
fn vacant<T>(slots: &mut Vec<Option<T>>) -> usize {
    slots.iter().position(Option::is_none).unwrap_or_else(|| {
        slots.push(None);
        slots.len() - 1
    })
}

/// A TCP session's request: its target, answered by nothing but its
/// frames (a failed dial ends it with the error bit).
struct Target(Address);

impl ServerRequest for Target {
    fn destination(&self) -> &Address {
        &self.0
    }

    fn kind(&self) -> FlowKind {
        FlowKind::Stream
    }

    fn first_bytes(&self) -> &[u8] {
        &[]
    }

    fn on_connected(&self, _bound: SocketAddr, _out: &mut Vec<u8>) {}

    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use etemenanki_ir::spec::{
        AddressFamily, InboundProtocol, InboundSpec, Limits, OutboundProtocol, SocketPolicy,
    };
    use etemenanki_proto::mux::MAX_SESSIONS;
    use tokio::io::{duplex, AsyncReadExt, DuplexStream, ReadHalf, WriteHalf};
    use tokio::net::TcpListener;

    use super::*;
    use crate::dial::Dialer;
    use crate::inbound::Inbound;

    const BUF: usize = 16 * 1024;

    /// An inbound's shared state, routing every flow to freedom.
    fn shared() -> (Inbound, Arc<Shared>) {
        let plane = crate::fanout::tests::plane(&[(
            OutboundProtocol::Freedom {
                address_family: AddressFamily::Auto,
            },
            1,
        )]);
        let limits = Arc::new(arc_swap::ArcSwap::from_pointee(Limits::default()));
        let spec = InboundSpec {
            tag: "in".into(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            sniff: false,
            protocol: InboundProtocol::Socks {
                accounts: Vec::new(),
                udp: false,
                tls: None,
            },
        };
        let dialer = Dialer::new(SocketPolicy::default(), limits.clone());
        let inbound = Inbound::bind(&spec, limits, plane, dialer, None).unwrap();
        let shared = inbound.shared.clone();
        (inbound, shared)
    }

    /// A Mux.Cool connection served on its own task, and the client's end.
    fn connection() -> (
        Inbound,
        ReadHalf<DuplexStream>,
        WriteHalf<DuplexStream>,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let (inbound, shared) = shared();
        let (client, server) = duplex(64 * 1024);
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        let served =
            tokio::spawn(async move { serve::<_, BUF>(&shared, server, peer, &[], &[]).await });
        let (read, write) = tokio::io::split(client);
        (inbound, read, write, served)
    }

    /// A loopback echo server that half-closes after the client does.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    tokio::io::copy(&mut read, &mut write).await.ok();
                    write.shutdown().await.ok();
                });
            }
        });
        addr
    }

    fn target(addr: SocketAddr) -> Vec<u8> {
        let SocketAddr::V4(addr) = addr else {
            panic!("ipv4")
        };
        let mut out = addr.port().to_be_bytes().to_vec();
        out.push(1);
        out.extend_from_slice(&addr.ip().octets());
        out
    }

    fn frame(session: u16, meta: &[u8], data: Option<&[u8]>) -> Vec<u8> {
        let mut out = ((2 + meta.len()) as u16).to_be_bytes().to_vec();
        out.extend_from_slice(&session.to_be_bytes());
        out.extend_from_slice(meta);
        if let Some(data) = data {
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            out.extend_from_slice(data);
        }
        out
    }

    fn new_tcp(session: u16, to: SocketAddr) -> Vec<u8> {
        frame(session, &[&[1, 0, 1][..], &target(to)].concat(), None)
    }

    fn keep(session: u16, data: &[u8]) -> Vec<u8> {
        frame(session, &[2, 1], Some(data))
    }

    fn end(session: u16) -> Vec<u8> {
        frame(session, &[3, 0], None)
    }

    /// One frame from the server: its session, status, option and data.
    async fn read_frame(read: &mut ReadHalf<DuplexStream>) -> (u16, u8, u8, Vec<u8>) {
        let mut len = [0u8; 2];
        read.read_exact(&mut len).await.unwrap();
        let mut meta = vec![0u8; usize::from(u16::from_be_bytes(len))];
        read.read_exact(&mut meta).await.unwrap();
        let mut data = Vec::new();
        if meta[3] & 1 != 0 {
            read.read_exact(&mut len).await.unwrap();
            data = vec![0u8; usize::from(u16::from_be_bytes(len))];
            read.read_exact(&mut data).await.unwrap();
        }
        (
            u16::from_be_bytes([meta[0], meta[1]]),
            meta[2],
            meta[3],
            data,
        )
    }

    fn pattern(len: usize, seed: usize) -> Vec<u8> {
        (0..len).map(|i| ((i * 7 + seed) % 251) as u8).collect()
    }

    async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(20), future)
            .await
            .unwrap_or_else(|_| panic!("{what} within 20 s"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_tcp_sessions_relay_a_mib_each_way_and_end_as_v2ray_does() {
        const SESSIONS: u16 = 4;
        const LEN: usize = (1 << 20) + 123;
        let (_inbound, mut read, mut write, served) = connection();
        let echo = echo().await;
        let writer = tokio::spawn(async move {
            for id in 1..=SESSIONS {
                write.write_all(&new_tcp(id, echo)).await.unwrap();
            }
            // Interleaved, 8 KiB a frame, as v2ray writes them; then each
            // session's end.
            let data: Vec<_> = (1..=SESSIONS).map(|id| pattern(LEN, id.into())).collect();
            for at in (0..LEN).step_by(8192) {
                for id in 1..=SESSIONS {
                    let chunk = &data[usize::from(id - 1)][at..(at + 8192).min(LEN)];
                    write.write_all(&keep(id, chunk)).await.unwrap();
                }
            }
            for id in 1..=SESSIONS {
                write.write_all(&end(id)).await.unwrap();
            }
            write
        });
        let mut got = vec![Vec::new(); usize::from(SESSIONS)];
        let mut ended = 0;
        within("every echo and end", async {
            while ended < SESSIONS {
                let (id, status, option, data) = read_frame(&mut read).await;
                let at = usize::from(id - 1);
                match status {
                    2 => got[at].extend_from_slice(&data),
                    3 => {
                        assert_eq!(option, 0, "session {id} ended without error");
                        assert_eq!(got[at].len(), LEN, "session {id}: its end after its bytes");
                        ended += 1;
                    }
                    other => panic!("status {other}"),
                }
            }
        })
        .await;
        for id in 1..=SESSIONS {
            assert!(
                got[usize::from(id - 1)] == pattern(LEN, id.into()),
                "session {id}"
            );
        }
        // The client's stream ending ends the connection, its sessions done.
        writer.await.unwrap().shutdown().await.unwrap();
        within("the connection's end", served)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn bad_frames_are_answered_or_fail_the_connection_and_never_hang_it() {
        let (_inbound, mut read, mut write, served) = connection();
        let echo = echo().await;
        let closed = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap()
        };
        // Data for a session never opened: an end frame.
        write.write_all(&keep(9, b"orphan")).await.unwrap();
        assert_eq!(read_frame(&mut read).await, (9, 3, 0, vec![]));
        // A dial that fails: an end frame with the error bit.
        write.write_all(&new_tcp(3, closed)).await.unwrap();
        assert_eq!(
            within("the refusal", read_frame(&mut read)).await,
            (3, 3, 2, vec![])
        );
        // A new frame for an id in use replaces its session: the second
        // one's echo comes back, under that id.
        write.write_all(&new_tcp(5, echo)).await.unwrap();
        write.write_all(&new_tcp(5, echo)).await.unwrap();
        write.write_all(&keep(5, b"second")).await.unwrap();
        write.write_all(&end(5)).await.unwrap();
        assert_eq!(read_frame(&mut read).await, (5, 2, 1, b"second".to_vec()));
        assert_eq!(read_frame(&mut read).await, (5, 3, 0, vec![]));
        // A frame cut short by the client's end fails the connection.
        let cut = keep(5, b"cut short");
        write.write_all(&cut[..cut.len() - 2]).await.unwrap();
        write.shutdown().await.unwrap();
        let e = within("the failure", served).await.unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn a_session_past_the_limit_is_refused_and_the_others_go_on() {
        let (_inbound, mut read, mut write, _served) = connection();
        let echo = echo().await;
        for id in 0..=MAX_SESSIONS as u16 {
            write.write_all(&new_tcp(id, echo)).await.unwrap();
        }
        let limit = MAX_SESSIONS as u16;
        assert_eq!(read_frame(&mut read).await, (limit, 3, 2, vec![]));
        write.write_all(&keep(0, b"still here")).await.unwrap();
        write.write_all(&end(0)).await.unwrap();
        assert_eq!(
            within("the echo", read_frame(&mut read)).await,
            (0, 2, 1, b"still here".to_vec())
        );
        assert_eq!(read_frame(&mut read).await, (0, 3, 0, vec![]));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_target_that_reads_late_stalls_the_connection_and_loses_nothing() {
        const LEN: usize = 8 << 20;
        let (_inbound, mut read, mut write, _served) = connection();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let slow = listener.local_addr().unwrap();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let sink = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            released.await.unwrap();
            let mut got = Vec::new();
            socket.read_to_end(&mut got).await.unwrap();
            got
        });
        let data = pattern(LEN, 3);
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            write.write_all(&new_tcp(1, slow)).await.unwrap();
            for chunk in sent.chunks(8192) {
                write.write_all(&keep(1, chunk)).await.unwrap();
            }
            write.write_all(&end(1)).await.unwrap();
            write
        });
        // Far more than the connection's buffers hold waits for the
        // target, which only then reads it all.
        tokio::time::sleep(Duration::from_millis(100)).await;
        release.send(()).unwrap();
        let got = within("the target's bytes", sink).await.unwrap();
        assert!(got == data, "{} bytes of {LEN} arrived", got.len());
        // The target closed: the session's end.
        assert_eq!(
            within("the end", read_frame(&mut read)).await,
            (1, 3, 0, vec![])
        );
        drop(writer.await.unwrap());
    }

    #[tokio::test]
    async fn two_udp_sessions_to_one_destination_each_get_their_own_reply() {
        let (_inbound, mut read, mut write, _served) = connection();
        // A server that answers only once it has both packets, each to
        // the socket it came from: one socket shared by both sessions
        // would get both answers.
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server = socket.local_addr().unwrap();
        tokio::spawn(async move {
            let mut asked = Vec::new();
            let mut buf = [0u8; 64];
            while asked.len() < 2 {
                let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                asked.push((buf[..n].to_vec(), from));
            }
            for (payload, from) in asked {
                socket.send_to(&payload, from).await.unwrap();
            }
        });
        let new_udp = |id: u16, data: &[u8]| {
            frame(id, &[&[1, 1, 2][..], &target(server)].concat(), Some(data))
        };
        write.write_all(&new_udp(1, b"one")).await.unwrap();
        write.write_all(&new_udp(2, b"two")).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            let (id, status, _, data) = within("a reply", read_frame(&mut read)).await;
            assert_eq!(status, 2);
            got.push((id, data));
        }
        got.sort();
        assert_eq!(got, [(1, b"one".to_vec()), (2, b"two".to_vec())]);
    }

    #[tokio::test]
    async fn a_target_that_ends_first_sends_the_end_and_still_takes_the_client_bytes() {
        let (_inbound, mut read, mut write, _served) = connection();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let banner = listener.local_addr().unwrap();
        let target = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            socket.write_all(b"banner").await.unwrap();
            socket.shutdown().await.unwrap();
            let mut got = Vec::new();
            socket.read_to_end(&mut got).await.unwrap();
            got
        });
        write.write_all(&new_tcp(7, banner)).await.unwrap();
        assert_eq!(
            within("the banner", read_frame(&mut read)).await,
            (7, 2, 1, b"banner".to_vec())
        );
        assert_eq!(read_frame(&mut read).await, (7, 3, 0, vec![]));
        write.write_all(&keep(7, b"late bytes")).await.unwrap();
        write.write_all(&end(7)).await.unwrap();
        assert_eq!(
            within("the target's bytes", target).await.unwrap(),
            b"late bytes"
        );
    }
}
