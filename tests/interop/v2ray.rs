//! v2ray 4.x: as a client of our SOCKS and HTTP inbounds (its socks and
//! http outbounds, with and without accounts, TCP and UDP, and curl
//! through the chain), and as the server our SOCKS and HTTP outbounds use.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::client::{check_echo, pattern, socks5_connect, Association, Login};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, http_origin, tcp_echo, udp_echo};
use crate::support::BULK;

const LOGIN: Login = Login {
    user: "bob",
    pass: "v2-pass",
};

/// The JSON of an account list, empty without `login`.
fn accounts(key: &str, login: Option<Login>) -> String {
    match login {
        Some(login) => format!(
            r#""{key}": [{{ "user": "{}", "pass": "{}" }}]"#,
            login.user, login.pass
        ),
        None => format!(r#""{key}": []"#),
    }
}

/// v2ray's socks inbound on `listen`, for the test's client: no
/// authentication, UDP on.
fn socks_inbound(listen: SocketAddr) -> String {
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {}, "protocol": "socks",
  "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }} }}"#,
        listen.port()
    )
}

/// v2ray's `socks` or `http` outbound to `server`.
fn outbound(protocol: &str, server: SocketAddr, login: Option<Login>) -> String {
    format!(
        r#"{{ "protocol": "{protocol}", "settings": {{ "servers": [{{
  "address": "{}", "port": {}, {} }}] }} }}"#,
        server.ip(),
        server.port(),
        accounts("users", login)
    )
}

/// Starts v2ray with one inbound and one outbound, waiting until `listen`
/// accepts connections.
fn start(v2ray: &Path, dir: &Path, listen: SocketAddr, inbound: &str, outbound: &str) -> Process {
    let config = format!(
        r#"{{ "log": {{ "loglevel": "warning" }},
  "inbounds": [{inbound}],
  "outbounds": [{outbound}] }}
"#
    );
    let path = dir.join("v2ray.json");
    std::fs::write(&path, config).expect("writing v2ray.json");
    let mut command = Command::new(v2ray);
    command.arg("-config").arg(&path);
    Process::spawn_listening("v2ray", command, dir, listen)
}

/// v2ray's socks inbound in front of its `protocol` outbound to `ours`.
fn client_chain(
    v2ray: &Path,
    dir: &Path,
    protocol: &str,
    ours: SocketAddr,
    login: Option<Login>,
) -> (Process, SocketAddr) {
    let front = free_addr();
    let process = start(
        v2ray,
        dir,
        front,
        &socks_inbound(front),
        &outbound(protocol, ours, login),
    );
    (process, front)
}

#[test]
fn v2ray_socks_outbound_reaches_our_socks_inbound() {
    let test = "v2ray_socks_outbound_reaches_our_socks_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let ours = free_addr();
    let _ours = Config::default().socks_in(ours, None).freedom().start(&dir);
    let (_v2ray, front) = client_chain(&v2ray, &dir, "socks", ours, None);

    check_echo(socks5_connect(front, echo, None).unwrap(), b"hello, v2ray");
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn v2ray_socks_outbound_authenticates_to_our_socks_inbound() {
    let test = "v2ray_socks_outbound_authenticates_to_our_socks_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, Some(LOGIN))
        .freedom()
        .start(&dir);
    let (_v2ray, front) = client_chain(&v2ray, &dir, "socks", ours, Some(LOGIN));

    check_echo(socks5_connect(front, echo, None).unwrap(), b"hello, bob");
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn v2ray_socks_outbound_relays_udp_through_our_socks_inbound() {
    let test = "v2ray_socks_outbound_relays_udp_through_our_socks_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    // v2ray's socks client names the datagram's destination in its UDP
    // ASSOCIATE request, where RFC 1928 wants the client's own source.
    // With the echo server on the client's IP (127.0.0.1) that would look
    // like "my source is 127.0.0.1:<echo port>", and our inbound, which
    // pins a port the request names on the control connection's own IP,
    // would pin that port and drop v2ray's real datagrams;
    // so the echo server sits on another loopback address, as any real
    // destination does.
    let echo = udp_echo(Ipv4Addr::new(127, 0, 0, 2));
    let ours = free_addr();
    let _ours = Config::default().socks_in(ours, None).freedom().start(&dir);
    let (_v2ray, front) = client_chain(&v2ray, &dir, "socks", ours, None);

    let association = Association::open(front).unwrap();
    for payload in [b"ping through v2ray".to_vec(), pattern(1200)] {
        let reply = association.ask(echo, &payload);
        assert_eq!(reply, Some((echo, payload)));
    }
}

#[test]
fn v2ray_http_outbound_authenticates_to_our_http_inbound() {
    let test = "v2ray_http_outbound_authenticates_to_our_http_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let ours = free_addr();
    let _ours = Config::default()
        .http_in(ours, Some(LOGIN))
        .freedom()
        .start(&dir);
    let (_v2ray, front) = client_chain(&v2ray, &dir, "http", ours, Some(LOGIN));

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello over http",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn curl_fetches_through_v2ray_and_our_socks_inbound() {
    let test = "curl_fetches_through_v2ray_and_our_socks_inbound";
    let (Some(v2ray), Some(curl)) = (peer(test, "v2ray"), peer(test, "curl")) else {
        return;
    };
    let dir = scratch_dir(test);
    let origin = http_origin(b"served to curl through v2ray and etemenanki\n");
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, Some(LOGIN))
        .freedom()
        .start(&dir);
    let (_v2ray, front) = client_chain(&v2ray, &dir, "socks", ours, Some(LOGIN));

    let body = crate::curl::fetch(&curl, &["--socks5", &front.to_string()], origin);
    assert_eq!(body, b"served to curl through v2ray and etemenanki\n");
}

/// v2ray's `socks` or `http` inbound on `listen` with `login`, in front of
/// its freedom outbound.
fn server(v2ray: &Path, dir: &Path, protocol: &str, listen: SocketAddr, login: Login) -> Process {
    let settings = match protocol {
        "socks" => format!(
            r#""auth": "password", {}"#,
            accounts("accounts", Some(login))
        ),
        _ => accounts("accounts", Some(login)),
    };
    let inbound = format!(
        r#"{{ "listen": "127.0.0.1", "port": {}, "protocol": "{protocol}",
  "settings": {{ {settings} }} }}"#,
        listen.port()
    );
    start(
        v2ray,
        dir,
        listen,
        &inbound,
        r#"{ "protocol": "freedom", "settings": {} }"#,
    )
}

#[test]
fn socks_outbound_authenticates_to_v2ray() {
    let test = "socks_outbound_authenticates_to_v2ray";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _v2ray = server(&v2ray, &dir, "socks", upstream, LOGIN);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(upstream, Some(LOGIN))
        .start(&dir);

    check_echo(
        socks5_connect(ours, echo, None).unwrap(),
        b"hello, v2ray server",
    );
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn http_outbound_authenticates_to_v2ray() {
    let test = "http_outbound_authenticates_to_v2ray";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _v2ray = server(&v2ray, &dir, "http", upstream, LOGIN);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .http_out(upstream, Some(LOGIN))
        .start(&dir);

    check_echo(
        socks5_connect(ours, echo, None).unwrap(),
        b"hello, v2ray http",
    );
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}
