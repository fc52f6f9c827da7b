//! Our vless inbound against the clients users run: v2ray 4.34 over tcp
//! and ws+tls, sing-box over grpc+tls, TCP and UDP, and sing-box's UDP in
//! its default XUDP (Mux.Cool) over tcp, ws+tls and grpc+tls, and v2ray's
//! Mux.Cool (its TCP and UDP sessions) over tcp, ws+tls and tls; our own vless
//! outbound over every transport; several ids, a wrong one refused while
//! the right ones are served; the fallback serving a web page to curl;
//! and probes that must not crash it.

use std::net::SocketAddr;
use std::path::Path;

use crate::serve::{
    asks_two_servers_in_turn, carries_nothing, carries_tcp, carries_udp, carries_v2ray_mux,
    curl_page, fallback_echoes, never_panicked, ours_to_ours, own_dir, refused_and_held, serve,
    setup, sing_box_client, survives_probes, v2ray_client, v2ray_with_mux, Transport, HELD,
    LONG_HANDSHAKE, SHORT_HANDSHAKE, SMALL_UDP_MAX, UDP_MAX,
};
use crate::support::certs::Pki;
use crate::support::process::Process;
use crate::support::servers::{free_addr, http_origin, tcp_echo};

const ID: &str = "4c7a1f3e-8d2b-4e6f-9a1c-3b5d7e9f0a12";
const OTHER_ID: &str = "9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4";
const WRONG_ID: &str = "4c7a1f3e-8d2b-4e6f-9a1c-3b5d7e9f0a13";
/// [`ID`]'s 16 bytes, as a request carries them.
const ID_BYTES: [u8; 16] = [
    0x4c, 0x7a, 0x1f, 0x3e, 0x8d, 0x2b, 0x4e, 0x6f, 0x9a, 0x1c, 0x3b, 0x5d, 0x7e, 0x9f, 0x0a, 0x12,
];
const PAGE: &[u8] = b"<html><body>an ordinary web server</body></html>\n";

/// Our vless inbound's tables: `transport`, `ids`, a `fallback` when
/// given.
fn inbound_tables(transport: Transport, ids: &[&str], fallback: Option<SocketAddr>) -> String {
    let mut text = transport.inbound_tables();
    text.push_str("[inbound.settings]\n");
    match ids {
        [one] => text.push_str(&format!("id = \"{one}\"\n")),
        many => {
            let list: Vec<String> = many.iter().map(|id| format!("\"{id}\"")).collect();
            text.push_str(&format!("ids = [{}]\n", list.join(", ")));
        }
    }
    if let Some(fallback) = fallback {
        text.push_str(&format!("fallback = \"{fallback}\"\n"));
    }
    text
}

/// Our runtime with a vless inbound for [`ID`] over `transport`, in a
/// directory of its own under `dir`, and its address.
fn our_vless_inbound(dir: &Path, transport: Transport) -> (Process, SocketAddr) {
    let server = free_addr();
    let ours = serve(
        &own_dir(dir, "ours", server),
        "vless",
        server,
        &inbound_tables(transport, &[ID], None),
        "",
    );
    (ours, server)
}

/// Our vless outbound's tables over `transport` with `id`.
fn outbound_tables(transport: Transport, ca: &Path, id: &str) -> String {
    format!(
        "{}[outbound.settings]\nid = \"{id}\"\n",
        transport.outbound_tables(ca)
    )
}

/// v2ray's vless outbound to `server` with `id` over `transport`.
fn v2ray_vless(server: SocketAddr, id: &str, transport: Transport, ca: &Path) -> String {
    format!(
        r#"{{ "protocol": "vless",
    "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {},
      "users": [{{ "id": "{id}", "encryption": "none" }}] }}] }},
    "streamSettings": {{ {} }} }}"#,
        server.port(),
        transport.v2ray_stream(ca)
    )
}

