//! A stream of sealed frames, as AsyncRead + AsyncWrite: the one client (and
//! later server) runtime every framed protocol (Shadowsocks, VMess) runs
//! on, so they share the relay like any other stream.
//!
//! Two buffers of `BUF` bytes, one per direction, each taken from the
//! thread's spares only while its bytes move and given back once it is
//! drained: an idle framed connection holds neither.
//!
//! - Writing: a write's bytes are copied behind the codec's headroom,
//!   sealed where they lie and written out; a write longer than one frame
//!   is taken in pieces, so a stream write never overflows. Backpressure is
//!   not taking a write while sealed bytes are unwritten. A header staged
//!   ahead of the framing (a server's answer, a client's request) waits
//!   for the first payload and leads its frames in the same write.
//! - Reading: bytes are read into the buffer and frames opened in place;
//!   their payloads are handed out in order. A frame that cannot fit the
//!   buffer fails the stream: `upstream frame larger than the client
//!   runtime's buffer`. Bytes read ahead of the framing (past a
//!   handshake) are opened where they lie, in the handshake's own buffer
//!   of their size: a frame buffer is taken only for the first read, so a
//!   connection waiting on its dial holds no more than those bytes.
//! - Relaying: the relay reads straight into the write buffer
//!   ([`Framed::poll_fill_from`]) and writes payload straight out of the
//!   read buffer ([`Framed::poll_drain_into`]), with no copy through a
//!   buffer of the relay's; a buffer that holds several frames takes (or
//!   hands on) all their payloads with one read and one write.
//! - Ends: a shutdown first sends what the codec ends a direction with
//!   (VMess's empty chunk, a Shadowsocks 2022 server's header that no
//!   payload carried); a frame the codec says ended the peer's direction
//!   reads as the end of the stream.

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use etemenanki_proto::codec::{Opened, StreamCodec};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::buffers;

pub struct Framed<S, C, const BUF: usize> {
    inner: S,
    codec: C,
    /// Sealed bytes at `staged` not yet written.
    write: Option<Box<[u8]>>,
    staged: Range<usize>,
    /// Bytes read at `read[..filled]`; those before `at` are consumed,
    /// and `payload` is the part of them still to hand out. A frame
    /// buffer of `BUF` bytes, or the bytes read ahead, lent at their own
    /// size until the first read.
    read: Option<Box<[u8]>>,
    at: usize,
    filled: usize,
    payload: Range<usize>,
    /// The upstream ended its stream.
    eof: bool,
    /// The codec opened the peer's end of stream.
    ended: bool,
    /// What the codec ends our direction with was sealed.
    end_sealed: bool,
}

fn lost_read_buffer() -> io::Error {
    io::Error::other("framed stream lost its read buffer")
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "upstream frame larger than the client runtime's buffer",
    )
}

impl<S, C: StreamCodec, const BUF: usize> Framed<S, C, BUF> {
    /// Frames `inner` with `codec`; `ahead` holds bytes already read from
    /// `inner` (past a handshake), opened before anything else where they
    /// lie: the stream keeps them, not a copy in a frame buffer.
    pub fn new(inner: S, codec: C, ahead: Vec<u8>) -> Self {
        const {
            assert!(
                BUF > C::HEADROOM + C::TAILROOM,
                "BUF must exceed the codec's reserve or nothing can be sealed"
            )
        };
        let mut framed = Framed {
            inner,
            codec,
            write: None,
            staged: 0..0,
            read: None,
            at: 0,
            filled: 0,
            payload: 0..0,
            eof: false,
            ended: false,
            end_sealed: false,
        };
        if !ahead.is_empty() {
            framed.filled = ahead.len();
            framed.read = Some(ahead.into_boxed_slice());
        }
        framed
    }

    /// Frames `inner` as [`Framed::new`] does, with `header` staged ahead
    /// of the first frame: a server's answer to the handshake, in clear of
    /// the framing, or a client's request. It waits for the first payload
    /// and leads its frames in the same write, so both leave in one
    /// segment; a flush or the end sends it alone.
    pub fn with_header(inner: S, codec: C, ahead: Vec<u8>, header: &[u8]) -> Self {
        let mut framed = Self::new(inner, codec, ahead);
        if !header.is_empty() {
            // A buffer of the header's own size: it may wait for the first
            // payload or the end, and an idle stream holds no frame buffer.
            framed.staged = 0..header.len();
            framed.write = Some(header.into());
        }
        framed
    }

    /// A header still waits for the first payload ([`Framed::with_header`]).
    pub fn holds_header(&self) -> bool {
        !self.staged.is_empty() && self.write.as_ref().is_some_and(|buf| buf.len() != BUF)
    }

    /// Takes the waiting header out to lead the next frames, when it and a
    /// frame fit the buffer together.
    fn take_lead(&mut self) -> Option<Lead> {
        if !self.holds_header() || self.staged.len() + C::HEADROOM + C::TAILROOM >= BUF {
            return None;
        }
        let buf = self.write.take()?;
        let bytes = std::mem::replace(&mut self.staged, 0..0);
        Some(Lead { buf, bytes })
    }

