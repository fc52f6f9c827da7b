//! The tunnel driver against a peer made of boringtun alone on a loopback
//! UDP socket: what goes on the wire, and when. boringtun keeps its timers
//! on the system clock (its mock clock is a crate feature that would reach
//! every binary of the workspace through feature unification), so the
//! handshake retry and the keepalive run in real time, bounded; a rekey
//! (120 s) is left to boringtun's own tests.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use boringtun::noise::{Tunn, TunnResult};
use boringtun::x25519::{PublicKey, StaticSecret};
use etemenanki_ir::spec::{AddressFamily, Host, HostPort, Secret, WireguardSpec};
use etemenanki_wireguard::Tunnel;
use tokio::net::UdpSocket;
use tokio::time::timeout;

const OURS: [u8; 32] = [0x11; 32];
const PEERS: [u8; 32] = [0x22; 32];
const RESERVED: [u8; 3] = [7, 8, 9];
const TARGET: &str = "10.9.0.1:80";
/// Bound on any wait for a datagram that must come.
const WAIT: Duration = Duration::from_secs(10);

fn spec(endpoint: SocketAddr, keepalive: Option<u16>) -> WireguardSpec {
    WireguardSpec {
        private_key: Secret(OURS),
        peer_public_key: PublicKey::from(&StaticSecret::from(PEERS)).to_bytes(),
        preshared_key: None,
        endpoint: HostPort {
            host: Host::Ip(endpoint.ip()),
            port: endpoint.port(),
        },
        endpoint_address_family: AddressFamily::Auto,
        addresses: vec![IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2))],
        mtu: 1420,
        keepalive,
        reserved: Some(RESERVED),
        address_family: AddressFamily::Auto,
    }
}

/// The peer: boringtun as the responder, writing WARP-style reserved
/// bytes into what it sends and checking ours.
struct Peer {
    socket: UdpSocket,
    tunn: Tunn,
    from: Option<SocketAddr>,
}

