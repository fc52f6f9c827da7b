//! Our trojan inbound against the clients users run: the Debian `trojan`
//! client (trojan-gfw, `run_type client`) and sing-box over TLS, TCP and
//! UDP; our own trojan outbound over every transport; several passwords,
//! a wrong one refused while the right ones are served; the fallback
//! serving a web page to a wrong password and to curl; and probes that
//! must not crash it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;

use crate::serve::{
    carries_nothing, carries_tcp, carries_udp, curl_page, fallback_echoes, ours_to_ours, own_dir,
    refused_and_held, serve, setup, sing_box_client, survives_probes, Transport, HELD,
    LONG_HANDSHAKE, SERVER_NAME, SHORT_HANDSHAKE, UDP_MAX,
};
use crate::support::client::socks5_connect;
use crate::support::process::Process;
use crate::support::servers::{free_addr, http_origin, tcp_echo};
use crate::support::WAIT;

const PASSWORD: &str = "trojan-serve-secret";
const OTHER_PASSWORD: &str = "trojan-serve-second-user";
const WRONG_PASSWORD: &str = "not-a-trojan-password";
/// The hex SHA-224 of [`PASSWORD`], what a trojan request starts with.
const PASSWORD_HASH: &str = "f4cd6d7ebefbf4cd3d7cf8fab055b1cd7412c1f94a7e265dfa1bd04e";
const PAGE: &[u8] = b"<html><body>nothing to see here</body></html>\n";

/// Our trojan inbound's tables: `transport`, `passwords` (one is
/// `password`, more `passwords`), and a `fallback` when given.
fn inbound_tables(
    transport: Transport,
    passwords: &[&str],
    fallback: Option<SocketAddr>,
) -> String {
    let mut text = transport.inbound_tables();
    text.push_str("[inbound.settings]\n");
    match passwords {
        [one] => text.push_str(&format!("password = \"{one}\"\n")),
        many => {
            let list: Vec<String> = many.iter().map(|p| format!("\"{p}\"")).collect();
            text.push_str(&format!("passwords = [{}]\n", list.join(", ")));
        }
    }
    if let Some(fallback) = fallback {
        text.push_str(&format!("fallback = \"{fallback}\"\n"));
    }
    text
}

/// Our trojan outbound's tables over `transport` with `password`.
fn outbound_tables(transport: Transport, ca: &Path, password: &str) -> String {
    format!(
        "{}[outbound.settings]\npassword = \"{password}\"\n",
        transport.outbound_tables(ca)
    )
}

/// trojan-gfw as the client of `server` with `password`, trusting `ca` for
/// [`SERVER_NAME`]; returns it and its SOCKS5 front (TCP and UDP).
fn trojan_client(
    trojan: &Path,
    dir: &Path,
    server: SocketAddr,
    password: &str,
    ca: &Path,
) -> (Process, SocketAddr) {
    let front = free_addr();
    let dir = own_dir(dir, "trojan", front);
    let config = format!(
        r#"{{ "run_type": "client",
  "local_addr": "127.0.0.1", "local_port": {},
  "remote_addr": "127.0.0.1", "remote_port": {},
  "password": ["{password}"],
  "log_level": 1,
  "ssl": {{ "verify": true, "verify_hostname": true, "cert": "{}", "sni": "{SERVER_NAME}" }} }}
"#,
        front.port(),
        server.port(),
        ca.display()
    );
    let path = dir.join("trojan.json");
    std::fs::write(&path, config).expect("writing trojan.json");
    let mut command = Command::new(trojan);
    command.arg("-c").arg(&path);
    (
        Process::spawn_listening("trojan", command, &dir, front),
        front,
    )
}

/// sing-box's trojan outbound to `server` with `password` over
/// `transport`, trusting `ca`.
fn sing_box_trojan(server: SocketAddr, password: &str, transport: Transport, ca: &Path) -> String {
    format!(
        r#"{{ "type": "trojan", "tag": "ours", "server": "127.0.0.1", "server_port": {},
    "password": "{password}"{} }}"#,
        server.port(),
        transport.sing_box_keys(ca)
    )
}

#[test]
fn trojan_gfw_client_carries_tcp_and_udp_through_our_trojan_tls_inbound() {
    let test = "trojan_gfw_client_carries_tcp_and_udp_through_our_trojan_tls_inbound";
    let Some((peers, dir, pki)) = setup(test, &["trojan"]) else {
        return;
    };
    let server = free_addr();
    let tls = Transport::Tls(&pki.server);
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(tls, &[PASSWORD], None),
        "",
    );
    let (_trojan, front) = trojan_client(&peers[0], &dir, server, PASSWORD, &pki.ca);

    carries_tcp(front, "trojan-gfw through our trojan inbound");
    ours.wait_for_log("via out@v1");
    carries_udp(front, "trojan-gfw through our trojan inbound", UDP_MAX);
}

