//! A Shadowsocks 2022 UDP session as a datagram link: one socket toward
//! the server, every packet sealed and opened in one of two buffers held
//! for the life of the association.

use std::io;
use std::net::SocketAddr;
use std::task::{ready, Context, Poll};
use std::time::SystemTime;

use etemenanki_proto::ss2022::UdpSession;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;

use super::link::{endpoint, DatagramLink};

/// The largest datagram sent or received: what one UDP packet can carry.
const DATAGRAM: usize = 65_535;
/// The most payload a packet may carry once its headers are added.
const MAX_PAYLOAD: usize = DATAGRAM - UdpSession::HEADROOM - UdpSession::TAILROOM;

pub struct Ss2022Udp {
    socket: UdpSocket,
    server: SocketAddr,
    session: UdpSession,
    send: Box<[u8]>,
    recv: Box<[u8]>,
}

impl Ss2022Udp {
    pub fn new(socket: UdpSocket, server: SocketAddr, session: UdpSession) -> Self {
        Ss2022Udp {
            socket,
            server,
            session,
            send: vec![0; DATAGRAM].into_boxed_slice(),
            recv: vec![0; DATAGRAM].into_boxed_slice(),
        }
    }
}

impl DatagramLink for Ss2022Udp {
    /// Seals `payload` for `to` and sends it to the server. A payload too
    /// long for one packet fails the send, as every client link does for a
    /// datagram larger than its buffer.
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        if payload.len() > MAX_PAYLOAD {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer",
            )));
        }
        ready!(self.socket.poll_send_ready(cx))?;
        let head = UdpSession::HEADROOM;
        self.send[head..head + payload.len()].copy_from_slice(payload);
        let end = head + payload.len() + UdpSession::TAILROOM;
        let packet =
            self.session
                .seal_to(&mut self.send[..end], payload.len(), to, SystemTime::now())?;
        self.socket
            .poll_send_to(cx, &self.send[packet], self.server)
            .map_ok(drop)
    }

    /// The next reply from the server, its payload copied into `buf`
    /// (truncated if it does not fit, as UDP does) and the peer its header
    /// names. Datagrams from anyone but the server, and replies that fail
    /// authentication or a check, are dropped.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        loop {
            let mut read = ReadBuf::new(&mut self.recv);
            let from = ready!(self.socket.poll_recv_from(cx, &mut read))?;
            let len = read.filled().len();
            if endpoint(from) != endpoint(self.server) {
                continue;
            }
            match self
                .session
                .open_from(&mut self.recv[..len], SystemTime::now())
            {
                Ok((peer, payload)) => {
                    let payload = &self.recv[payload];
                    let n = payload.len().min(buf.remaining());
                    buf.put_slice(&payload[..n]);
                    return Poll::Ready(Ok(peer));
                }
                Err(e) => tracing::debug!("shadowsocks-2022: dropping a reply: {e}"),
            }
        }
    }
}