impl Peer {
    async fn bind() -> Peer {
        let ours = PublicKey::from(&StaticSecret::from(OURS));
        Peer {
            socket: UdpSocket::bind("127.0.0.1:0").await.unwrap(),
            tunn: Tunn::new(StaticSecret::from(PEERS), ours, None, None, 1, None),
            from: None,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    /// The next datagram, with its reserved bytes checked and cleared.
    async fn recv(&mut self) -> Vec<u8> {
        let mut buf = vec![0u8; 65536];
        let (n, from) = timeout(WAIT, self.socket.recv_from(&mut buf))
            .await
            .expect("a datagram in time")
            .unwrap();
        self.from = Some(from);
        buf.truncate(n);
        assert_eq!(buf[1..4], RESERVED, "the reserved bytes ride every message");
        buf[1..4].fill(0);
        buf
    }

    async fn send(&self, packet: &mut [u8]) {
        packet[1..4].copy_from_slice(&RESERVED);
        self.socket
            .send_to(packet, self.from.unwrap())
            .await
            .unwrap();
    }

    /// Opens `datagram`: the IP packet inside, if any, after sending what
    /// boringtun answers (the handshake response); a keepalive holds none.
    async fn open(&mut self, datagram: &[u8]) -> Option<Vec<u8>> {
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

fn message_type(datagram: &[u8]) -> u8 {
    datagram[0]
}

#[tokio::test]
async fn a_start_sends_nothing_and_the_first_flow_brings_the_handshake_then_its_syn() {
    let mut peer = Peer::bind().await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(peer.addr()).await.unwrap();
    let tunnel = Arc::new(Tunnel::start(&spec(peer.addr(), None), udp, peer.addr()).unwrap());
    let mut buf = [0u8; 64];
    assert!(
        timeout(Duration::from_millis(300), peer.socket.recv_from(&mut buf))
            .await
            .is_err(),
        "a started tunnel contacts no one"
    );
    let flow = {
        let tunnel = tunnel.clone();
        tokio::spawn(async move { tunnel.connect_tcp(TARGET.parse().unwrap()).await })
    };
    let init = peer.recv().await;
    assert_eq!(message_type(&init), 1, "a handshake initiation");
    assert_eq!(init.len(), 148);
    assert!(peer.open(&init).await.is_none());
    // Then the flow's SYN, sealed under the new session.
    let syn = loop {
        let datagram = peer.recv().await;
        assert_eq!(message_type(&datagram), 4, "transport data");
        if let Some(packet) = peer.open(&datagram).await {
            break packet;
        }
    };
    assert_eq!(syn[0] >> 4, 4, "IPv4");
    assert_eq!(syn[9], 6, "TCP");
    assert_eq!(syn[12..16], [10, 9, 0, 2], "from our tunnel address");
    assert_eq!(syn[16..20], [10, 9, 0, 1], "to the destination");
    let tcp = &syn[usize::from(syn[0] & 0x0f) * 4..];
    assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), 80);
    assert_eq!(tcp[13] & 0x02, 0x02, "SYN");
    flow.abort();
    assert!(tunnel.is_alive());
}

#[tokio::test]
async fn an_unanswered_handshake_is_sent_again() {
    let mut peer = Peer::bind().await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(peer.addr()).await.unwrap();
    let tunnel = Arc::new(Tunnel::start(&spec(peer.addr(), None), udp, peer.addr()).unwrap());
    let flow = {
        let tunnel = tunnel.clone();
        tokio::spawn(async move { tunnel.connect_tcp(TARGET.parse().unwrap()).await })
    };
    let first = peer.recv().await;
    assert_eq!(message_type(&first), 1);
    // Unanswered: boringtun retries after REKEY_TIMEOUT (5 s) and jitter.
    let second = peer.recv().await;
    assert_eq!(message_type(&second), 1, "a second initiation");
    assert_ne!(first, second, "a fresh ephemeral key and timestamp");
    flow.abort();
}

#[tokio::test]
async fn a_persistent_keepalive_goes_out_on_an_idle_session() {
    let mut peer = Peer::bind().await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(peer.addr()).await.unwrap();
    let tunnel = Arc::new(Tunnel::start(&spec(peer.addr(), Some(1)), udp, peer.addr()).unwrap());
    let flow = {
        let tunnel = tunnel.clone();
        tokio::spawn(async move { tunnel.connect_tcp(TARGET.parse().unwrap()).await })
    };
    let init = peer.recv().await;
    assert_eq!(message_type(&init), 1);
    peer.open(&init).await;
    // The SYN and its retransmissions carry data; a keepalive is a data
    // message with nothing inside (header and tag: 32 bytes). The first
    // confirms the new session; the persistent one comes after.
    let mut keepalives = 0;
    for _ in 0..20 {
        let datagram = peer.recv().await;
        if message_type(&datagram) == 4 && datagram.len() == 32 {
            keepalives += 1;
            if keepalives == 2 {
                break;
            }
        }
        peer.open(&datagram).await;
    }
    let seen = keepalives == 2;
    assert!(seen, "a keepalive within the bounded datagrams");
    flow.abort();
}

#[tokio::test]
async fn a_refused_endpoint_stops_the_driver_and_fails_the_flow() {
    let gone = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let endpoint = gone.local_addr().unwrap();
    drop(gone);
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(endpoint).await.unwrap();
    let tunnel = Arc::new(Tunnel::start(&spec(endpoint, None), udp, endpoint).unwrap());
    let flow = timeout(WAIT, tunnel.connect_tcp(TARGET.parse().unwrap()))
        .await
        .expect("the flow fails in time");
    let e = flow.err().expect("no connection through a dead tunnel");
    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    assert_eq!(
        e.to_string(),
        "wireguard: the tunnel this flow rode has stopped"
    );
    for _ in 0..100 {
        if !tunnel.is_alive() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!tunnel.is_alive());
}

#[tokio::test]
async fn a_tunnel_needs_a_local_address() {
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let endpoint = udp.local_addr().unwrap();
    let mut spec = spec(endpoint, None);
    spec.addresses.clear();
    let e = Tunnel::start(&spec, udp, endpoint).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        "wireguard: no tunnel-local addresses configured"
    );
}