/// sing-box's vless outbound to `server` with `id` over `transport`, its
/// UDP as `packet_encoding` says: `Some("")` plain VLESS packets to one
/// target, `None` (no key) its default, XUDP inside Xray's Mux.Cool.
fn sing_box_vless(
    server: SocketAddr,
    id: &str,
    transport: Transport,
    ca: &Path,
    packet_encoding: Option<&str>,
) -> String {
    let encoding = packet_encoding
        .map(|encoding| format!(r#", "packet_encoding": "{encoding}""#))
        .unwrap_or_default();
    format!(
        r#"{{ "type": "vless", "tag": "ours", "server": "127.0.0.1", "server_port": {},
    "uuid": "{id}"{encoding}{} }}"#,
        server.port(),
        transport.sing_box_keys(ca)
    )
}

#[test]
fn v2ray_vless_client_carries_tcp_and_udp_through_our_vless_inbound_over_tcp_and_ws_tls() {
    let test =
        "v2ray_vless_client_carries_tcp_and_udp_through_our_vless_inbound_over_tcp_and_ws_tls";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    for transport in [Transport::Tcp, Transport::WsTls("/vless-ws", &pki.server)] {
        let what = format!("v2ray through our vless inbound over {}", transport.name());
        let (ours, server) = our_vless_inbound(&dir, transport);
        let (_v2ray, front) = v2ray_client(
            &peers[0],
            &dir,
            &v2ray_vless(server, ID, transport, &pki.ca),
        );
        carries_tcp(front, &what);
        ours.wait_for_log("via out@v1");
        carries_udp(front, &what, SMALL_UDP_MAX);
    }
}

#[test]
fn sing_box_vless_client_carries_tcp_and_udp_through_our_vless_inbound_over_grpc_tls() {
    let test = "sing_box_vless_client_carries_tcp_and_udp_through_our_vless_inbound_over_grpc_tls";
    let Some((peers, dir, pki)) = setup(test, &["sing-box"]) else {
        return;
    };
    let transport = Transport::GrpcTls("VlessService", &pki.server);
    let server = free_addr();
    let ours = serve(
        &dir,
        "vless",
        server,
        &inbound_tables(transport, &[ID], None),
        "",
    );
    let (_sing_box, front) = sing_box_client(
        &peers[0],
        &dir,
        &sing_box_vless(server, ID, transport, &pki.ca, Some("")),
    );
    carries_tcp(front, "sing-box through our vless inbound over grpc+tls");
    ours.wait_for_log("via out@v1");
    carries_udp(
        front,
        "sing-box through our vless inbound over grpc+tls",
        UDP_MAX,
    );
}

#[test]
fn sing_box_vless_client_with_its_default_xudp_carries_udp_through_our_vless_inbound() {
    let test = "sing_box_vless_client_with_its_default_xudp_carries_udp_through_our_vless_inbound";
    let Some((peers, dir, pki)) = setup(test, &["sing-box"]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::WsTls("/vless-ws", &pki.server),
        Transport::GrpcTls("VlessService", &pki.server),
    ] {
        let what = format!(
            "sing-box's xudp through our vless inbound over {}",
            transport.name()
        );
        let (ours, server) = our_vless_inbound(&dir, transport);
        let (_sing_box, front) = sing_box_client(
            &peers[0],
            &dir,
            &sing_box_vless(server, ID, transport, &pki.ca, None),
        );
        carries_tcp(front, &what);
        ours.wait_for_log("via out@v1");
        carries_udp(front, &what, UDP_MAX);
        ours.wait_for_log("vless: a mux.cool stream from");
        asks_two_servers_in_turn(front, &what);
        never_panicked(&ours);
    }
}

/// v2ray with its Mux.Cool on through our vless inbound over the
/// transport `over` gives: [`carries_v2ray_mux`].
fn v2ray_mux_through_our_vless_inbound(test: &str, over: fn(&Pki) -> Transport<'_>) {
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let transport = over(&pki);
    let (ours, server) = our_vless_inbound(&dir, transport);
    let outbound = v2ray_with_mux(&v2ray_vless(server, ID, transport, &pki.ca), "vless");
    let (_v2ray, front) = v2ray_client(&peers[0], &dir, &outbound);
    let what = format!(
        "v2ray with mux through our vless inbound over {}",
        transport.name()
    );
    carries_v2ray_mux(front, &ours, "vless", &what);
}

