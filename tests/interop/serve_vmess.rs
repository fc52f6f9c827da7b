//! Our vmess inbound against v2ray 4.34's vmess client (AEAD header,
//! alterId 0) over tcp and ws with aes-128-gcm and chacha20-poly1305, TCP
//! and UDP; fifty concurrent connections, none refused by the auth-id
//! replay filter; Mux.Cool: UDP from sing-box's XUDP, TCP and UDP from v2ray's mux
//! over tcp, ws, ws+tls and tls;
//! our own vmess outbound over every transport and with
//! every body security; several ids, a wrong one refused while the right
//! ones are served; and probes that must not crash it.

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

use crate::serve::{
    asks_two_servers_in_turn, carries_nothing, carries_tcp, carries_udp, carries_v2ray_mux, ends,
    ours_to_ours, own_dir, refused_and_held, serve, server_config, setup, sing_box_client,
    survives_probes, v2ray_client, v2ray_with_mux, Transport, HELD, SHORT_HANDSHAKE, SMALL_UDP_MAX,
    UDP_MAX,
};
use crate::support::certs::Pki;
use crate::support::client::{check_echo, pattern, socks5_connect};
use crate::support::servers::{free_addr, tcp_echo};

const ID: &str = "5d2c8e1a-7b3f-4a69-b0c4-e1f2a3b4c5d6";
const OTHER_ID: &str = "1a2b3c4d-5e6f-4789-8abc-def012345678";
const WRONG_ID: &str = "5d2c8e1a-7b3f-4a69-b0c4-e1f2a3b4c5d7";
const THIRD_ID: &str = "7e6d5c4b-3a29-4180-9f8e-7d6c5b4a3928";

/// The body securities v2ray's client is driven with.
const V2RAY_SECURITIES: [&str; 2] = ["aes-128-gcm", "chacha20-poly1305"];

/// Our vmess inbound's tables: `transport` and `ids`.
fn inbound_tables(transport: Transport, ids: &[&str]) -> String {
    let mut text = transport.inbound_tables();
    text.push_str("[inbound.settings]\n");
    match ids {
        [one] => text.push_str(&format!("id = \"{one}\"\n")),
        many => {
            let list: Vec<String> = many.iter().map(|id| format!("\"{id}\"")).collect();
            text.push_str(&format!("ids = [{}]\n", list.join(", ")));
        }
    }
    text
}

/// Our vmess outbound's tables over `transport` with `id` and the body
/// `security`.
fn outbound_tables(transport: Transport, ca: &Path, id: &str, security: &str) -> String {
    format!(
        "{}[outbound.settings]\nid = \"{id}\"\nsecurity = \"{security}\"\n",
        transport.outbound_tables(ca)
    )
}

/// v2ray's vmess outbound to `server` with `id`, alterId 0 (the AEAD
/// header) and `security`, over `transport`.
fn v2ray_vmess(
    server: SocketAddr,
    id: &str,
    security: &str,
    transport: Transport,
    ca: &Path,
) -> String {
    format!(
        r#"{{ "protocol": "vmess",
    "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {},
      "users": [{{ "id": "{id}", "alterId": 0, "security": "{security}" }}] }}] }},
    "streamSettings": {{ {} }} }}"#,
        server.port(),
        transport.v2ray_stream(ca)
    )
}

#[test]
fn v2ray_vmess_client_carries_tcp_and_udp_through_our_vmess_inbound_over_tcp_and_ws() {
    let test = "v2ray_vmess_client_carries_tcp_and_udp_through_our_vmess_inbound_over_tcp_and_ws";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    for transport in [Transport::Tcp, Transport::Ws("/vmess-ws")] {
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "vmess",
            server,
            &inbound_tables(transport, &[ID]),
            "",
        );
        for security in V2RAY_SECURITIES {
            let what = format!(
                "v2ray through our vmess inbound over {} with {security}",
                transport.name()
            );
            let outbound = v2ray_vmess(server, ID, security, transport, &pki.ca);
            let (_v2ray, front) = v2ray_client(&peers[0], &dir, &outbound);
            carries_tcp(front, &what);
            carries_udp(front, &what, SMALL_UDP_MAX);
        }
        ours.wait_for_log("via out@v1");
    }
}

