//! Trojan: our trojan outbound against the Debian `trojan` server
//! (trojan-gfw) over TLS, trusting the test CA, with `insecure = true`,
//! refusing an untrusted certificate and one for another name, and with a
//! wrong password; Trojan UDP through sing-box's trojan inbound and through
//! trojan-gfw. Certificates are made at test time (support/certs.rs).

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::certs::{Pair, Pki};
use crate::support::client::{check_echo, pattern, socks5_connect, Association};
use crate::support::etemenanki::{start_ours, Config};
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, free_port, tcp_echo, udp_echo, udp_named};
use crate::support::BULK;

const PASSWORD: &str = "trojan-interop-secret";

/// The name our outbound sends as SNI and checks the certificate against:
/// one the test CA's server certificate carries.
const SERVER_NAME: &str = "localhost";

/// trojan-gfw serving `listen` with `pair`, accepting `PASSWORD`; what it
/// does not authenticate goes to `fallback`, as a web server would be
/// behind it.
fn trojan_server(
    trojan: &Path,
    dir: &Path,
    listen: SocketAddr,
    pair: &Pair,
    fallback: SocketAddr,
) -> Process {
    let config = format!(
        r#"{{ "run_type": "server",
  "local_addr": "127.0.0.1", "local_port": {},
  "remote_addr": "127.0.0.1", "remote_port": {},
  "password": ["{PASSWORD}"],
  "log_level": 1,
  "ssl": {{ "cert": "{}", "key": "{}" }} }}
"#,
        listen.port(),
        fallback.port(),
        pair.cert.display(),
        pair.key.display()
    );
    let path = dir.join("trojan.json");
    std::fs::write(&path, config).expect("writing trojan.json");
    let mut command = Command::new(trojan);
    command.arg("-c").arg(&path);
    Process::spawn_listening("trojan", command, dir, listen)
}

/// sing-box with one trojan inbound on `listen` over TLS with `pair`,
/// accepting `PASSWORD`, and a direct outbound.
fn sing_box_server(sing_box: &Path, dir: &Path, listen: SocketAddr, pair: &Pair) -> Process {
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "trojan", "tag": "trojan-in",
    "listen": "127.0.0.1", "listen_port": {},
    "users": [{{ "name": "interop", "password": "{PASSWORD}" }}],
    "tls": {{ "enabled": true, "server_name": "{SERVER_NAME}",
      "certificate_path": "{}", "key_path": "{}" }} }}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        listen.port(),
        pair.cert.display(),
        pair.key.display()
    );
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    Process::spawn_listening("sing-box", command, dir, listen)
}

/// TLS trusting the test CA, checked for `SERVER_NAME`: the body of
/// `[outbound.stream.tls]`.
fn trusting(pki: &Pki) -> String {
    format!(
        "server_name = \"{SERVER_NAME}\"\nca_file = \"{}\"\n",
        pki.ca.display()
    )
}

/// The tables of a trojan outbound with `password`, `tls` the body of its
/// `[outbound.stream.tls]`.
fn tables(password: &str, tls: &str) -> String {
    format!(
        "[outbound.stream]\nnetwork = \"tls\"\n[outbound.stream.tls]\n{tls}\n\
         [outbound.settings]\npassword = \"{password}\"\n"
    )
}

/// Our runtime: a plain SOCKS inbound in front of a trojan outbound to
/// `server`.
fn ours(dir: &Path, server: SocketAddr, password: &str, tls: &str) -> (Process, SocketAddr) {
    let listen = free_addr();
    let process = Config::default()
        .socks_in(listen, None)
        .proxy_out("trojan", server, &tables(password, tls))
        .start(dir);
    (process, listen)
}

