//! trojan: a tunnel per TCP flow, and a UDP association per fan-out
//! sub-link whose packets each carry their own address, over the
//! upstream's transport (TLS in practice).

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_proto::trojan::{Command, PasswordHash, Request, UdpFraming};
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};

use super::handshake::{handshake, opened, Tunnel};
use super::protocol::{Build, Protocol};
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::stream_datagrams::StreamDatagrams;

/// The Trojan client's buffer: each of a UDP link's two
/// buffers. A packet of more than `TROJAN_BUF - PACKET_HEADER_MAX` (16,121)
/// payload bytes does not fit.
pub const TROJAN_BUF: usize = 16 * 1024;

pub type TrojanUdp = StreamDatagrams<Stream, UdpFraming, TROJAN_BUF>;

pub struct Trojan {
    connector: Connector,
    /// Hashed once, when the outbound is built.
    hash: PasswordHash,
}

impl Trojan {
    pub fn new(connector: Connector, password: &str) -> Trojan {
        Trojan {
            connector,
            hash: PasswordHash::new(password),
        }
    }
}

impl Protocol for Trojan {
    type Stream = Tunnel;
    type Datagram = Box<TrojanUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Trojan>> {
        let OutboundProtocol::Trojan { upstream, password } = protocol else {
            return None;
        };
        Some(
            with.connector(upstream)
                .map(|connector| Trojan::new(connector, password.expose())),
        )
    }

    /// Dials the server and writes the request. The server answers
    /// nothing, so the dial resolves once the request is flushed: a server
    /// that is unreachable, refuses or fails the TLS handshake fails it.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Tunnel> {
        let mut stream = self.connector.connect().await?;
        let mut codec = Request::new(&self.hash, Command::Connect(destination));
        let ((), ahead) = handshake(&mut stream, &mut codec).await?;
        Ok(opened(stream, ahead))
    }

    /// Opens a UDP association: the request names the UDP command and the
    /// `0.0.0.0:0` placeholder, and every packet its own address.
    async fn associate(&self, _: &Address, _: Arc<ArcSwap<Plane>>) -> io::Result<Box<TrojanUdp>> {
        let mut stream = self.connector.connect().await?;
        let mut codec = Request::new(&self.hash, Command::Associate);
        let ((), ahead) = handshake(&mut stream, &mut codec).await?;
        StreamDatagrams::new(stream, UdpFraming, &ahead).map(Box::new)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::sync::Arc;

    use arc_swap::ArcSwap;
    use etemenanki_ir::spec::{
        AddressFamily, Host, HostPort, Limits, SocketPolicy, StreamShape, TransportSpec, Upstream,
    };
    use tokio::io::ReadBuf;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::dial::Dialer;
    use crate::outbound::DatagramLink;

    /// `hex(SHA224("abc"))`, the FIPS 180-4 vector, and CRLF.
    const HASH_ABC: &[u8] = b"23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7\r\n";

    /// A trojan outbound of `127.0.0.1:<port>` over plain TCP, password
    /// `abc`.
    fn trojan(port: u16) -> Trojan {
        let dns = crate::dns::no_servers();
        let dialer = Dialer::new(
            SocketPolicy::default(),
            Arc::new(ArcSwap::from_pointee(Limits::default())),
        );
        let upstream = Upstream {
            server: HostPort {
                host: Host::Ip("127.0.0.1".parse().unwrap()),
                port,
            },
            transport: TransportSpec {
                shape: StreamShape::Tcp,
                tls: None,
                address_family: AddressFamily::Auto,
            },
        };
        let connector = Connector::build(&upstream, dialer, dns.servers.clone()).unwrap();
        Trojan::new(connector, "abc")
    }

    fn no_inbounds() -> OwnInbounds {
        OwnInbounds::new([])
    }

    fn plane() -> Arc<ArcSwap<Plane>> {
        Arc::new(ArcSwap::from_pointee(Plane::empty()))
    }

    fn anywhere() -> Address {
        Address::Ip("0.0.0.0:0".parse().unwrap())
    }

    #[tokio::test]
    async fn a_tunnel_opens_once_its_request_is_written_and_carries_bytes_after_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let outbound = trojan(listener.local_addr().unwrap().port());
        let destination = Address::Domain("example.com".into(), 443);
        let own = no_inbounds();
        let (stream, accepted) = tokio::join!(
            outbound.connect(&destination, None, &own),
            listener.accept()
        );
        let (mut stream, (mut server, _)) = (stream.unwrap(), accepted.unwrap());
        let mut expected = HASH_ABC.to_vec();
        expected.extend_from_slice(b"\x01\x03\x0bexample.com\x01\xbb\r\n");
        let mut request = vec![0u8; expected.len()];
        server.read_exact(&mut request).await.unwrap();
        assert_eq!(request, expected);

        stream.write_all(b"ping").await.unwrap();
        server.write_all(b"pong").await.unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
    }

    #[tokio::test]
    async fn a_refused_upstream_is_a_failed_dial() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let destination = Address::Ip("192.0.2.1:80".parse().unwrap());
        assert!(trojan(port)
            .connect(&destination, None, &no_inbounds())
            .await
            .is_err());
        assert!(trojan(port).associate(&anywhere(), plane()).await.is_err());
    }

    #[tokio::test]
    async fn an_association_names_the_placeholder_and_each_packet_its_own_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let outbound = trojan(listener.local_addr().unwrap().port());
        let toward = anywhere();
        let (link, accepted) =
            tokio::join!(outbound.associate(&toward, plane()), listener.accept());
        let (mut link, (mut server, _)) = (link.unwrap(), accepted.unwrap());
        let mut request = vec![0u8; HASH_ABC.len() + 10];
        server.read_exact(&mut request).await.unwrap();
        assert_eq!(&request[..HASH_ABC.len()], HASH_ABC);
        assert_eq!(&request[HASH_ABC.len()..], b"\x03\x01\0\0\0\0\0\0\r\n");

        let a = Address::Ip("192.0.2.1:53".parse().unwrap());
        let b = Address::Ip("192.0.2.2:53".parse().unwrap());
        poll_fn(|cx| link.poll_send_to(cx, b"to a", &a))
            .await
            .unwrap();
        poll_fn(|cx| link.poll_send_to(cx, b"to b", &b))
            .await
            .unwrap();
        let mut packets = [0u8; 2 * 15];
        server.read_exact(&mut packets).await.unwrap();
        assert_eq!(
            &packets[..15],
            b"\x01\xc0\x00\x02\x01\x00\x35\x00\x04\r\nto a"
        );
        assert_eq!(
            &packets[15..],
            b"\x01\xc0\x00\x02\x02\x00\x35\x00\x04\r\nto b"
        );

        server
            .write_all(b"\x01\xc0\x00\x02\x02\x00\x35\x00\x04\r\nfrom")
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        let mut read = ReadBuf::new(&mut buf);
        let source = poll_fn(|cx| link.poll_recv_from(cx, &mut read))
            .await
            .unwrap();
        assert_eq!((source, read.filled()), (b, &b"from"[..]));
    }
}