    /// Puts a header taken to lead frames back, when none were sealed.
    fn keep_lead(&mut self, lead: Option<Lead>) {
        if let Some(Lead { buf, bytes }) = lead {
            self.write = Some(buf);
            self.staged = bytes;
        }
    }

    /// The stream the frames travel on.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Moves the bytes not yet consumed to the front of a frame buffer, so
    /// a read can follow them: within the frame buffer, or out of the
    /// bytes lent ahead into a frame buffer taken now.
    fn compact(&mut self) -> io::Result<()> {
        let rest = self.at..self.filled;
        if rest.len() >= BUF {
            return Err(too_large());
        }
        match &mut self.read {
            Some(buf) if buf.len() == BUF => buf.copy_within(rest.clone(), 0),
            read => {
                let mut frame = buffers::take(BUF);
                if let Some(lent) = read.take() {
                    let bytes = lent.get(rest.clone()).ok_or_else(lost_read_buffer)?;
                    frame[..rest.len()].copy_from_slice(bytes);
                }
                *read = Some(frame);
            }
        }
        self.filled = rest.len();
        self.at = 0;
        Ok(())
    }

    /// The longest frame the codec seals.
    const FRAME: usize = C::HEADROOM + C::MAX_PAYLOAD + C::TAILROOM;
    /// What the buffer holds past its whole frames, less a frame's
    /// overhead: the payload of one more, shorter, frame.
    const FILL_REST: usize =
        (BUF - BUF / Self::FRAME * Self::FRAME).saturating_sub(C::HEADROOM + C::TAILROOM);
    /// The most one relay read takes: every whole frame's payload, and the
    /// shorter frame's after them when it carries at least an eighth as
    /// much (a Shadowsocks client's 20 KiB buffer: a chunk of 16,383 bytes
    /// and one of 4,029, so a bulk transfer makes a fifth fewer reads and
    /// writes; a smaller rest costs a seal more than the system calls it
    /// saves).
    const FILL_ROOM: usize = {
        let whole = BUF / Self::FRAME * C::MAX_PAYLOAD;
        if Self::FILL_REST * 8 >= whole {
            whole + Self::FILL_REST
        } else {
            whole
        }
    };

    /// Where a relay read's payload for frame `frame` (from 0) waits to be
    /// sealed: behind the headroom of that frame at its longest.
    fn fill_slot(frame: usize) -> usize {
        frame * Self::FRAME + C::HEADROOM
    }

    /// Gives the read buffer back once nothing in it is left to hand out.
    fn release_read(&mut self) {
        if self.at == self.filled && self.payload.is_empty() {
            if let Some(buf) = self.read.take() {
                Self::spare(buf);
            }
            self.at = 0;
            self.filled = 0;
        }
    }
}

impl<S, C, const BUF: usize> Framed<S, C, BUF> {
    /// Gives a frame buffer back to the thread's spares; a header's own
    /// buffer is freed.
    fn spare(buf: Box<[u8]>) {
        if buf.len() == BUF {
            buffers::give(buf);
        }
    }

    /// The write buffer, or a spare one: a frame buffer, never a header's.
    fn write_buf(&mut self) -> Box<[u8]> {
        self.write
            .take()
            .filter(|buf| buf.len() >= BUF)
            .unwrap_or_else(|| buffers::take(BUF))
    }
}