/// sing-box's vmess outbound to `server` with `id` (alterId 0) and
/// `security`, over `transport`.
fn sing_box_vmess(
    server: SocketAddr,
    id: &str,
    security: &str,
    transport: Transport,
    ca: &Path,
) -> String {
    format!(
        r#"{{ "type": "vmess", "tag": "ours", "server": "127.0.0.1", "server_port": {},
    "uuid": "{id}", "security": "{security}", "alter_id": 0{} }}"#,
        server.port(),
        transport.sing_box_keys(ca)
    )
}

#[test]
fn sing_box_vmess_client_carries_tcp_and_udp_through_our_vmess_inbound_over_tcp_ws_tls_and_grpc_tls(
) {
    let test = "sing_box_vmess_client_carries_tcp_and_udp_through_our_vmess_inbound_over_tcp_ws_tls_and_grpc_tls";
    let Some((peers, dir, pki)) = setup(test, &["sing-box"]) else {
        return;
    };
    for (transport, security) in [
        (Transport::Tcp, "chacha20-poly1305"),
        (Transport::WsTls("/vmess-ws", &pki.server), "aes-128-gcm"),
        (
            Transport::GrpcTls("VmessService", &pki.server),
            "aes-128-gcm",
        ),
    ] {
        let what = format!(
            "sing-box through our vmess inbound over {} with {security}",
            transport.name()
        );
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "vmess",
            server,
            &inbound_tables(transport, &[ID]),
            "",
        );
        let outbound = sing_box_vmess(server, ID, security, transport, &pki.ca);
        let (_sing_box, front) = sing_box_client(&peers[0], &dir, &outbound);
        carries_tcp(front, &what);
        carries_udp(front, &what, UDP_MAX);
        ours.wait_for_log("via out@v1");
    }
}

#[test]
fn mux_cool_from_sing_box_xudp_and_v2ray_mux_tcp_and_udp_is_served_by_our_vmess_inbound() {
    let test =
        "mux_cool_from_sing_box_xudp_and_v2ray_mux_tcp_and_udp_is_served_by_our_vmess_inbound";
    let Some((peers, dir, pki)) = setup(test, &["sing-box", "v2ray"]) else {
        return;
    };
    let server = free_addr();
    let ours = serve(
        &own_dir(&dir, "ours", server),
        "vmess",
        server,
        &inbound_tables(Transport::Tcp, &[ID]),
        "",
    );
    // XUDP: UDP as the mux command, each packet naming its address, as
    // Xray's vmess clients send it.
    let outbound = sing_box_vmess(server, ID, "aes-128-gcm", Transport::Tcp, &pki.ca).replacen(
        r#""alter_id": 0"#,
        r#""alter_id": 0, "packet_encoding": "xudp""#,
        1,
    );
    let (_sing_box, front) = sing_box_client(&peers[0], &dir, &outbound);
    let what = "sing-box with xudp through our vmess inbound";
    carries_tcp(front, what);
    carries_udp(front, what, UDP_MAX);
    ours.wait_for_log("vmess: a mux.cool stream from");
    asks_two_servers_in_turn(front, what);
    // v2ray's Mux.Cool: a TCP session per flow, several at once, and a
    // UDP session per destination.
    let outbound = v2ray_vmess(server, ID, "chacha20-poly1305", Transport::Tcp, &pki.ca);
    let (_v2ray, front) = v2ray_client(&peers[1], &dir, &v2ray_with_mux(&outbound, "vmess"));
    carries_v2ray_mux(
        front,
        &ours,
        "vmess",
        "v2ray with mux through our vmess inbound",
    );
}

/// v2ray with its Mux.Cool on, its body sealed with `security`, through
/// our vmess inbound over the transport `over` gives: [`carries_v2ray_mux`].
fn v2ray_mux_through_our_vmess_inbound(
    test: &str,
    over: fn(&Pki) -> Transport<'_>,
    security: &str,
) {
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let transport = over(&pki);
    let server = free_addr();
    let ours = serve(&dir, "vmess", server, &inbound_tables(transport, &[ID]), "");
    let outbound = v2ray_vmess(server, ID, security, transport, &pki.ca);
    let (_v2ray, front) = v2ray_client(&peers[0], &dir, &v2ray_with_mux(&outbound, "vmess"));
    let what = format!(
        "v2ray with mux through our vmess inbound over {} with {security}",
        transport.name()
    );
    carries_v2ray_mux(front, &ours, "vmess", &what);
}

