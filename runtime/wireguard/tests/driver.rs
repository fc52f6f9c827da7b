//! The tunnel driver against a peer made of boringtun alone on a loopback
//! UDP socket: what goes on the wire. What depends on WireGuard's timers
//! (handshake retries, keepalives, rekeys, session expiry) is driven under
//! simulated time in ../sim, a package of its own: boringtun reads its
//! clock itself, and its mock clock is a crate feature that would reach
//! every binary of the workspace through feature unification.

mod peer;

use std::sync::Arc;
use std::time::Duration;

use etemenanki_wireguard::Tunnel;
use peer::{message_type, spec, Peer, INITIATION, LOCAL, TRANSPORT, WAIT};
use tokio::net::UdpSocket;
use tokio::time::timeout;

const TARGET: &str = "10.9.0.1:80";

#[tokio::test]
async fn a_start_sends_nothing_and_the_first_flow_brings_the_handshake_then_its_syn() {
    let (mut peer, tunnel) = Peer::with_tunnel(None).await;
    assert!(
        peer.recv_within(Duration::from_millis(300)).await.is_none(),
        "a started tunnel contacts no one"
    );
    let flow = {
        let tunnel = tunnel.clone();
        tokio::spawn(async move { tunnel.connect_tcp(TARGET.parse().unwrap()).await })
    };
    let init = peer.recv().await;
    assert_eq!(message_type(&init), INITIATION);
    assert_eq!(init.len(), 148);
    assert!(peer.open(&init).await.is_none());
    // Then the flow's SYN, sealed under the new session.
    let syn = loop {
        let datagram = peer.recv().await;
        assert_eq!(message_type(&datagram), TRANSPORT);
        if let Some(packet) = peer.open(&datagram).await {
            break packet;
        }
    };
    assert_eq!(syn[0] >> 4, 4, "IPv4");
    assert_eq!(syn[9], 6, "TCP");
    assert_eq!(syn[12..16], LOCAL, "from our tunnel address");
    assert_eq!(syn[16..20], [10, 9, 0, 1], "to the destination");
    let tcp = &syn[usize::from(syn[0] & 0x0f) * 4..];
    assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), 80);
    assert_eq!(tcp[13] & 0x02, 0x02, "SYN");
    flow.abort();
    assert!(tunnel.is_alive());
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
