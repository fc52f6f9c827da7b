//! The peer of the driver tests: boringtun alone on a loopback UDP socket,
//! writing WARP-style reserved bytes into what it sends and checking ours.
//! Shared by tests/driver.rs (real time) and sim/ (simulated time).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use boringtun::noise::{Tunn, TunnResult};
use boringtun::x25519::{PublicKey, StaticSecret};
use etemenanki_ir::spec::{AddressFamily, Host, HostPort, Secret, WireguardSpec};
use etemenanki_wireguard::Tunnel;
use tokio::net::UdpSocket;
use tokio::time::timeout;

pub const OURS: [u8; 32] = [0x11; 32];
pub const PEERS: [u8; 32] = [0x22; 32];
pub const RESERVED: [u8; 3] = [7, 8, 9];
/// Our address inside the tunnel.
pub const LOCAL: [u8; 4] = [10, 9, 0, 2];
/// Bound on any wait for a datagram that must come.
pub const WAIT: Duration = Duration::from_secs(10);

/// WireGuard's message types (the first byte of every message) that the
/// driver sends as the initiator.
pub const INITIATION: u8 = 1;
pub const TRANSPORT: u8 = 4;

pub fn spec(endpoint: SocketAddr, keepalive: Option<u16>) -> WireguardSpec {
    WireguardSpec {
        private_key: Secret(OURS),
        peer_public_key: PublicKey::from(&StaticSecret::from(PEERS)).to_bytes(),
        preshared_key: None,
        endpoint: HostPort {
            host: Host::Ip(endpoint.ip()),
            port: endpoint.port(),
        },
        endpoint_address_family: AddressFamily::Auto,
        addresses: vec![IpAddr::V4(Ipv4Addr::from(LOCAL))],
        mtu: 1420,
        keepalive,
        reserved: Some(RESERVED),
        address_family: AddressFamily::Auto,
    }
}

pub struct Peer {
    pub socket: UdpSocket,
    pub tunn: Tunn,
    /// Our tunnel's socket.
    ours: SocketAddr,
}

impl Peer {
    /// The peer, and our tunnel to it started (which sends nothing yet).
    pub async fn with_tunnel(keepalive: Option<u16>) -> (Peer, Arc<Tunnel>) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        udp.connect(addr).await.unwrap();
        let ours = udp.local_addr().unwrap();
        let tunnel = Tunnel::start(&spec(addr, keepalive), udp, addr).unwrap();
        let peer = Peer {
            socket,
            tunn: Tunn::new(
                StaticSecret::from(PEERS),
                PublicKey::from(&StaticSecret::from(OURS)),
                None,
                None,
                1,
                None,
            ),
            ours,
        };
        (peer, Arc::new(tunnel))
    }

    /// The next datagram within `wait`, with its reserved bytes checked
    /// and cleared.
    pub async fn recv_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        let (n, from) = timeout(wait, self.socket.recv_from(&mut buf))
            .await
            .ok()?
            .unwrap();
        assert_eq!(from, self.ours, "only our tunnel sends here");
        buf.truncate(n);
        assert_eq!(buf[1..4], RESERVED, "the reserved bytes ride every message");
        buf[1..4].fill(0);
        Some(buf)
    }

    /// The next datagram, which must come.
    pub async fn recv(&mut self) -> Vec<u8> {
        self.recv_within(WAIT).await.expect("a datagram in time")
    }

    /// Sends `packet` to our tunnel's socket.
    pub async fn send(&self, packet: &mut [u8]) {
        packet[1..4].copy_from_slice(&RESERVED);
        self.socket.send_to(packet, self.ours).await.unwrap();
    }

    /// Opens `datagram`: the IP packet inside, if any, after sending what
    /// boringtun answers (the handshake response); a keepalive holds none.
    pub async fn open(&mut self, datagram: &[u8]) -> Option<Vec<u8>> {
        let mut out = vec![0u8; 65536];
        match self.tunn.decapsulate(None, datagram, &mut out) {
            TunnResult::WriteToNetwork(packet) => {
                let mut packet = packet.to_vec();
                self.send(&mut packet).await;
                None
            }
            TunnResult::WriteToTunnelV4(packet, _) => Some(packet.to_vec()),
            // A keepalive: the initiator sends one to confirm the session.
            TunnResult::Done => None,
            other => panic!("unexpected from the peer's tunnel: {other:?}"),
        }
    }
}

pub fn message_type(datagram: &[u8]) -> u8 {
    datagram[0]
}