#[test]
fn v2ray_with_mux_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound() {
    v2ray_mux_through_our_vless_inbound(
        "v2ray_with_mux_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound",
        |_| Transport::Tcp,
    );
}

#[test]
fn v2ray_with_mux_over_ws_tls_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound() {
    v2ray_mux_through_our_vless_inbound(
        "v2ray_with_mux_over_ws_tls_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound",
        |pki| Transport::WsTls("/vless-ws", &pki.server),
    );
}

#[test]
fn v2ray_with_mux_over_tls_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound() {
    v2ray_mux_through_our_vless_inbound(
        "v2ray_with_mux_over_tls_has_its_tcp_and_udp_sessions_served_by_our_vless_inbound",
        |pki| Transport::Tls(&pki.server),
    );
}

#[test]
fn our_vless_outbound_reaches_our_vless_inbound_over_every_transport() {
    let test = "our_vless_outbound_reaches_our_vless_inbound_over_every_transport";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::Tls(&pki.server),
        Transport::Ws("/vless-ws"),
        Transport::WsTls("/vless-ws", &pki.server),
        Transport::Grpc("VlessService"),
        Transport::GrpcTls("VlessService", &pki.server),
    ] {
        ours_to_ours(
            &dir,
            "vless",
            &inbound_tables(transport, &[ID], None),
            &outbound_tables(transport, &pki.ca, ID),
            &format!(
                "our vless outbound to our inbound over {}",
                transport.name()
            ),
        );
    }
}

