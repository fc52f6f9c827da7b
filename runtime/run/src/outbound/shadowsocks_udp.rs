//! A shadowsocks UDP link: one socket, the server's address, and the AEAD
//! UDP codec. Nothing is allocated per packet: a packet is sealed in a
//! pooled buffer held only while it is sent, and a reply is received and
//! opened in the caller's buffer. (A reply whose source is a domain carries
//! that name in an Address, which allocates; servers name sources by IP.)

use etemenanki_proto::MAX_DATAGRAM;
use std::io;
use std::net::SocketAddr;
use std::task::{ready, Context, Poll};

use etemenanki_proto::aead::TAG_LEN;
use etemenanki_proto::codec::DatagramCodec;
use etemenanki_proto::shadowsocks::SsDatagram;
use etemenanki_proto::Address;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;

use super::link::{endpoint, DatagramLink};
use crate::buffers;

/// The buffer a packet is sealed in: the codec's headroom, the largest
/// payload and the tag.
const SEAL_BUF: usize = SsDatagram::HEADROOM + MAX_DATAGRAM + TAG_LEN;

pub struct SsUdp {
    socket: UdpSocket,
    server: SocketAddr,
    codec: SsDatagram,
}

impl SsUdp {
    pub fn new(socket: UdpSocket, server: SocketAddr, codec: SsDatagram) -> SsUdp {
        SsUdp {
            socket,
            server,
            codec,
        }
    }

    /// Seals `payload` for `to` in `buf` and sends it, now or never: a
    /// socket not ready says WouldBlock.
    fn seal_and_send(&mut self, buf: &mut [u8], payload: &[u8], to: &Address) -> io::Result<()> {
        let len = payload.len();
        let Some(room) = buf.get_mut(SsDatagram::HEADROOM..SsDatagram::HEADROOM + len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer",
            ));
        };
        room.copy_from_slice(payload);
        let packet = self.codec.seal_to(buf, len, to)?;
        self.socket.try_send_to(&buf[packet], self.server).map(drop)
    }
}

impl DatagramLink for SsUdp {
    fn poll_send_to(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
        to: &Address,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.socket.poll_send_ready(cx))?;
            let mut buf = buffers::take(SEAL_BUF);
            let sent = self.seal_and_send(&mut buf, payload, to);
            buffers::give(buf);
            match sent {
                // Readiness was stale; it is cleared, so the next poll waits.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                sent => return Poll::Ready(sent),
            }
        }
    }

    /// The next reply from the server, opened in `buf` and its payload
    /// moved to the front, with the source it names. Datagrams from anyone
    /// but the server, and ones that do not open, are dropped; so is a
    /// reply longer than `buf` (never the fan-out's 64 KiB), as its tag
    /// cannot be checked.
    fn poll_recv_from(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        loop {
            let space = buf.initialize_unfilled();
            let mut read = ReadBuf::new(space);
            let from = ready!(self.socket.poll_recv_from(cx, &mut read))?;
            let n = read.filled().len();
            if endpoint(from) != endpoint(self.server) {
                continue;
            }
            match self.codec.open_from(&mut space[..n]) {
                Ok(Some(packet)) => {
                    let len = packet.payload.len();
                    space.copy_within(packet.payload, 0);
                    buf.advance(len);
                    return Poll::Ready(Ok(packet.peer));
                }
                Ok(None) => continue,
                Err(e) => tracing::debug!("shadowsocks: dropping a reply from {from}: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use etemenanki_proto::aead::{Algorithm, MasterKey};

    use super::*;

    #[tokio::test]
    async fn packets_go_sealed_to_the_server_and_only_its_replies_come_back() {
        let master = MasterKey::from_password(Algorithm::Aes128Gcm, b"secret");
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let ours = socket.local_addr().unwrap();
        let mut link = SsUdp::new(
            socket,
            server.local_addr().unwrap(),
            SsDatagram::new(master.clone()),
        );
        let peer = Address::Ip("192.0.2.7:53".parse().unwrap());
        poll_fn(|cx| link.poll_send_to(cx, b"query", &peer))
            .await
            .unwrap();

        let mut codec = SsDatagram::new(master);
        let mut buf = vec![0; 2048];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(from, ours);
        let packet = codec.open_from(&mut buf[..n]).unwrap().unwrap();
        assert_eq!(packet.peer, peer);
        assert_eq!(&buf[packet.payload], b"query");

        // A stranger, and the server with bytes that do not open: dropped.
        let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut reply = vec![0; SsDatagram::HEADROOM + 6 + TAG_LEN];
        reply[SsDatagram::HEADROOM..SsDatagram::HEADROOM + 6].copy_from_slice(b"answer");
        let sealed = codec.seal_to(&mut reply, 6, &peer).unwrap();
        stranger
            .send_to(&reply[sealed.clone()], ours)
            .await
            .unwrap();
        server.send_to(&[0x55; 64], ours).await.unwrap();
        server.send_to(&reply[sealed], ours).await.unwrap();

        let mut space = [0u8; 2048];
        let mut read = ReadBuf::new(&mut space);
        let source = poll_fn(|cx| link.poll_recv_from(cx, &mut read))
            .await
            .unwrap();
        assert_eq!(source, peer);
        assert_eq!(read.filled(), b"answer");
    }
}
