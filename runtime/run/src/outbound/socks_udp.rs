//! A SOCKS5 UDP association through an upstream server: a control stream
//! that must stay open, and a UDP socket toward the server's relay.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use etemenanki_proto::socks::{parse_datagram, write_datagram_header};
use etemenanki_proto::Address;
use etemenanki_transport::Stream;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::UdpSocket;

use super::link::{endpoint, DatagramLink};

/// The receive buffer: the largest UDP payload plus its header.
const RECV_BUF: usize = 64 * 1024;

pub struct SocksUdp {
    control: Stream,
    socket: UdpSocket,
    relay: SocketAddr,
    closed: bool,
    /// Header and payload of the packet being sent, reused.
    scratch: Vec<u8>,
    recv: Box<[u8]>,
}

fn control_closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "socks: the control connection closed",
    )
}

impl SocksUdp {
    pub fn new(control: Stream, socket: UdpSocket, relay: SocketAddr) -> Self {
        SocksUdp {
            control,
            socket,
            relay,
            closed: false,
            scratch: Vec::with_capacity(2048),
            recv: vec![0; RECV_BUF].into_boxed_slice(),
        }
    }

    /// Drains whatever the server sends on the control stream; its EOF or
    /// error ends the association.
    fn poll_control(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.closed {
            return Err(control_closed());
        }
        let mut sink = [0u8; 256];
        loop {
            let mut read = ReadBuf::new(&mut sink);
            match Pin::new(&mut self.control).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    self.closed = true;
                    return Err(control_closed());
                }
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    self.closed = true;
                    return Err(e);
                }
                Poll::Pending => return Ok(()),
            }
        }
    }
}

impl DatagramLink for SocksUdp {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        self.poll_control(cx)?;
        self.scratch.clear();
        write_datagram_header(to, &mut self.scratch);
        self.scratch.extend_from_slice(payload);
        self.socket
            .poll_send_to(cx, &self.scratch, self.relay)
            .map_ok(drop)
    }

    /// The next datagram from the relay, its payload copied into `buf`
    /// (truncated if it does not fit, as UDP does) and the peer its header
    /// names. Datagrams from anyone but the relay, and ones whose header does
    /// not parse, are skipped.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        if let Err(e) = self.poll_control(cx) {
            return Poll::Ready(Err(e));
        }
        loop {
            let mut read = ReadBuf::new(&mut self.recv);
            let from = match self.socket.poll_recv_from(cx, &mut read) {
                Poll::Ready(Ok(from)) => from,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            if endpoint(from) != endpoint(self.relay) {
                continue;
            }
            let Ok((peer, payload)) = parse_datagram(read.filled()) else {
                continue;
            };
            let n = payload.len().min(buf.remaining());
            buf.put_slice(&payload[..n]);
            return Poll::Ready(Ok(peer));
        }
    }
}