impl<S: AsyncWrite + Unpin, C: StreamCodec + Unpin, const BUF: usize> Framed<S, C, BUF> {
    /// Writes the sealed bytes out, keeping the buffer for the caller.
    fn poll_staged_keep(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.staged.is_empty() {
            let Some(buf) = &self.write else { break };
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &buf[self.staged.clone()]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.staged.start += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Writes the sealed bytes out; gives the buffer back once they are.
    fn poll_staged(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_staged_keep(cx))?;
        if let Some(buf) = self.write.take() {
            Self::spare(buf);
        }
        Poll::Ready(Ok(()))
    }

    /// Stages `sealed`, the frames `seal` laid in `buf`, and starts sending
    /// them; what does not go now is sent by the next write or flush, and
    /// the buffer is a spare again once all of it went.
    fn stage(
        &mut self,
        cx: &mut Context<'_>,
        buf: Box<[u8]>,
        sealed: Range<usize>,
    ) -> io::Result<()> {
        self.write = Some(buf);
        self.staged = sealed;
        match self.poll_staged(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Reads once from `from` into the write buffer, seals what came and
    /// starts sending it: the relay's way in. The read lands where the
    /// first frame's payload is sealed and takes as many payloads as the
    /// buffer's frames hold ([`Framed::FILL_ROOM`]); what goes past the
    /// first frame is moved up to the frames after it, and each frame is
    /// sealed where its payload lies, one read and one write for them all.
    /// `Ready(Ok(0))` is `from`'s end of stream.
    pub fn poll_fill_from(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut (dyn AsyncRead + Unpin),
    ) -> Poll<io::Result<usize>> {
        let lead = self.take_lead();
        if lead.is_none() {
            ready!(self.poll_staged_keep(cx))?;
        }
        let mut buf = self.write_buf();
        // Behind a waiting header, the frames start past it, and the read
        // takes one frame's payload.
        let skip = Lead::room(&lead);
        let room = match skip {
            0 => Self::FILL_ROOM,
            _ => C::MAX_PAYLOAD.min(BUF - skip - C::HEADROOM - C::TAILROOM),
        };
        let frames_buf = &mut buf[skip..];
        let at = C::HEADROOM;
        let mut read = ReadBuf::new(&mut frames_buf[at..at + room]);
        let n = match Pin::new(from).poll_read(cx, &mut read) {
            Poll::Ready(Ok(())) => read.filled().len(),
            other => {
                // Nothing to carry: an idle direction holds no buffer.
                self.keep_lead(lead);
                Self::spare(buf);
                return other.map(|done| done.map(|()| 0));
            }
        };
        if n == 0 {
            self.keep_lead(lead);
            Self::spare(buf);
            return Poll::Ready(Ok(0));
        }
        // Each payload past the first to its frame's slot, the last first,
        // so none overwrites one still to move.
        let frames = n.div_ceil(C::MAX_PAYLOAD);
        for frame in (1..frames).rev() {
            let payload = at + frame * C::MAX_PAYLOAD..at + n.min((frame + 1) * C::MAX_PAYLOAD);
            frames_buf.copy_within(payload, Self::fill_slot(frame));
        }
        let sealed = seal_frames_with(&mut self.codec, frames_buf, n, |buf, to, taken| {
            let from = Self::fill_slot(taken.start / C::MAX_PAYLOAD);
            if from != to {
                buf.copy_within(from..from + taken.len(), to);
            }
        });
        match sealed {
            Ok((sealed, taken)) if taken == n && !sealed.is_empty() && sealed.end + skip <= BUF => {
                let staged = Lead::lay(lead, &mut buf, sealed);
                Poll::Ready(self.stage(cx, buf, staged).map(|()| n))
            }
            sealed => {
                self.keep_lead(lead);
                Self::spare(buf);
                Poll::Ready(Err(sealed.err().unwrap_or_else(impossible_seal)))
            }
        }
    }
}

fn impossible_seal() -> io::Error {
    io::Error::other("codec sealed an impossible byte count")
}

/// A waiting header taken out of its own buffer to lead the frames sealed
/// behind it.
struct Lead {
    buf: Box<[u8]>,
    bytes: Range<usize>,
}

impl Lead {
    /// How far behind the buffer's start the frames are sealed.
    fn room(lead: &Option<Lead>) -> usize {
        lead.as_ref().map_or(0, |lead| lead.bytes.len())
    }

    /// Lays `lead` in `buf` right before the frames `sealed` holds (their
    /// range in `buf[Lead::room(..)..]`): the range of all it staged.
    fn lay(lead: Option<Lead>, buf: &mut [u8], sealed: Range<usize>) -> Range<usize> {
        match lead {
            None => sealed,
            Some(Lead { buf: header, bytes }) => {
                let len = bytes.len();
                buf[sealed.start..sealed.start + len].copy_from_slice(&header[bytes]);
                sealed.start..sealed.end + len
            }
        }
    }
}

impl<S: AsyncRead + Unpin, C: StreamCodec + Unpin, const BUF: usize> Framed<S, C, BUF> {
    /// Opens the whole frames the read buffer holds, their payloads laid
    /// end to end after what `payload` still holds, so that one write
    /// carries them all; a partial frame waits for the next read.
    /// An error is a frame the codec refused, or one larger than the
    /// buffer once nothing opened before it is left to hand out.
    fn open_frames(&mut self) -> io::Result<()> {
        while self.at < self.filled && !self.ended {
            let Some(buf) = &mut self.read else {
                return Err(lost_read_buffer());
            };
            match self.codec.open(&mut buf[self.at..self.filled])? {
                Opened::Frame { consumed, payload } => {
                    if consumed == 0 || consumed > self.filled - self.at || payload.end > consumed {
                        return Err(io::Error::other("codec opened an impossible frame"));
                    }
                    let opened = self.at + payload.start..self.at + payload.end;
                    self.at += consumed;
                    if opened.is_empty() {
                        if self.codec.ended() {
                            // The peer's end of stream: what follows is not read.
                            self.ended = true;
                            self.at = self.filled;
                        }
                    } else if self.payload.is_empty() {
                        self.payload = opened;
                    } else {
                        // Right behind the payload before it: the frames'
                        // headers and tags between them are done with.
                        let end = self.payload.end + opened.len();
                        buf.copy_within(opened, self.payload.end);
                        self.payload.end = end;
                    }
                }
                Opened::NeedMore { .. } if !self.payload.is_empty() => break,
                Opened::NeedMore { needed } if needed > BUF => return Err(too_large()),
                Opened::NeedMore { needed } => {
                    if self.at + needed > buf.len() {
                        // Move the partial frame to the front of a frame
                        // buffer to make room.
                        self.compact()?;
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    /// Reads and opens frames until `payload` holds bytes to hand out:
    /// `Ready(Ok(true))` when it does, `Ready(Ok(false))` at the end of the
    /// stream.
    fn poll_payload(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        loop {
            self.open_frames()?;
            if !self.payload.is_empty() {
                return Poll::Ready(Ok(true));
            }
            if self.ended {
                self.release_read();
                return Poll::Ready(Ok(false));
            }
            if self.eof {
                return if self.at < self.filled {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "upstream closed inside a frame",
                    )))
                } else {
                    Poll::Ready(self.codec.finish().map(|()| false))
                };
            }
            if self.at == self.filled {
                // Everything read was consumed: the next read goes in front.
                (self.at, self.filled) = (0, 0);
            }
            if self.read.as_ref().is_none_or(|buf| buf.len() != BUF) {
                // No buffer yet, or the bytes lent ahead: a frame buffer
                // takes what is left of them, and the read.
                self.compact()?;
            }
            let Some(buf) = self.read.as_mut() else { break };
            if self.filled == BUF {
                // A codec that wants more than a full buffer said so above.
                return Poll::Ready(Err(too_large()));
            }
            let mut read = ReadBuf::new(&mut buf[self.filled..]);
            match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        self.eof = true;
                    }
                    self.filled += n;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.release_read();
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Err(lost_read_buffer()))
    }

    /// Writes opened payload straight from the read buffer to `to`, opening
    /// the next frames first when none is left: the relay's way out, with
    /// no copy into a buffer of its own. `Ready(Ok(0))` is the end of the
    /// stream.
    pub fn poll_drain_into(
        &mut self,
        cx: &mut Context<'_>,
        to: &mut (dyn AsyncWrite + Unpin),
    ) -> Poll<io::Result<usize>> {
        if !ready!(self.poll_payload(cx))? {
            return Poll::Ready(Ok(0));
        }
        let Some(buf) = &self.read else {
            return Poll::Ready(Err(lost_read_buffer()));
        };
        let n = ready!(Pin::new(to).poll_write(cx, &buf[self.payload.clone()]))?;
        if n == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        self.payload.start += n;
        self.release_read();
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncRead + Unpin, C: StreamCodec + Unpin, const BUF: usize> AsyncRead
    for Framed<S, C, BUF>
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !ready!(this.poll_payload(cx))? {
            return Poll::Ready(Ok(()));
        }
        let Some(buf) = &this.read else {
            return Poll::Ready(Err(lost_read_buffer()));
        };
        let n = this.payload.len().min(out.remaining());
        out.put_slice(&buf[this.payload.start..this.payload.start + n]);
        this.payload.start += n;
        this.release_read();
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin, C: StreamCodec + Unpin, const BUF: usize> AsyncWrite
    for Framed<S, C, BUF>
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let lead = this.take_lead();
        if lead.is_none() {
            ready!(this.poll_staged_keep(cx))?;
        }
        if data.is_empty() {
            this.keep_lead(lead);
            return Poll::Ready(Ok(0));
        }
        let mut buf = this.write_buf();
        let skip = Lead::room(&lead);
        match seal_frames(&mut this.codec, &mut buf[skip..], data) {
            Ok((sealed, n)) => {
                let staged = Lead::lay(lead, &mut buf, sealed);
                Poll::Ready(this.stage(cx, buf, staged).map(|()| n))
            }
            Err(e) => {
                this.keep_lead(lead);
                Self::spare(buf);
                Poll::Ready(Err(e))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_staged(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    /// Sends what the codec ends a direction with (VMess's empty chunk,
    /// a Shadowsocks 2022 server's header), then shuts the stream down.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_staged_keep(cx))?;
        if !this.end_sealed {
            this.end_sealed = true;
            let mut buf = this.write_buf();
            match this.codec.seal_end(&mut buf) {
                Ok(sealed) if sealed.is_empty() => Self::spare(buf),
                Ok(sealed) if sealed.end <= BUF => {
                    this.stage(cx, buf, sealed)?;
                }
                sealed => {
                    Self::spare(buf);
                    return Poll::Ready(Err(sealed.err().unwrap_or_else(impossible_seal)));
                }
            }
        }
        ready!(this.poll_staged(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// Seals as much of `data` as `buf` holds, frame after frame, the frames
/// laid end to end: a write one byte longer than a frame's payload (a 16 KiB
/// relay read and Shadowsocks' 16,383-byte chunks) goes out in one write,
/// not two. A frame after the first is sealed past the last one and moved
/// up against it (its payload is what did not fit the first, mostly small).
/// Returns the frames' range and how many bytes of `data` they hold.
fn seal_frames<C: StreamCodec>(
    codec: &mut C,
    buf: &mut [u8],
    data: &[u8],
) -> io::Result<(Range<usize>, usize)> {
    seal_frames_with(codec, buf, data.len(), |buf, to, taken| {
        buf[to..to + taken.len()].copy_from_slice(&data[taken]);
    })
}

/// Seals up to `len` payload bytes frame after frame, as [`seal_frames`]
/// says; `place(buf, to, taken)` puts the payload bytes `taken` (of the
/// `len`) at `buf[to..]` before each frame is sealed.
fn seal_frames_with<C: StreamCodec>(
    codec: &mut C,
    buf: &mut [u8],
    len: usize,
    mut place: impl FnMut(&mut [u8], usize, Range<usize>),
) -> io::Result<(Range<usize>, usize)> {
    let mut frames: Option<Range<usize>> = None;
    let mut taken = 0;
    while taken < len {
        let base = frames.as_ref().map_or(0, |f| f.end);
        let Some(room) = (buf.len() - base).checked_sub(C::HEADROOM + C::TAILROOM + 1) else {
            break;
        };
        let n = (len - taken).min(room + 1).min(C::MAX_PAYLOAD);
        place(buf, base + C::HEADROOM, taken..taken + n);
        let slice = &mut buf[base..];
        let sealed = codec.seal(slice, n)?;
        if sealed.is_empty() || sealed.end > slice.len() {
            return Err(impossible_seal());
        }
        taken += n;
        frames = Some(match frames {
            None => base + sealed.start..base + sealed.end,
            Some(f) => {
                buf.copy_within(base + sealed.start..base + sealed.end, f.end);
                f.start..f.end + sealed.len()
            }
        });
    }
    frames.map(|f| (f, taken)).ok_or_else(impossible_seal)
}

impl<S, C, const BUF: usize> Drop for Framed<S, C, BUF> {
    fn drop(&mut self) {
        for buf in [self.write.take(), self.read.take()].into_iter().flatten() {
            Self::spare(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A toy framing, enough to drive the runtime: a two-byte length in
    /// front of each payload, every payload byte XORed with 0x5a, and a
    /// one-byte 0xee trailer; a frame of no payload ends a direction.
    #[derive(Default)]
    struct Xor {
        ended: bool,
    }

    impl StreamCodec for Xor {
        const HEADROOM: usize = 2;
        const TAILROOM: usize = 1;
        const MAX_PAYLOAD: usize = 1000;

        fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
            buf[..2].copy_from_slice(&(len as u16).to_be_bytes());
            for b in &mut buf[2..2 + len] {
                *b ^= 0x5a;
            }
            buf[2 + len] = 0xee;
            Ok(0..len + 3)
        }

        fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
            let Some(&[a, b]) = buf.first_chunk::<2>() else {
                return Ok(Opened::NeedMore { needed: 2 });
            };
            let len = usize::from(u16::from_be_bytes([a, b]));
            if buf.len() < len + 3 {
                return Ok(Opened::NeedMore { needed: len + 3 });
            }
            if buf[2 + len] != 0xee {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad trailer"));
            }
            for b in &mut buf[2..2 + len] {
                *b ^= 0x5a;
            }
            self.ended = len == 0;
            Ok(Opened::Frame {
                consumed: len + 3,
                payload: 2..2 + len,
            })
        }

        fn seal_end(&mut self, buf: &mut [u8]) -> io::Result<Range<usize>> {
            self.seal(buf, 0)
        }

        fn ended(&self) -> bool {
            self.ended
        }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// One relay read of `data` through `framed`: how much of it one read
    /// took and sealed.
    async fn fill_once<W: AsyncWrite + Unpin, const BUF: usize>(
        framed: &mut Framed<W, Xor, BUF>,
        data: &[u8],
    ) -> usize {
        let mut source = data;
        std::future::poll_fn(|cx| framed.poll_fill_from(cx, &mut source))
            .await
            .unwrap()
    }

    /// Every payload the frames of `wire` carry.
    async fn open_all<const BUF: usize>(wire: &[u8]) -> Vec<u8> {
        let mut reader = Framed::<_, _, BUF>::new(wire, Xor::default(), Vec::new());
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        got
    }

    #[tokio::test]
    async fn framed_ends_carry_a_long_stream_both_ways_split_anywhere() {
        // A tiny pipe capacity splits frames across reads at odd places.
        let (a, b) = tokio::io::duplex(37);
        let mut a = Framed::<_, _, 256>::new(a, Xor::default(), Vec::new());
        let mut b = Framed::<_, _, 256>::new(b, Xor::default(), Vec::new());
        let up = pattern(50_000);
        let sent = up.clone();
        let writer = tokio::spawn(async move {
            a.write_all(&sent).await.unwrap();
            a.shutdown().await.unwrap();
            let mut back = Vec::new();
            a.read_to_end(&mut back).await.unwrap();
            back
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert!(got == up, "the bytes up differ");
        b.write_all(b"reply").await.unwrap();
        b.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"reply");
    }

    #[tokio::test]
    async fn a_write_longer_than_a_frame_is_sealed_into_frames_end_to_end_in_one_write() {
        let (near, mut far) = tokio::io::duplex(8192);
        let mut framed = Framed::<_, _, 4096>::new(near, Xor::default(), Vec::new());
        let data = pattern(1001);
        let taken = std::future::poll_fn(|cx| Pin::new(&mut framed).poll_write(cx, &data))
            .await
            .unwrap();
        assert_eq!(taken, 1001, "both frames from one write");
        framed.flush().await.unwrap();
        let mut wire = [0u8; 1000 + 3 + 1 + 3];
        far.read_exact(&mut wire).await.unwrap();
        assert_eq!(wire[..2], [0x03, 0xe8], "a full first frame");
        assert_eq!(wire[1002], 0xee);
        assert_eq!(wire[1003..1005], [0, 1], "the second right after it");
        assert_eq!(wire[1005], data[1000] ^ 0x5a);
        assert_eq!(wire[1006], 0xee);
    }

    #[tokio::test]
    async fn bytes_read_ahead_of_the_framing_are_opened_first() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut ahead = vec![0, 2, b'h' ^ 0x5a, b'i' ^ 0x5a, 0xee, 0];
        let mut framed = Framed::<_, _, 256>::new(near, Xor::default(), ahead.clone());
        // The rest of the second frame arrives on the stream.
        ahead.clear();
        ahead.extend_from_slice(&[1, b'!' ^ 0x5a, 0xee]);
        far.write_all(&ahead).await.unwrap();
        far.shutdown().await.unwrap();
        let mut got = Vec::new();
        framed.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hi!");
    }

    #[tokio::test]
    async fn bytes_read_ahead_are_held_at_their_own_size_and_freed_once_opened() {
        let (near, mut far) = tokio::io::duplex(1024);
        let ahead = vec![0, 2, b'h' ^ 0x5a, b'i' ^ 0x5a, 0xee];
        let mut framed = Framed::<_, _, 256>::new(near, Xor::default(), ahead);
        assert_eq!(
            framed.read.as_ref().map(|buf| buf.len()),
            Some(5),
            "the bytes ahead, not a frame buffer"
        );
        let mut got = [0u8; 2];
        framed.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hi");
        assert!(framed.read.is_none(), "freed once handed out");
        // A read that finds nothing holds no frame buffer either.
        let pending = std::future::poll_fn(|cx| {
            let mut sink = [0u8; 8];
            let mut read = ReadBuf::new(&mut sink);
            Poll::Ready(Pin::new(&mut framed).poll_read(cx, &mut read).is_pending())
        })
        .await;
        assert!(pending && framed.read.is_none());
        far.write_all(&[0, 1, b'!' ^ 0x5a, 0xee]).await.unwrap();
        let mut got = [0u8; 1];
        framed.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"!");
    }

    #[tokio::test]
    async fn whole_frames_read_at_once_are_handed_out_in_one_piece() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut framed = Framed::<_, _, 256>::new(near, Xor::default(), Vec::new());
        let mut wire = Vec::new();
        for payload in [&b"ab"[..], b"cde", b"f"] {
            wire.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            wire.extend(payload.iter().map(|b| b ^ 0x5a));
            wire.push(0xee);
        }
        // The first bytes of a frame still to come.
        wire.extend_from_slice(&[0, 3, b'g' ^ 0x5a]);
        far.write_all(&wire).await.unwrap();
        let mut got = [0u8; 64];
        let n = framed.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"abcdef", "one read, the payloads end to end");
        far.write_all(&[b'h' ^ 0x5a, b'i' ^ 0x5a, 0xee])
            .await
            .unwrap();
        let n = framed.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"ghi", "the partial frame completed");
    }

    #[tokio::test]
    async fn a_buffer_of_several_frames_fills_them_all_from_one_read() {
        let (near, mut far) = tokio::io::duplex(8192);
        let mut framed = Framed::<_, _, 4096>::new(near, Xor::default(), Vec::new());
        let data = pattern(2500);
        let filled = fill_once(&mut framed, &data).await;
        assert_eq!(filled, 2500, "one read for three frames");
        framed.flush().await.unwrap();
        let mut wire = vec![0u8; 2500 + 3 * 3];
        far.read_exact(&mut wire).await.unwrap();
        let got = open_all::<4096>(&wire).await;
        assert!(got == data, "the payloads differ");
        assert_eq!(wire[..2], [0x03, 0xe8], "a full first frame");
        assert_eq!(wire[1003..1005], [0x03, 0xe8], "a full second one");
        assert_eq!(wire[2006..2008], [0x01, 0xf4], "and the rest");
    }

    #[tokio::test]
    async fn a_buffer_of_one_frame_and_a_rest_fills_a_shorter_frame_from_the_same_read() {
        let data = pattern(3000);
        // One whole frame (1,003 bytes) and 294 bytes of payload after it.
        let (near, mut far) = tokio::io::duplex(8192);
        let mut framed = Framed::<_, _, 1300>::new(near, Xor::default(), Vec::new());
        let filled = fill_once(&mut framed, &data).await;
        assert_eq!(filled, 1294, "the whole frame's payload and the rest's");
        framed.flush().await.unwrap();
        let mut wire = vec![0u8; 1294 + 2 * 3];
        far.read_exact(&mut wire).await.unwrap();
        assert_eq!(wire[..2], [0x03, 0xe8], "a full first frame");
        assert_eq!(wire[1003..1005], [0x01, 0x26], "the rest right after it");
        let got = open_all::<1300>(&wire).await;
        assert!(got == data[..1294], "the payloads differ");

        // A rest under an eighth of the whole frames' payload is not read.
        let mut framed = Framed::<_, _, 1100>::new(tokio::io::sink(), Xor::default(), Vec::new());
        let filled = fill_once(&mut framed, &data).await;
        assert_eq!(filled, 1000, "one frame, no rest");
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_buffer_and_a_cut_frame_are_errors() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut framed = Framed::<_, _, 64>::new(near, Xor::default(), Vec::new());
        far.write_all(&[0, 200]).await.unwrap();
        let e = framed.read(&mut [0u8; 16]).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "upstream frame larger than the client runtime's buffer"
        );

        let (near, mut far) = tokio::io::duplex(1024);
        let mut framed = Framed::<_, _, 64>::new(near, Xor::default(), Vec::new());
        far.write_all(&[0, 5, 1, 2]).await.unwrap();
        far.shutdown().await.unwrap();
        let e = framed.read(&mut [0u8; 16]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(e.to_string(), "upstream closed inside a frame");
    }

    #[tokio::test]
    async fn an_idle_framed_stream_holds_no_buffer() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut framed = Framed::<_, _, 512>::new(near, Xor::default(), Vec::new());
        framed.write_all(b"ping").await.unwrap();
        framed.flush().await.unwrap();
        let mut frame = [0u8; 7];
        far.read_exact(&mut frame).await.unwrap();
        far.write_all(&frame).await.unwrap();
        let mut got = [0u8; 4];
        framed.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        // Nothing pending either way: both buffers are spares again.
        let pending = std::future::poll_fn(|cx| {
            let mut sink = [0u8; 8];
            let mut read = ReadBuf::new(&mut sink);
            Poll::Ready(Pin::new(&mut framed).poll_read(cx, &mut read).is_pending())
        })
        .await;
        assert!(pending);
        assert!(framed.read.is_none() && framed.write.is_none());
        assert!(buffers::spares(512) >= 1);
    }

    #[tokio::test]
    async fn a_shut_down_direction_sends_the_codecs_end_which_the_peer_reads_as_the_end() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut framed = Framed::<_, _, 256>::new(near, Xor::default(), Vec::new());
        framed.write_all(b"x").await.unwrap();
        framed.shutdown().await.unwrap();
        let mut wire = Vec::new();
        far.read_to_end(&mut wire).await.unwrap();
        assert_eq!(
            wire,
            [0, 1, b'x' ^ 0x5a, 0xee, 0, 0, 0xee],
            "the end frame last"
        );

        // The peer's end frame ends our reading though its stream is open.
        far.write_all(&[0, 2, b'h' ^ 0x5a, b'i' ^ 0x5a, 0xee, 0, 0, 0xee, 9, 9])
            .await
            .unwrap();
        let mut got = Vec::new();
        framed.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hi");
        assert!(framed.read.is_none(), "nothing is held after the end");
    }

    /// A relay between a plain socket and a framed one carries a stream
    /// both ways through the framed end's own buffers, and ends both.
    #[tokio::test]
    async fn the_relay_carries_bytes_through_a_framed_ends_own_buffers() {
        use crate::drain::Drain;
        use crate::relay::tests::{exchange, pairs};
        use crate::relay::{relay, Ended};

        let (app, mut proxy_in, proxy_out, far) = pairs().await;
        let drain = Drain::default();
        let mut guard = drain.guard();
        let relay = tokio::spawn(async move {
            let mut framed = Framed::<_, _, 2048>::new(proxy_out, Xor::default(), Vec::new());
            relay(
                &mut proxy_in,
                &mut framed,
                std::time::Duration::from_secs(30),
                &mut guard,
            )
            .await
        });
        let up = pattern(300_001);
        let down = pattern(200_003);
        let app_side = tokio::spawn(exchange(app, up.clone()));
        let mut far = Framed::<_, _, 2048>::new(far, Xor::default(), Vec::new());
        let mut got_up = Vec::new();
        far.read_to_end(&mut got_up).await.unwrap();
        assert!(got_up == up, "the bytes up differ");
        far.write_all(&down).await.unwrap();
        far.shutdown().await.unwrap();
        assert!(app_side.await.unwrap() == down, "the bytes down differ");
        assert_eq!(relay.await.unwrap().unwrap(), Ended::Done);
    }

    /// Every write a stream was given, each as it came.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().0.push(data.to_vec());
            Poll::Ready(Ok(data.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// `payload` as one Xor frame.
    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut wire = (payload.len() as u16).to_be_bytes().to_vec();
        wire.extend(payload.iter().map(|b| b ^ 0x5a));
        wire.push(0xee);
        wire
    }

    #[tokio::test]
    async fn a_header_waits_for_the_first_payload_and_leads_its_frame_in_one_write() {
        let header = b"HEADER";
        // Filled by the relay.
        let mut framed =
            Framed::<_, _, 256>::with_header(Writes::default(), Xor::default(), Vec::new(), header);
        assert!(framed.holds_header());
        assert_eq!(fill_once(&mut framed, b"first").await, 5);
        assert!(!framed.holds_header());
        assert_eq!(framed.inner.0, [[&header[..], &frame(b"first")].concat()]);
        assert_eq!(fill_once(&mut framed, b"next").await, 4);
        assert_eq!(framed.inner.0[1], frame(b"next"), "later frames alone");

        // Written to; a write longer than the room behind the header is
        // taken in part, the rest sealed after.
        let mut framed =
            Framed::<_, _, 256>::with_header(Writes::default(), Xor::default(), Vec::new(), header);
        let data = pattern(400);
        framed.write_all(&data).await.unwrap();
        let first = 256 - header.len() - 3;
        assert_eq!(
            framed.inner.0,
            [
                [&header[..], &frame(&data[..first])].concat(),
                frame(&data[first..]),
            ]
        );
    }

    #[tokio::test]
    async fn a_waiting_header_goes_alone_on_a_flush_or_the_end_and_stays_while_nothing_comes() {
        let mut framed =
            Framed::<_, _, 256>::with_header(Writes::default(), Xor::default(), Vec::new(), b"HDR");
        // A relay read with nothing to carry yet keeps it waiting.
        let (_app, mut silent) = tokio::io::duplex(64);
        let polled = std::future::poll_fn(|cx| {
            Poll::Ready(framed.poll_fill_from(cx, &mut silent).is_pending())
        })
        .await;
        assert!(polled && framed.holds_header());
        assert!(framed.inner.0.is_empty(), "nothing sent while nothing came");
        framed.flush().await.unwrap();
        assert!(!framed.holds_header());
        assert_eq!(framed.inner.0, [b"HDR".to_vec()]);
        assert_eq!(fill_once(&mut framed, b"late").await, 4);
        assert_eq!(framed.inner.0[1], frame(b"late"));

        let mut framed =
            Framed::<_, _, 256>::with_header(Writes::default(), Xor::default(), Vec::new(), b"HDR");
        framed.shutdown().await.unwrap();
        assert_eq!(
            framed.inner.0,
            [b"HDR".to_vec(), frame(b"")],
            "then the end"
        );
    }

    /// The relay sends a waiting header alone once the client has said
    /// nothing for FIRST_PAYLOAD_WAIT, so a server that speaks first is
    /// reached; and with the client's first payload when it comes first.
    #[tokio::test]
    async fn the_relay_sends_a_waiting_header_alone_when_the_client_is_silent() {
        use crate::drain::Drain;
        use crate::relay::tests::pairs;
        use crate::relay::{relay, FIRST_PAYLOAD_WAIT};
        use std::time::{Duration, Instant};

        for client_first in [false, true] {
            let (mut app, mut proxy_in, proxy_out, mut far) = pairs().await;
            let drain = Drain::default();
            let mut guard = drain.guard();
            let started = Instant::now();
            let relay = tokio::spawn(async move {
                let mut framed = Framed::<_, _, 2048>::with_header(
                    proxy_out,
                    Xor::default(),
                    Vec::new(),
                    b"HDR",
                );
                relay(
                    &mut proxy_in,
                    &mut framed,
                    Duration::from_secs(30),
                    &mut guard,
                )
                .await
            });
            if client_first {
                app.write_all(b"hello").await.unwrap();
            }
            let mut wire = [0u8; 3];
            tokio::time::timeout(Duration::from_secs(10), far.read_exact(&mut wire))
                .await
                .expect("the header never came")
                .unwrap();
            assert_eq!(&wire, b"HDR");
            if client_first {
                let mut next = vec![0u8; frame(b"hello").len()];
                far.read_exact(&mut next).await.unwrap();
                assert_eq!(next, frame(b"hello"), "the payload right behind it");
            } else {
                assert!(
                    started.elapsed() >= FIRST_PAYLOAD_WAIT,
                    "sent before the wait ended"
                );
                // The server speaks first and the client hears it.
                far.write_all(&frame(b"banner")).await.unwrap();
                let mut banner = [0u8; 6];
                app.read_exact(&mut banner).await.unwrap();
                assert_eq!(&banner, b"banner");
            }
            drop(app);
            drop(far);
            relay.await.unwrap().ok();
        }
    }
}