#[test]
fn v2ray_with_mux_over_ws_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound() {
    v2ray_mux_through_our_vmess_inbound(
        "v2ray_with_mux_over_ws_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound",
        |_| Transport::Ws("/vmess-ws"),
        "aes-128-gcm",
    );
}

#[test]
fn v2ray_with_mux_over_ws_tls_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound() {
    v2ray_mux_through_our_vmess_inbound(
        "v2ray_with_mux_over_ws_tls_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound",
        |pki| Transport::WsTls("/vmess-ws", &pki.server),
        "chacha20-poly1305",
    );
}

#[test]
fn v2ray_with_mux_over_tls_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound() {
    v2ray_mux_through_our_vmess_inbound(
        "v2ray_with_mux_over_tls_has_its_tcp_and_udp_sessions_served_by_our_vmess_inbound",
        |pki| Transport::Tls(&pki.server),
        "chacha20-poly1305",
    );
}

#[test]
fn fifty_concurrent_v2ray_vmess_connections_are_all_served() {
    let test = "fifty_concurrent_v2ray_vmess_connections_are_all_served";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    const CONNECTIONS: usize = 50;
    let server = free_addr();
    let ours = serve(
        &dir,
        "vmess",
        server,
        &inbound_tables(Transport::Tcp, &[ID]),
        "",
    );
    let outbound = v2ray_vmess(server, ID, "aes-128-gcm", Transport::Tcp, &pki.ca);
    let (_v2ray, front) = v2ray_client(&peers[0], &dir, &outbound);
    let echo = tcp_echo();
    // Every connection opens at once and stays open until all have been
    // echoed, so the server holds fifty live auth ids in one window.
    let start = Arc::new(Barrier::new(CONNECTIONS));
    let done = Arc::new(Barrier::new(CONNECTIONS));
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let (start, done) = (start.clone(), done.clone());
            thread::spawn(move || {
                start.wait();
                // No panic before the second barrier, or the others would
                // wait for this thread forever.
                let served = socks5_connect(front, echo, None)
                    .map_err(|e| e.to_string())
                    .and_then(|stream| {
                        let kept = stream.try_clone().map_err(|e| e.to_string())?;
                        let payload = pattern(64 * 1024 + i);
                        catch_unwind(AssertUnwindSafe(|| check_echo(stream, &payload)))
                            .map(|()| kept)
                            .map_err(|_| "its echo failed".to_owned())
                    });
                done.wait();
                served.map(drop)
            })
        })
        .collect();
    let refused: Vec<String> = clients
        .into_iter()
        .enumerate()
        .filter_map(|(i, client)| match client.join() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("connection {i}: {e}")),
            Err(_) => Some(format!("connection {i}: its thread panicked")),
        })
        .collect();
    assert!(
        refused.is_empty(),
        "{} of {CONNECTIONS} concurrent vmess connections were not served: {refused:?}",
        refused.len()
    );
    let log = ours.log();
    assert!(
        !log.contains(HELD) && !log.contains("replay"),
        "our vmess inbound refused a concurrent client; log:\n{log}"
    );
}

#[test]
fn our_vmess_outbound_reaches_our_vmess_inbound_over_every_transport_and_security() {
    let test = "our_vmess_outbound_reaches_our_vmess_inbound_over_every_transport_and_security";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    let mut cases: Vec<(Transport, &str)> =
        ["aes-128-gcm", "chacha20-poly1305", "none", "zero", "auto"]
            .into_iter()
            .map(|security| (Transport::Tcp, security))
            .collect();
    for transport in [
        Transport::Tls(&pki.server),
        Transport::Ws("/vmess-ws"),
        Transport::WsTls("/vmess-ws", &pki.server),
        Transport::Grpc("VmessService"),
        Transport::GrpcTls("VmessService", &pki.server),
    ] {
        cases.push((transport, "aes-128-gcm"));
    }
    for (transport, security) in cases {
        ours_to_ours(
            &dir,
            "vmess",
            &inbound_tables(transport, &[ID]),
            &outbound_tables(transport, &pki.ca, ID, security),
            &format!(
                "our vmess outbound to our inbound over {} with {security}",
                transport.name()
            ),
        );
    }
}

