//! A stream with bytes read ahead of it (linkerd's `PrefixedIo`): a reply
//! and the first bytes after it often arrive in one read, and those bytes
//! belong to whoever reads the stream next.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct Prefixed<S> {
    prefix: Vec<u8>,
    /// How much of `prefix` was read already.
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }

    /// The bytes read ahead that nobody has read yet.
    pub fn pending(&self) -> &[u8] {
        &self.prefix[self.at..]
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.prefix.len() {
            let n = (this.prefix.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                // Read out: the prefix is no longer held.
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_prefix_is_read_first_then_the_stream_and_writes_pass_through() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut stream = Prefixed::new(b"ahead ".to_vec(), near);
        far.write_all(b"behind").await.unwrap();
        drop(far.shutdown().await);
        let mut small = [0u8; 3];
        stream.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"ahe");
        assert_eq!(stream.pending(), b"ad ");
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"ad behind");
        assert!(stream.pending().is_empty());
        stream.write_all(b"up").await.unwrap();
        let mut got = [0u8; 2];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"up");
    }

    #[tokio::test]
    async fn a_vectored_write_reaches_the_stream_as_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (near, far) = tokio::join!(
            tokio::net::TcpStream::connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        let mut stream = Prefixed::new(Vec::new(), near.unwrap());
        assert!(stream.is_write_vectored());
        let parts = [io::IoSlice::new(b"ab"), io::IoSlice::new(b"cd")];
        // One writev: both slices, not the first alone.
        assert_eq!(stream.write_vectored(&parts).await.unwrap(), 4);
        let mut got = [0u8; 4];
        far.unwrap().0.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abcd");
    }
}