#[test]
fn a_wrong_vless_id_is_refused_and_every_listed_id_served() {
    let test = "a_wrong_vless_id_is_refused_and_every_listed_id_served";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let server = free_addr();
    let ours = serve(
        &dir,
        "vless",
        server,
        &inbound_tables(Transport::Tcp, &[ID, OTHER_ID], None),
        SHORT_HANDSHAKE,
    );
    let client = |id| {
        v2ray_client(
            &peers[0],
            &dir,
            &v2ray_vless(server, id, Transport::Tcp, &pki.ca),
        )
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
fn vless_fallback_serves_the_web_page_to_curl_over_tcp_and_tls() {
    let test = "vless_fallback_serves_the_web_page_to_curl_over_tcp_and_tls";
    let Some((peers, dir, pki)) = setup(test, &["curl", "v2ray"]) else {
        return;
    };
    let web = http_origin(PAGE);
    for transport in [Transport::Tcp, Transport::Tls(&pki.server)] {
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "vless",
            server,
            &inbound_tables(transport, &[ID], Some(web)),
            "",
        );
        let scheme = match transport {
            Transport::Tcp => "http",
            _ => "https",
        };
        assert_eq!(
            curl_page(&peers[0], &pki.ca, scheme, server),
            PAGE,
            "curl over {} got another page",
            transport.name()
        );
        ours.wait_for_log(&format!("relayed to the fallback {web}"));
        // The right id is still proxied.
        let (_v2ray, front) = v2ray_client(
            &peers[1],
            &dir,
            &v2ray_vless(server, ID, transport, &pki.ca),
        );
        carries_tcp(front, "v2ray beside the vless fallback");
    }
}

#[test]
fn with_a_fallback_a_first_read_short_of_a_vless_header_reaches_it_at_once() {
    let test = "with_a_fallback_a_first_read_short_of_a_vless_header_reaches_it_at_once";
    let Some((_, dir, _)) = setup(test, &[]) else {
        return;
    };
    let server = free_addr();
    let ours = serve(
        &dir,
        "vless",
        server,
        &inbound_tables(Transport::Tcp, &[ID], Some(tcp_echo())),
        LONG_HANDSHAKE,
    );
    let version_and_id = [&[0][..], &ID_BYTES].concat();
    for (probe, what) in [
        (&[0][..], "a lone version byte"),
        (&version_and_id[..9], "the version and half the id"),
        (&version_and_id, "the version and the whole id"),
    ] {
        fallback_echoes(server, probe, what);
    }
    ours.wait_for_log("the first read holds no version, id and addons length");
}

#[test]
fn with_a_fallback_a_vless_header_not_whole_at_the_deadline_goes_to_it_with_what_it_sent() {
    let test =
        "with_a_fallback_a_vless_header_not_whole_at_the_deadline_goes_to_it_with_what_it_sent";
    let Some((_, dir, _)) = setup(test, &[]) else {
        return;
    };
    let echo = tcp_echo();
    let server = free_addr();
    let ours = serve(
        &dir,
        "vless",
        server,
        &inbound_tables(Transport::Tcp, &[ID], Some(echo)),
        SHORT_HANDSHAKE,
    );
    // Version, the right id, no addons, TCP, then nothing: after the 3 s
    // limit it goes to the fallback, never closed by us.
    let probe = [&[0][..], &ID_BYTES, &[0, 1]].concat();
    fallback_echoes(server, &probe, "a header cut after its command");
    ours.wait_for_log(&format!(
        "the request was not whole at the handshake deadline; relayed to the fallback {echo}"
    ));
}

#[test]
fn a_wrong_vless_id_gets_no_byte_and_is_held_until_the_handshake_deadline() {
    refused_and_held(
        "a_wrong_vless_id_gets_no_byte_and_is_held_until_the_handshake_deadline",
        "vless",
        &inbound_tables(Transport::Tcp, &[ID], None),
        &outbound_tables(Transport::Tcp, Path::new("unused"), WRONG_ID),
    );
}

#[test]
fn noise_and_truncated_handshakes_never_crash_our_vless_inbound() {
    let test = "noise_and_truncated_handshakes_never_crash_our_vless_inbound";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::WsTls("/vless-ws", &pki.server),
        Transport::Grpc("VlessService"),
    ] {
        survives_probes(
            &dir,
            "vless",
            &inbound_tables(transport, &[ID], None),
            &outbound_tables(transport, &pki.ca, ID),
            false,
            &format!("our vless inbound over {}", transport.name()),
        );
    }
}

#[test]
fn a_v2ray_ws_client_naming_our_host_is_served_and_one_naming_another_is_refused() {
    let test = "a_v2ray_ws_client_naming_our_host_is_served_and_one_naming_another_is_refused";
    let Some((peers, dir, pki)) = setup(test, &["v2ray"]) else {
        return;
    };
    let transport = Transport::WsTls("/vless-ws", &pki.server);
    let inbound = inbound_tables(transport, &[ID], None).replace(
        "path = \"/vless-ws\"\n",
        "path = \"/vless-ws\"\nhost = \"proxy.example\"\n",
    );
    let server = free_addr();
    let ours = serve(&dir, "vless", server, &inbound, "");
    // v2ray sends the Host of its headers as given: the case and the port
    // are not compared.
    let client = |host: &str| {
        let outbound = v2ray_vless(server, ID, transport, &pki.ca).replace(
            r#""path": "/vless-ws" }"#,
            &format!(r#""path": "/vless-ws", "headers": {{ "Host": "{host}" }} }}"#),
        );
        v2ray_client(&peers[0], &dir, &outbound)
    };
    let (_right, right) = client("Proxy.Example:8443");
    let (_wrong, wrong) = client("prober.example");
    carries_tcp(right, "v2ray naming our ws host");
    ours.wait_for_log("via out@v1");
    carries_nothing(wrong, "v2ray naming another ws host");
    ours.wait_for_log("ended: websocket: no upgrade for Host \"prober.example\"");
    carries_tcp(right, "v2ray naming our ws host after the refusal");
}