#[test]
fn a_wrong_vmess_id_is_refused_and_every_listed_id_served() {
    let test = "a_wrong_vmess_id_is_refused_and_every_listed_id_served";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let server = free_addr();
    let ours = serve(
        &dir,
        "vmess",
        server,
        &inbound_tables(Transport::Tcp, &[ID, OTHER_ID]),
        SHORT_HANDSHAKE,
    );
    let client = |id| {
        let outbound = v2ray_vmess(server, id, "aes-128-gcm", Transport::Tcp, &pki.ca);
        v2ray_client(&peers[0], &dir, &outbound)
    };
    let (_wrong, wrong) = client(WRONG_ID);
    let (_first, first) = client(ID);
    let (_second, second) = client(OTHER_ID);

    for _ in 0..2 {
        carries_nothing(wrong, "v2ray with a wrong id");
        carries_tcp(first, "v2ray with the first id");
        carries_tcp(second, "v2ray with the second id");
    }
    ours.wait_for_log(HELD);
}

#[test]
fn a_reload_that_changes_only_the_ids_keeps_the_connections_of_the_ids_that_remain() {
    let test = "a_reload_that_changes_only_the_ids_keeps_the_connections_of_the_ids_that_remain";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let server = free_addr();
    let config = |ids: &[&str]| {
        server_config(
            "vmess",
            server,
            &inbound_tables(Transport::Tcp, ids),
            SHORT_HANDSHAKE,
        )
    };
    let ours = config(&[ID, OTHER_ID]).start(&dir);
    let client = |id| {
        let outbound = v2ray_vmess(server, id, "aes-128-gcm", Transport::Tcp, &pki.ca);
        v2ray_client(&peers[0], &dir, &outbound)
    };
    let (_staying, staying) = client(ID);
    let (_leaving, leaving) = client(OTHER_ID);
    let (_joining, joining) = client(THIRD_ID);
    let echo = tcp_echo();
    let kept = socks5_connect(staying, echo, None).unwrap();
    check_echo(kept.try_clone().unwrap(), b"before the reload");
    let mut removed = socks5_connect(leaving, echo, None).unwrap();
    check_echo(removed.try_clone().unwrap(), b"before the reload too");

    let applied = config(&[ID, THIRD_ID]).reload(&ours, &dir);
    assert!(
        applied.contains("users changed; kept, with its connections"),
        "a change of ids alone should keep the inbound; the reload said:\n{applied}"
    );
    check_echo(kept.try_clone().unwrap(), b"after the reload");
    ends(&mut removed, "a removed id's open connection");
    carries_tcp(joining, "v2ray with an id the reload added");
    carries_nothing(leaving, "v2ray with an id the reload removed");
    carries_tcp(staying, "v2ray with an id the reload kept");
    check_echo(kept, b"still open");
}

#[test]
fn a_wrong_vmess_id_gets_no_byte_and_is_held_until_the_handshake_deadline() {
    refused_and_held(
        "a_wrong_vmess_id_gets_no_byte_and_is_held_until_the_handshake_deadline",
        "vmess",
        &inbound_tables(Transport::Tcp, &[ID]),
        &outbound_tables(Transport::Tcp, Path::new("unused"), WRONG_ID, "aes-128-gcm"),
    );
}

#[test]
fn noise_and_truncated_handshakes_never_crash_our_vmess_inbound() {
    let test = "noise_and_truncated_handshakes_never_crash_our_vmess_inbound";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::Ws("/vmess-ws"),
        Transport::GrpcTls("VmessService", &pki.server),
    ] {
        survives_probes(
            &dir,
            "vmess",
            &inbound_tables(transport, &[ID]),
            &outbound_tables(transport, &pki.ca, ID, "aes-128-gcm"),
            false,
            &format!("our vmess inbound over {}", transport.name()),
        );
    }
}
