//! A VLESS tunnel: the server's bytes start with a response header, which
//! the first reads skip in the caller's buffer (no buffer of its own, so
//! nothing is allocated per read); writes go straight to the transport.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use etemenanki_proto::vless::ResponseHeader;
use etemenanki_transport::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::relay::{Fills, Relayed};

pub struct VlessStream {
    stream: Stream,
    header: ResponseHeader,
}

impl VlessStream {
    pub fn new(stream: Stream) -> Self {
        VlessStream {
            stream,
            header: ResponseHeader::default(),
        }
    }

    pub fn get_ref(&self) -> &Stream {
        &self.stream
    }

    /// The stream under it, which its writes go to as they are.
    pub fn get_mut(&mut self) -> &mut Stream {
        &mut self.stream
    }
}

impl AsyncRead for VlessStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.header.done() || buf.remaining() == 0 {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        }
        let start = buf.filled().len();
        loop {
            ready!(Pin::new(&mut this.stream).poll_read(cx, buf))?;
            let read = &buf.filled()[start..];
            if read.is_empty() && this.header.done() {
                return Poll::Ready(Ok(()));
            }
            if read.is_empty() {
                // A server that does not know the id closes at once.
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "upstream closed during the handshake",
                )));
            }
            let skipped = this.header.skip(read)?;
            let kept = read.len() - skipped;
            buf.filled_mut().copy_within(start + skipped.., start);
            buf.set_filled(start + kept);
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
            // The read was all header: read again rather than report the
            // empty read that means the end of the stream.
        }
    }
}

impl AsyncWrite for VlessStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Its writes are the stream's, and so is what the relay fills: only its
/// reads skip the header, so it never moves bytes in the kernel.
impl Relayed for VlessStream {
    fn plain_tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }

    fn fills(&mut self) -> Option<&mut dyn Fills> {
        self.stream.fills()
    }

    fn buffer_len(&mut self) -> usize {
        self.stream.buffer_len()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        Relayed::local_addr(&self.stream)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn pair() -> (VlessStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (
            VlessStream::new(Stream::Tcp(client.unwrap())),
            accepted.unwrap().0,
        )
    }

    #[tokio::test]
    async fn a_response_header_split_across_writes_is_skipped_and_the_bytes_after_it_kept() {
        let (mut client, mut server) = pair().await;
        let writer = tokio::spawn(async move {
            for piece in [&b"\x00"[..], b"\x02a", b"b", b"hello", b" world"] {
                server.write_all(piece).await.unwrap();
                server.flush().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello world");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn a_server_that_closes_before_its_header_fails_the_first_read() {
        let (mut client, server) = pair().await;
        drop(server);
        let e = client.read(&mut [0u8; 64]).await.unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::UnexpectedEof,
                "upstream closed during the handshake".into()
            )
        );
    }
}