#[test]
fn sing_box_trojan_client_carries_tcp_and_udp_through_our_trojan_tls_inbound() {
    let test = "sing_box_trojan_client_carries_tcp_and_udp_through_our_trojan_tls_inbound";
    let Some((peers, dir, pki)) = setup(test, &["sing-box"]) else {
        return;
    };
    let server = free_addr();
    let tls = Transport::Tls(&pki.server);
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(tls, &[PASSWORD], None),
        "",
    );
    let (_sing_box, front) = sing_box_client(
        &peers[0],
        &dir,
        &sing_box_trojan(server, PASSWORD, tls, &pki.ca),
    );

    carries_tcp(front, "sing-box through our trojan inbound");
    ours.wait_for_log("via out@v1");
    carries_udp(front, "sing-box through our trojan inbound", UDP_MAX);
}

#[test]
fn sing_box_trojan_client_reaches_our_trojan_inbound_over_ws_and_grpc_under_tls() {
    let test = "sing_box_trojan_client_reaches_our_trojan_inbound_over_ws_and_grpc_under_tls";
    let Some((peers, dir, pki)) = setup(test, &["sing-box"]) else {
        return;
    };
    for transport in [
        Transport::WsTls("/trojan-ws", &pki.server),
        Transport::GrpcTls("TrojanService", &pki.server),
    ] {
        let what = format!(
            "sing-box through our trojan inbound over {}",
            transport.name()
        );
        let server = free_addr();
        let _ours = serve(
            &own_dir(&dir, "ours", server),
            "trojan",
            server,
            &inbound_tables(transport, &[PASSWORD], None),
            "",
        );
        let (_sing_box, front) = sing_box_client(
            &peers[0],
            &dir,
            &sing_box_trojan(server, PASSWORD, transport, &pki.ca),
        );
        carries_tcp(front, &what);
        carries_udp(front, &what, UDP_MAX);
    }
}

#[test]
fn our_trojan_outbound_reaches_our_trojan_inbound_over_every_transport() {
    let test = "our_trojan_outbound_reaches_our_trojan_inbound_over_every_transport";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::Tls(&pki.server),
        Transport::Ws("/trojan-ws"),
        Transport::WsTls("/trojan-ws", &pki.server),
        Transport::Grpc("TrojanService"),
        Transport::GrpcTls("TrojanService", &pki.server),
    ] {
        ours_to_ours(
            &dir,
            "trojan",
            &inbound_tables(transport, &[PASSWORD], None),
            &outbound_tables(transport, &pki.ca, PASSWORD),
            &format!(
                "our trojan outbound to our inbound over {}",
                transport.name()
            ),
        );
    }
}

#[test]
fn a_wrong_trojan_password_is_refused_and_every_listed_password_served() {
    let test = "a_wrong_trojan_password_is_refused_and_every_listed_password_served";
    let Some((peers, dir, pki)) = setup(test, &["trojan", "sing-box"]) else {
        return;
    };
    let server = free_addr();
    let tls = Transport::Tls(&pki.server);
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(tls, &[PASSWORD, OTHER_PASSWORD], None),
        SHORT_HANDSHAKE,
    );
    let (_wrong_gfw, wrong_gfw) = trojan_client(&peers[0], &dir, server, WRONG_PASSWORD, &pki.ca);
    let (_wrong_sing, wrong_sing) = sing_box_client(
        &peers[1],
        &dir,
        &sing_box_trojan(server, WRONG_PASSWORD, tls, &pki.ca),
    );
    let (_first, first) = trojan_client(&peers[0], &dir, server, PASSWORD, &pki.ca);
    let (_second, second) = sing_box_client(
        &peers[1],
        &dir,
        &sing_box_trojan(server, OTHER_PASSWORD, tls, &pki.ca),
    );

    for _ in 0..2 {
        carries_nothing(wrong_gfw, "trojan-gfw with a wrong password");
        carries_tcp(first, "trojan-gfw with the first password");
        carries_nothing(wrong_sing, "sing-box with a wrong password");
        carries_tcp(second, "sing-box with the second password");
    }
    ours.wait_for_log(HELD);
}

#[test]
fn trojan_fallback_serves_the_web_page_to_a_wrong_password_and_to_curl() {
    let test = "trojan_fallback_serves_the_web_page_to_a_wrong_password_and_to_curl";
    let Some((peers, dir, pki)) = setup(test, &["trojan", "curl"]) else {
        return;
    };
    let web = http_origin(PAGE);
    let server = free_addr();
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(Transport::Tls(&pki.server), &[PASSWORD], Some(web)),
        "",
    );

    // A prober speaking HTTPS gets the web server's page.
    assert_eq!(
        curl_page(&peers[1], &pki.ca, "https", server),
        PAGE,
        "curl got another page"
    );

    // A trojan client with a wrong password: its request and what follows
    // go to the web server, whose answer comes back through the client.
    let (_wrong, wrong) = trojan_client(&peers[0], &dir, server, WRONG_PASSWORD, &pki.ca);
    let mut stream = socks5_connect(wrong, tcp_echo(), None).unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with(std::str::from_utf8(PAGE).unwrap()),
        "a wrong password should get the fallback's page, got {got:?}"
    );
    ours.wait_for_log(&format!("relayed to the fallback {web}"));

    // The right password is still proxied, not sent to the web server.
    let (_right, right) = trojan_client(&peers[0], &dir, server, PASSWORD, &pki.ca);
    carries_tcp(right, "trojan-gfw beside the fallback");
}