/// Our runtime with two trojan outbounds: flows to port `bad_port` go to
/// `bad` (a server and the tables to reach it with), every other flow to
/// `good`. Returns the process and its SOCKS inbound.
fn ours_split(
    dir: &Path,
    good: (SocketAddr, &str),
    bad: (SocketAddr, &str),
    bad_port: u16,
) -> (Process, SocketAddr) {
    let listen = free_addr();
    let mut config = format!(
        "[[inbound]]\ntag = \"socks-in\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n",
        listen.ip(),
        listen.port()
    );
    for (tag, (server, tables)) in [("good", good), ("bad", bad)] {
        config.push_str(&format!(
            "[[outbound]]\ntag = \"{tag}\"\nprotocol = \"trojan\"\nserver = \"{}\"\nport = {}\n{tables}\n",
            server.ip(),
            server.port()
        ));
    }
    config.push_str(&format!(
        "[route]\ndefault = \"good\"\n\n[[route.rule]]\noutbound = \"bad\"\nport = [{bad_port}]\n"
    ));
    (
        start_ours(dir, "etemenanki.toml", &config, &[listen]),
        listen,
    )
}

/// A short message and the bulk pattern (4 MiB each way), checked byte for
/// byte, through `socks` to a loopback echo server.
fn echo_through(socks: SocketAddr) {
    let echo = tcp_echo();
    check_echo(socks5_connect(socks, echo, None).unwrap(), b"hello, trojan");
    check_echo(socks5_connect(socks, echo, None).unwrap(), &pattern(BULK));
}

/// The dial was refused: a SOCKS reply other than success.
fn refused(connected: io::Result<TcpStream>, what: &str) {
    match connected {
        Err(e) if e.to_string().starts_with("socks reply ") => {}
        Err(e) => panic!("{what}: the dial should be refused with a socks reply, got {e}"),
        Ok(_) => panic!("{what}: the dial should be refused, got a stream"),
    }
}

/// The flow failed cleanly: the dial was refused, or the stream it opened
/// ends, with EOF or a reset, before the read timeout. A timeout would mean
/// a hang.
fn fails_cleanly(connected: io::Result<TcpStream>, what: &str) {
    let Ok(mut stream) = connected else {
        return refused(connected, what);
    };
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: the stream carried {n} bytes"),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{what}: the stream hung until the read timeout"
        ),
    }
}

/// One association, two peers: each packet names its own destination, and
/// each reply comes back from the peer that sent it.
fn udp_round_trips(socks: SocketAddr) {
    let echo = udp_echo(Ipv4Addr::LOCALHOST);
    let association = Association::open(socks).unwrap();
    for payload in [
        b"ping through trojan".to_vec(),
        pattern(1200),
        pattern(8000),
    ] {
        let reply = association.ask(echo, &payload);
        assert_eq!(reply, Some((echo, payload)));
    }
    let (alpha, beta) = (udp_named("alpha"), udp_named("beta"));
    for _ in 0..2 {
        assert_eq!(
            association.ask(alpha, b"who"),
            Some((alpha, b"alpha:who".to_vec()))
        );
        assert_eq!(
            association.ask(beta, b"who"),
            Some((beta, b"beta:who".to_vec()))
        );
    }
}

/// The peers every trojan-gfw test needs.
fn trojan_peers(test: &str) -> Option<(PathBuf, PathBuf)> {
    let trojan = peer(test, "trojan")?;
    let openssl = peer(test, "openssl")?;
    Some((trojan, openssl))
}

#[test]
fn trojan_outbound_trusts_trojan_gfw_through_a_custom_ca() {
    let test = "trojan_outbound_trusts_trojan_gfw_through_a_custom_ca";
    let Some((trojan, openssl)) = trojan_peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let server = free_addr();
    let trojan = trojan_server(&trojan, &dir, server, &pki.server, free_addr());
    let (ours, socks) = ours(&dir, server, PASSWORD, &trusting(&pki));

    echo_through(socks);
    trojan.wait_for_log(&format!("authenticated as {PASSWORD}"));
    ours.wait_for_log("via out@v1");
}

#[test]
fn trojan_outbound_reaches_a_self_signed_trojan_gfw_with_insecure_tls() {
    let test = "trojan_outbound_reaches_a_self_signed_trojan_gfw_with_insecure_tls";
    let Some((trojan, openssl)) = trojan_peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let server = free_addr();
    let _trojan = trojan_server(&trojan, &dir, server, &pki.untrusted, free_addr());
    let (_ours, socks) = ours(&dir, server, PASSWORD, "insecure = true\n");

    echo_through(socks);
}