#[test]
fn with_a_fallback_a_first_read_short_of_a_trojan_request_reaches_it_at_once() {
    let test = "with_a_fallback_a_first_read_short_of_a_trojan_request_reaches_it_at_once";
    let Some((_, dir, _)) = setup(test, &[]) else {
        return;
    };
    let server = free_addr();
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(Transport::Tcp, &[PASSWORD], Some(tcp_echo())),
        LONG_HANDSHAKE,
    );
    let hash = PASSWORD_HASH.as_bytes();
    let no_crlf = [hash, b"\r"].concat();
    for (probe, what) in [
        (&b"a"[..], "a lone hex digit"),
        (hash, "the whole hash without its CRLF"),
        (&no_crlf, "the hash and a CR"),
    ] {
        fallback_echoes(server, probe, what);
    }
    ours.wait_for_log("the first read holds no password hash and CRLF");
}

#[test]
fn with_a_fallback_a_trojan_request_not_whole_at_the_deadline_goes_to_it_with_what_it_sent() {
    let test =
        "with_a_fallback_a_trojan_request_not_whole_at_the_deadline_goes_to_it_with_what_it_sent";
    let Some((_, dir, _)) = setup(test, &[]) else {
        return;
    };
    let echo = tcp_echo();
    let server = free_addr();
    let ours = serve(
        &dir,
        "trojan",
        server,
        &inbound_tables(Transport::Tcp, &[PASSWORD], Some(echo)),
        SHORT_HANDSHAKE,
    );
    // The right hash, its CRLF and a CONNECT, then nothing: after the 3 s
    // limit it goes to the fallback, never closed by us.
    let probe = [PASSWORD_HASH.as_bytes(), b"\r\n\x01"].concat();
    fallback_echoes(server, &probe, "a request cut after its command");
    ours.wait_for_log(&format!(
        "the request was not whole at the handshake deadline; relayed to the fallback {echo}"
    ));
}

#[test]
fn a_silent_client_is_closed_at_the_handshake_deadline_of_each_layer() {
    let test = "a_silent_client_is_closed_at_the_handshake_deadline_of_each_layer";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for (transport, logged) in [
        (Transport::Tcp, "inbound handshake timed out after 3s"),
        (Transport::Tls(&pki.server), "tls handshake timed out"),
        (Transport::Ws("/trojan-ws"), "websocket handshake timed out"),
        (Transport::Grpc("TrojanService"), "grpc handshake timed out"),
    ] {
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "trojan",
            server,
            &inbound_tables(transport, &[PASSWORD], None),
            SHORT_HANDSHAKE,
        );
        // Connected, and not a byte sent: the limit is 3 s. An HTTP/2
        // server speaks first (its SETTINGS frame); no other layer does.
        let mut silent = TcpStream::connect_timeout(&server, WAIT).unwrap();
        silent.set_read_timeout(Some(WAIT)).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match silent.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
                Ok(n) if got.len() + n <= buf.len() => got.extend_from_slice(&buf[..n]),
                Ok(n) => panic!(
                    "{}: a silent client was sent {n} bytes more",
                    transport.name()
                ),
                Err(e) => panic!(
                    "{}: a silent client was still connected {WAIT:?} after a 3 s limit ({e})",
                    transport.name()
                ),
            }
        }
        match transport {
            // A frame header: 3 bytes of length, then type 4, SETTINGS.
            Transport::Grpc(_) => assert!(
                got.get(3) == Some(&4),
                "grpc: the server's first frame should be SETTINGS, got {got:?}"
            ),
            _ => assert!(
                got.is_empty(),
                "{}: a silent client was sent {got:?}",
                transport.name()
            ),
        }
        ours.wait_for_log(logged);
    }
}

#[test]
fn a_wrong_trojan_password_gets_no_byte_and_is_held_until_the_handshake_deadline() {
    refused_and_held(
        "a_wrong_trojan_password_gets_no_byte_and_is_held_until_the_handshake_deadline",
        "trojan",
        &inbound_tables(Transport::Tcp, &[PASSWORD], None),
        &outbound_tables(Transport::Tcp, Path::new("unused"), WRONG_PASSWORD),
    );
}

#[test]
fn noise_and_truncated_handshakes_never_crash_our_trojan_inbound() {
    let test = "noise_and_truncated_handshakes_never_crash_our_trojan_inbound";
    let Some((_, dir, pki)) = setup(test, &[]) else {
        return;
    };
    for transport in [
        Transport::Tcp,
        Transport::Tls(&pki.server),
        Transport::Ws("/trojan-ws"),
        Transport::GrpcTls("TrojanService", &pki.server),
    ] {
        survives_probes(
            &dir,
            "trojan",
            &inbound_tables(transport, &[PASSWORD], None),
            &outbound_tables(transport, &pki.ca, PASSWORD),
            false,
            &format!("our trojan inbound over {}", transport.name()),
        );
    }
}