#[test]
fn trojan_outbound_refuses_untrusted_and_misnamed_certificates_and_keeps_serving() {
    let test = "trojan_outbound_refuses_untrusted_and_misnamed_certificates_and_keeps_serving";
    let Some((trojan, openssl)) = trojan_peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let good = free_addr();
    let _good = trojan_server(&trojan, &dir, good, &pki.server, free_addr());
    let cases = [
        (
            &pki.untrusted,
            "certificate verify failed: self-signed certificate",
        ),
        (
            &pki.other_name,
            "certificate verify failed: hostname mismatch",
        ),
    ];
    for (pair, logged) in cases {
        let bad = free_addr();
        let bad_dir = dir.join(bad.port().to_string());
        std::fs::create_dir_all(&bad_dir).expect("a directory for the bad server");
        let _bad = trojan_server(&trojan, &bad_dir, bad, pair, free_addr());
        // Flows to one echo server go to the bad server, the rest to the
        // good one.
        let (refused_echo, served_echo) = (tcp_echo(), tcp_echo());
        let trusted = tables(PASSWORD, &trusting(&pki));
        let (ours, listen) = ours_split(
            &bad_dir,
            (good, &trusted),
            (bad, &trusted),
            refused_echo.port(),
        );
        refused(socks5_connect(listen, refused_echo, None), logged);
        ours.wait_for_log(logged);
        check_echo(
            socks5_connect(listen, served_echo, None).unwrap(),
            b"served after a refusal",
        );
    }
}

#[test]
fn trojan_outbound_with_a_wrong_password_fails_the_flow_cleanly() {
    let test = "trojan_outbound_with_a_wrong_password_fails_the_flow_cleanly";
    let Some((trojan, openssl)) = trojan_peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let server = free_addr();
    // trojan-gfw hands a request it cannot authenticate to its fallback:
    // here a port nothing listens on, so it closes the connection.
    let closed = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let trojan = trojan_server(&trojan, &dir, server, &pki.server, closed);
    let (refused_echo, served_echo) = (tcp_echo(), tcp_echo());
    let (_ours, socks) = ours_split(
        &dir,
        (server, &tables(PASSWORD, &trusting(&pki))),
        (server, &tables("not-the-password", &trusting(&pki))),
        refused_echo.port(),
    );

    for _ in 0..2 {
        fails_cleanly(
            socks5_connect(socks, refused_echo, None),
            "a wrong password",
        );
        check_echo(
            socks5_connect(socks, served_echo, None).unwrap(),
            b"served beside a wrong password",
        );
    }
    trojan.wait_for_log("possibly incorrect password");
}

#[test]
fn trojan_outbound_relays_udp_through_sing_box() {
    let test = "trojan_outbound_relays_udp_through_sing_box";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let Some(openssl) = peer(test, "openssl") else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let server = free_addr();
    let sing_box = sing_box_server(&sing_box, &dir, server, &pki.server);
    let (_ours, socks) = ours(&dir, server, PASSWORD, &trusting(&pki));

    udp_round_trips(socks);
    // The association names the placeholder; the packets their own peers.
    sing_box.wait_for_log("inbound packet connection to 0.0.0.0:0");
}

#[test]
fn trojan_outbound_relays_udp_through_trojan_gfw() {
    let test = "trojan_outbound_relays_udp_through_trojan_gfw";
    let Some((trojan, openssl)) = trojan_peers(test) else {
        return;
    };
    let dir = scratch_dir(test);
    let pki = Pki::make(&openssl, &dir);
    let server = free_addr();
    let _trojan = trojan_server(&trojan, &dir, server, &pki.server, free_addr());
    let (_ours, socks) = ours(&dir, server, PASSWORD, &trusting(&pki));

    udp_round_trips(socks);
}
