//! TLS against real peers, with certificates made by the `openssl` CLI at
//! test time (support/certs.rs): our socks and http outbounds over TLS to
//! v2ray's and sing-box's TLS inbounds; v2ray, sing-box and curl as clients
//! of our SOCKS-over-TLS and HTTPS-proxy inbounds; and servers whose
//! certificate is untrusted or names another host, refused as a failed dial
//! that the runtime explains in its log while it keeps serving.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, ExitStatus};

use crate::support::binaries::peer;
use crate::support::certs::{Pair, Pki};
use crate::support::client::{check_echo, http_connect, pattern, socks5_connect, Association};
use crate::support::etemenanki::start_ours;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, http_origin, tcp_echo, udp_echo};
use crate::support::BULK;

/// A path as a TOML or JSON string (the scratch directory's paths need no
/// escaping).
fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    assert!(
        !text.contains(['"', '\\']),
        "a path that needs escaping: {text}"
    );
    format!("\"{text}\"")
}

/// A plain `socks` (or `http`) inbound of ours, for the test's client.
fn plain_inbound(tag: &str, protocol: &str, listen: SocketAddr) -> String {
    format!(
        "[[inbound]]\ntag = \"{tag}\"\nprotocol = \"{protocol}\"\nlisten = \"{}\"\nport = {}\n\n",
        listen.ip(),
        listen.port()
    )
}

/// Our `socks` or `http` outbound `tag` to `server` over TLS, trusting the
/// test CA in addition to the system roots; the SNI and the name checked are
/// `server_name`, or by default the server's address.
fn tls_outbound(
    tag: &str,
    protocol: &str,
    server: SocketAddr,
    ca: &Path,
    server_name: Option<&str>,
) -> String {
    let mut text = format!(
        "[[outbound]]\ntag = \"{tag}\"\nprotocol = \"{protocol}\"\nserver = \"{}\"\nport = {}\n\n\
         [outbound.stream]\nnetwork = \"tls\"\n\n[outbound.stream.tls]\nca_file = {}\n",
        server.ip(),
        server.port(),
        quoted(ca)
    );
    if let Some(name) = server_name {
        text.push_str(&format!("server_name = \"{name}\"\n"));
    }
    text.push('\n');
    text
}

/// Starts v2ray with `inbounds` and `outbounds` (JSON objects), waiting
/// until every address in `listens` accepts connections.
fn start_v2ray(
    v2ray: &Path,
    dir: &Path,
    inbounds: &[String],
    outbounds: &[String],
    listens: &[SocketAddr],
) -> Process {
    let config = format!(
        "{{ \"log\": {{ \"loglevel\": \"info\" }},\n  \"inbounds\": [{}],\n  \"outbounds\": [{}] }}\n",
        inbounds.join(",\n"),
        outbounds.join(",\n")
    );
    let path = dir.join("v2ray.json");
    std::fs::write(&path, config).expect("writing v2ray.json");
    let mut command = Command::new(v2ray);
    command.arg("-config").arg(&path);
    let mut process = Process::spawn("v2ray", command, dir);
    for &addr in listens {
        process.wait_listening(addr);
    }
    process
}

/// A v2ray socks inbound on `listen` that serves TLS with `pair`
/// (`streamSettings.security = "tls"`), without authentication.
fn v2ray_tls_socks_inbound(listen: SocketAddr, pair: &Pair) -> String {
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {}, "protocol": "socks",
  "settings": {{ "auth": "noauth", "udp": false }},
  "streamSettings": {{ "network": "tcp", "security": "tls",
    "tlsSettings": {{ "certificates": [{{ "certificateFile": {}, "keyFile": {} }}] }} }} }}"#,
        listen.port(),
        quoted(&pair.cert),
        quoted(&pair.key)
    )
}

const V2RAY_FREEDOM: &str = r#"{ "protocol": "freedom", "settings": {} }"#;

/// Starts sing-box on `config` (JSON), waiting until every address in
/// `listens` accepts connections.
fn start_sing_box(sing_box: &Path, dir: &Path, config: &str, listens: &[SocketAddr]) -> Process {
    let path = dir.join("sing-box.json");
    std::fs::write(&path, config).expect("writing sing-box.json");
    let mut command = Command::new(sing_box);
    command.args(["run", "--disable-color", "-c"]).arg(&path);
    let mut process = Process::spawn("sing-box", command, dir);
    for &addr in listens {
        process.wait_listening(addr);
    }
    process
}

/// A sing-box `http` inbound `tag` on `listen` that serves TLS with `pair`.
fn sing_box_tls_http_inbound(tag: &str, listen: SocketAddr, pair: &Pair) -> String {
    format!(
        r#"{{ "type": "http", "tag": "{tag}", "listen": "127.0.0.1", "listen_port": {},
  "tls": {{ "enabled": true, "certificate_path": {}, "key_path": {} }} }}"#,
        listen.port(),
        quoted(&pair.cert),
        quoted(&pair.key)
    )
}

/// Our `socks` inbound on `listen` over TLS with `pair`: SOCKS over TLS.
fn socks_tls_inbound(listen: SocketAddr, pair: &Pair) -> String {
    format!(
        "[[inbound]]\ntag = \"socks-tls\"\nprotocol = \"socks\"\nlisten = \"{}\"\nport = {}\n\n\
         [inbound.stream]\nsecurity = \"tls\"\n\n\
         [inbound.stream.tls]\ncert_file = {}\nkey_file = {}\n\n",
        listen.ip(),
        listen.port(),
        quoted(&pair.cert),
        quoted(&pair.key)
    )
}

const DIRECT: &str = "[[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n\
                      [route]\ndefault = \"direct\"\n";

/// A plain v2ray socks inbound on `listen` for the test's client, relaying
/// UDP.
fn v2ray_plain_socks_inbound(listen: SocketAddr) -> String {
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {}, "protocol": "socks",
  "settings": {{ "auth": "noauth", "udp": true, "ip": "127.0.0.1" }} }}"#,
        listen.port()
    )
}

/// v2ray's socks client of `server` over TLS (streamSettings on the
/// outbound), trusting the test CA (`"usage": "verify"`) for the name
/// localhost.
fn v2ray_tls_socks_outbound(server: SocketAddr, ca: &Path) -> String {
    format!(
        r#"{{ "protocol": "socks",
  "settings": {{ "servers": [{{ "address": "127.0.0.1", "port": {}, "users": [] }}] }},
  "streamSettings": {{ "network": "tcp", "security": "tls",
    "tlsSettings": {{ "serverName": "localhost",
      "certificates": [{{ "usage": "verify", "certificateFile": {} }}] }} }} }}"#,
        server.port(),
        quoted(ca)
    )
}

/// The certificates of one test, or `None` (skipped) without `openssl`.
fn pki(test: &str, dir: &Path) -> Option<Pki> {
    let openssl = peer(test, "openssl")?;
    Some(Pki::make(&openssl, dir))
}

#[test]
fn socks_over_tls_reaches_v2ray_and_carries_four_mebibytes_each_way() {
    let test = "socks_over_tls_reaches_v2ray_and_carries_four_mebibytes_each_way";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[v2ray_tls_socks_inbound(upstream, &pki.server)],
        &[V2RAY_FREEDOM.to_owned()],
        &[upstream],
    );
    let front = free_addr();
    let config = plain_inbound("socks-in", "socks", front)
        + &tls_outbound("out", "socks", upstream, &pki.ca, None)
        + "[route]\ndefault = \"out\"\n";
    let ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello, v2ray over tls",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via out@v1"));
}

#[test]
fn http_over_tls_reaches_sing_box_and_carries_four_mebibytes_each_way() {
    let test = "http_over_tls_reaches_sing_box_and_carries_four_mebibytes_each_way";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        sing_box_tls_http_inbound("http-tls", upstream, &pki.server)
    );
    let sing_box = start_sing_box(&sing_box, &dir, &config, &[upstream]);
    let front = free_addr();
    // The SNI is a name here, so the certificate is checked against
    // `localhost` rather than the address dialled.
    let config = plain_inbound("socks-in", "socks", front)
        + &tls_outbound("out", "http", upstream, &pki.ca, Some("localhost"))
        + "[route]\ndefault = \"out\"\n";
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello, sing-box over tls",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
    sing_box.wait_for_log(&format!("inbound connection to {echo}"));
}

/// Runs curl on `url` through `proxy_args`, bounded by `--max-time`, with
/// no proxy from the environment; returns its exit status and stderr.
fn curl_status(curl: &Path, proxy_args: &[&str], url: &str) -> (ExitStatus, String) {
    let out = Command::new(curl)
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .args(["--silent", "--show-error", "--fail", "--max-time", "10"])
        .args(proxy_args)
        .arg(url)
        .output()
        .expect("running curl");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn curl_fetches_through_our_https_proxy_inbound_with_its_ca() {
    let test = "curl_fetches_through_our_https_proxy_inbound_with_its_ca";
    let Some(curl) = peer(test, "curl") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    const BODY: &[u8] = b"served to curl through an https proxy\n";
    let origin = http_origin(BODY);
    let listen = free_addr();
    // In .et, so the `tls { }` block of the language is what curl meets.
    let config = format!(
        "inbound https-proxy http {{\n  listen = {listen}\n  \
         tls {{ cert_file = {}  key_file = {}  alpn = [\"http/1.1\"] }}\n}}\n\
         outbound direct freedom {{}}\nroute {{ default -> direct }}\n",
        quoted(&pki.server.cert),
        quoted(&pki.server.key)
    );
    let ours = start_ours(&dir, "etemenanki.et", &config, &[listen]);

    let ca = pki.ca.display().to_string();
    let by_ip = format!("https://{listen}");
    let by_name = format!("https://localhost:{}", listen.port());
    for proxy in [&by_ip, &by_name] {
        let args = ["--proxy", proxy, "--proxy-cacert", &ca];
        assert_eq!(
            crate::curl::fetch(&curl, &args, origin),
            BODY,
            "absolute-form via {proxy}"
        );
        let tunnel = ["--proxy", proxy, "--proxy-cacert", &ca, "--proxytunnel"];
        assert_eq!(
            crate::curl::fetch(&curl, &tunnel, origin),
            BODY,
            "CONNECT via {proxy}"
        );
    }
    ours.wait_for_log(&format!("-> {origin} (sniffed None) via direct@v1"));

    // Without the CA, curl refuses our certificate: what it trusted above was
    // the test CA, not something that skips verification.
    let (status, stderr) = curl_status(&curl, &["--proxy", &by_ip], &format!("http://{origin}/"));
    assert_eq!(
        status.code(),
        Some(60),
        "curl without --proxy-cacert should fail to verify our certificate (exit 60): {stderr}"
    );
    // Our side says why, and serves the next client that trusts it.
    ours.wait_for_log("ended: tls handshake failed: tlsv1 alert unknown ca");
    // Plain HTTP to the HTTPS proxy is refused at its first bytes.
    let plain = format!("http://{listen}");
    let (status, stderr) = curl_status(&curl, &["--proxy", &plain], &format!("http://{origin}/"));
    assert!(
        !status.success(),
        "plain http through an https proxy succeeded: {stderr}"
    );
    ours.wait_for_log("ended: tls handshake failed: http request");
    let args = ["--proxy", &by_ip, "--proxy-cacert", &ca, "--proxytunnel"];
    assert_eq!(
        crate::curl::fetch(&curl, &args, origin),
        BODY,
        "CONNECT after a refusal"
    );
}

#[test]
fn v2ray_socks_outbound_over_tls_reaches_our_socks_tls_inbound() {
    let test = "v2ray_socks_outbound_over_tls_reaches_our_socks_tls_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let listen = free_addr();
    let config = socks_tls_inbound(listen, &pki.server) + DIRECT;
    let ours = start_ours(&dir, "etemenanki.toml", &config, &[listen]);
    let front = free_addr();
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[v2ray_plain_socks_inbound(front)],
        &[v2ray_tls_socks_outbound(listen, &pki.ca)],
        &[front],
    );

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello from v2ray over tls",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via direct@v1"));
}

#[test]
fn sing_box_http_outbound_over_tls_reaches_our_https_proxy_inbound() {
    let test = "sing_box_http_outbound_over_tls_reaches_our_https_proxy_inbound";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let listen = free_addr();
    let config = format!(
        "[[inbound]]\ntag = \"https-proxy\"\nprotocol = \"http\"\nlisten = \"{}\"\nport = {}\n\n\
         [inbound.stream]\nsecurity = \"tls\"\n\n\
         [inbound.stream.tls]\ncert_file = {}\nkey_file = {}\n\n\
         [[outbound]]\ntag = \"direct\"\nprotocol = \"freedom\"\n\n\
         [route]\ndefault = \"direct\"\n",
        listen.ip(),
        listen.port(),
        quoted(&pki.server.cert),
        quoted(&pki.server.key)
    );
    let ours = start_ours(&dir, "etemenanki.toml", &config, &[listen]);
    // sing-box's http client over TLS, trusting the test CA for the name
    // localhost, behind its plain socks inbound for the test's client.
    let front = free_addr();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{{ "type": "socks", "tag": "socks-in", "listen": "127.0.0.1", "listen_port": {} }}],
  "outbounds": [{{ "type": "http", "tag": "ours", "server": "127.0.0.1", "server_port": {},
    "tls": {{ "enabled": true, "server_name": "localhost", "certificate_path": {} }} }}] }}
"#,
        front.port(),
        listen.port(),
        quoted(&pki.ca)
    );
    let _sing_box = start_sing_box(&sing_box, &dir, &config, &[front]);

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello from sing-box over tls",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
    // A half-close crosses our TLS inbound both ways too.
    check_half_close(socks5_connect(front, echo, None).unwrap());
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via direct@v1"));
}

/// Our configuration for a failure test: for each `(tag, front, upstream)`
/// a plain `protocol` inbound `via-<tag>` on `front`, routed by its tag to
/// our `protocol` outbound `tag` over TLS to `upstream`; the first is the
/// default.
fn failure_config(
    protocol: &str,
    routes: &[(&str, SocketAddr, SocketAddr)],
    ca: &Path,
    server_name: Option<&str>,
) -> String {
    let mut config = String::new();
    for &(tag, front, _) in routes {
        config += &plain_inbound(&format!("via-{tag}"), protocol, front);
    }
    for &(tag, _, upstream) in routes {
        config += &tls_outbound(tag, protocol, upstream, ca, server_name);
    }
    config += &format!("[route]\ndefault = \"{}\"\n\n", routes[0].0);
    for &(tag, _, _) in routes {
        config +=
            &format!("[[route.rule]]\ninbound_tag = [\"via-{tag}\"]\noutbound = \"{tag}\"\n\n");
    }
    config
}

/// The error text of a dial the client expected to be refused.
fn refused(dial: io::Result<TcpStream>, what: &str) -> String {
    match dial {
        Ok(_) => panic!("a flow through {what} was opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn socks_over_tls_refuses_untrusted_and_misnamed_servers_and_keeps_serving() {
    let test = "socks_over_tls_refuses_untrusted_and_misnamed_servers_and_keeps_serving";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstreams = [free_addr(), free_addr(), free_addr()];
    let inbounds = [&pki.server, &pki.untrusted, &pki.other_name]
        .iter()
        .zip(upstreams)
        .map(|(pair, listen)| v2ray_tls_socks_inbound(listen, pair))
        .collect::<Vec<_>>();
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &inbounds,
        &[V2RAY_FREEDOM.to_owned()],
        &upstreams,
    );
    let fronts @ [good, untrusted, other_name] = [free_addr(), free_addr(), free_addr()];
    // The name checked is the server's address, 127.0.0.1.
    let routes = ["good", "untrusted", "other-name"]
        .into_iter()
        .zip(fronts)
        .zip(upstreams)
        .map(|((tag, front), upstream)| (tag, front, upstream))
        .collect::<Vec<_>>();
    let config = failure_config("socks", &routes, &pki.ca, None);
    let ours = start_ours(&dir, "etemenanki.toml", &config, &fronts);

    check_echo(socks5_connect(good, echo, None).unwrap(), b"good before");
    // A self-signed certificate for the right address: a general failure
    // (reply 1) to the client, OpenSSL's verdict in the log.
    let error = refused(socks5_connect(untrusted, echo, None), "an untrusted server");
    assert_eq!(error, "socks reply 1");
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via untrusted@v1"));
    ours.wait_for_log(
        "ended: tls handshake with 127.0.0.1 failed: certificate verify failed: self-signed certificate",
    );
    check_echo(socks5_connect(good, echo, None).unwrap(), b"good between");
    // The test CA's certificate for another host.
    let error = refused(socks5_connect(other_name, echo, None), "a misnamed server");
    assert_eq!(error, "socks reply 1");
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via other-name@v1"));
    ours.wait_for_log(
        "ended: tls handshake with 127.0.0.1 failed: certificate verify failed: IP address mismatch",
    );
    check_echo(socks5_connect(good, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn http_over_tls_refuses_untrusted_and_misnamed_servers_and_keeps_serving() {
    let test = "http_over_tls_refuses_untrusted_and_misnamed_servers_and_keeps_serving";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstreams = [free_addr(), free_addr(), free_addr()];
    let inbounds = [
        ("good", &pki.server),
        ("untrusted", &pki.untrusted),
        ("other-name", &pki.other_name),
    ]
    .iter()
    .zip(upstreams)
    .map(|((tag, pair), listen)| sing_box_tls_http_inbound(tag, listen, pair))
    .collect::<Vec<_>>();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        inbounds.join(",\n")
    );
    let _sing_box = start_sing_box(&sing_box, &dir, &config, &upstreams);
    let fronts @ [good, untrusted, other_name] = [free_addr(), free_addr(), free_addr()];
    // The name checked (and sent as SNI) is localhost.
    let routes = ["good", "untrusted", "other-name"]
        .into_iter()
        .zip(fronts)
        .zip(upstreams)
        .map(|((tag, front), upstream)| (tag, front, upstream))
        .collect::<Vec<_>>();
    let config = failure_config("http", &routes, &pki.ca, Some("localhost"));
    let ours = start_ours(&dir, "etemenanki.toml", &config, &fronts);

    let bad_gateway = "http proxy answered \"HTTP/1.1 502 Bad Gateway\"";
    check_echo(http_connect(good, echo, None).unwrap(), b"good before");
    let error = refused(http_connect(untrusted, echo, None), "an untrusted server");
    assert_eq!(error, bad_gateway);
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via untrusted@v1"));
    ours.wait_for_log(
        "ended: tls handshake with localhost failed: certificate verify failed: self-signed certificate",
    );
    check_echo(http_connect(good, echo, None).unwrap(), b"good between");
    let error = refused(http_connect(other_name, echo, None), "a misnamed server");
    assert_eq!(error, bad_gateway);
    ours.wait_for_log(&format!("-> {echo} (sniffed None) via other-name@v1"));
    ours.wait_for_log(
        "ended: tls handshake with localhost failed: certificate verify failed: hostname mismatch",
    );
    check_echo(http_connect(good, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn socks_over_tls_relays_udp_through_v2ray() {
    let test = "socks_over_tls_relays_udp_through_v2ray";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = udp_echo(Ipv4Addr::new(127, 0, 0, 2));
    let upstream = free_addr();
    let inbound = v2ray_tls_socks_inbound(upstream, &pki.server)
        .replace(r#""udp": false"#, r#""udp": true, "ip": "127.0.0.1""#);
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[inbound],
        &[V2RAY_FREEDOM.to_owned()],
        &[upstream],
    );
    let front = free_addr();
    let config = plain_inbound("socks-in", "socks", front)
        + &tls_outbound("out", "socks", upstream, &pki.ca, None)
        + "[route]\ndefault = \"out\"\n";
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    let association = Association::open(front).unwrap();
    for payload in [b"ping over tls".to_vec(), pattern(1200)] {
        assert_eq!(association.ask(echo, &payload), Some((echo, payload)));
    }
}

#[test]
fn v2ray_socks_outbound_over_tls_relays_udp_through_our_socks_tls_inbound() {
    let test = "v2ray_socks_outbound_over_tls_relays_udp_through_our_socks_tls_inbound";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    // On 127.0.0.2: v2ray's socks client names the destination as its own
    // address in UDP ASSOCIATE (see v2ray.rs).
    let echo = udp_echo(Ipv4Addr::new(127, 0, 0, 2));
    let listen = free_addr();
    let config = socks_tls_inbound(listen, &pki.server) + DIRECT;
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[listen]);
    let front = free_addr();
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[v2ray_plain_socks_inbound(front)],
        &[v2ray_tls_socks_outbound(listen, &pki.ca)],
        &[front],
    );

    let association = Association::open(front).unwrap();
    for payload in [b"ping from v2ray over tls".to_vec(), pattern(1200)] {
        assert_eq!(association.ask(echo, &payload), Some((echo, payload)));
    }
}

#[test]
fn http_over_tls_carries_a_half_close_through_sing_box_and_back() {
    let test = "http_over_tls_carries_a_half_close_through_sing_box_and_back";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        sing_box_tls_http_inbound("http-tls", upstream, &pki.server)
    );
    let _sing_box = start_sing_box(&sing_box, &dir, &config, &[upstream]);
    let front = free_addr();
    let config = plain_inbound("socks-in", "socks", front)
        + &tls_outbound("out", "http", upstream, &pki.ca, None)
        + "[route]\ndefault = \"out\"\n";
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    // The client's FIN crosses our TLS outbound (close_notify, then FIN) and
    // sing-box to the echo server, which closes its side once it has echoed
    // everything; that end of stream comes back the same way.
    check_half_close(socks5_connect(front, echo, None).unwrap());
}

/// Sends 256 KiB to an echo server through `stream`, half-closes, and checks
/// that the same bytes come back followed by the end of stream. Without that
/// end of stream the read would fail in the socket's 10 s timeout.
fn check_half_close(stream: TcpStream) {
    let payload = pattern(256 * 1024);
    let mut writer = stream.try_clone().expect("cloning a stream");
    let sent = payload.clone();
    let sender = std::thread::spawn(move || {
        writer.write_all(&sent)?;
        writer.shutdown(Shutdown::Write)
    });
    let mut got = Vec::new();
    let mut reader = stream;
    reader
        .read_to_end(&mut got)
        .expect("the echo's end of stream, after the client's half-close");
    sender
        .join()
        .expect("the writer thread")
        .expect("writing, then half-closing");
    assert!(
        got == payload,
        "the echo differs from what was sent ({} of {} bytes came back)",
        got.len(),
        payload.len()
    );
}

#[test]
fn socks_over_tls_sends_its_server_name_as_sni_and_no_sni_for_an_address() {
    let test = "socks_over_tls_sends_its_server_name_as_sni_and_no_sni_for_an_address";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    // Two certificates, the one for another host first: Go's TLS server
    // picks the first whose names match the client's SNI, and without SNI
    // the first of all.
    let inbound = v2ray_tls_socks_inbound(upstream, &pki.server).replace(
        r#""certificates": ["#,
        &format!(
            r#""certificates": [{{ "certificateFile": {}, "keyFile": {} }}, "#,
            quoted(&pki.other_name.cert),
            quoted(&pki.other_name.key)
        ),
    );
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[inbound],
        &[V2RAY_FREEDOM.to_owned()],
        &[upstream],
    );
    let by_name = free_addr();
    let by_address = free_addr();
    let config = plain_inbound("by-name", "socks", by_name)
        + &plain_inbound("by-address", "socks", by_address)
        + &tls_outbound("sni", "socks", upstream, &pki.ca, Some("localhost"))
        + &tls_outbound("address", "socks", upstream, &pki.ca, None)
        + "[route]\ndefault = \"sni\"\n\n\
           [[route.rule]]\ninbound_tag = [\"by-address\"]\noutbound = \"address\"\n";
    let ours = start_ours(&dir, "etemenanki.toml", &config, &[by_name, by_address]);

    // `server_name = "localhost"` goes out as SNI, so v2ray answers with the
    // certificate for localhost.
    check_echo(
        socks5_connect(by_name, echo, None).unwrap(),
        b"sni localhost",
    );
    // The default name is the address dialled, which is no SNI (RFC 6066):
    // v2ray answers with its first certificate, which does not name
    // 127.0.0.1.
    let error = refused(socks5_connect(by_address, echo, None), "no SNI");
    assert_eq!(error, "socks reply 1");
    ours.wait_for_log(
        "ended: tls handshake with 127.0.0.1 failed: certificate verify failed: IP address mismatch",
    );
}

#[test]
fn socks_over_tls_with_insecure_reaches_a_self_signed_v2ray() {
    let test = "socks_over_tls_with_insecure_reaches_a_self_signed_v2ray";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[v2ray_tls_socks_inbound(upstream, &pki.untrusted)],
        &[V2RAY_FREEDOM.to_owned()],
        &[upstream],
    );
    let front = free_addr();
    let config = format!(
        "{}[[outbound]]\ntag = \"out\"\nprotocol = \"socks\"\nserver = \"{}\"\nport = {}\n\n\
         [outbound.stream]\nnetwork = \"tls\"\n\n[outbound.stream.tls]\ninsecure = true\n\n\
         [route]\ndefault = \"out\"\n",
        plain_inbound("socks-in", "socks", front),
        upstream.ip(),
        upstream.port()
    );
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    // The certificate nobody trusts is not checked at all.
    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello, whoever you are",
    );
    check_echo(socks5_connect(front, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn curl_verifies_our_https_proxy_inbound_through_an_intermediate_ca() {
    let test = "curl_verifies_our_https_proxy_inbound_through_an_intermediate_ca";
    let Some(curl) = peer(test, "curl") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    const BODY: &[u8] = b"served through a chain\n";
    let origin = http_origin(BODY);
    let listen = free_addr();
    // cert_file holds the leaf and the intermediate: our inbound must send
    // both, since curl trusts only the root.
    let config = format!(
        "inbound https-proxy http {{\n  listen = {listen}\n  \
         tls {{ cert_file = {}  key_file = {} }}\n}}\n\
         outbound direct freedom {{}}\nroute {{ default -> direct }}\n",
        quoted(&pki.chained.cert),
        quoted(&pki.chained.key)
    );
    let _ours = start_ours(&dir, "etemenanki.et", &config, &[listen]);

    let ca = pki.ca.display().to_string();
    let proxy = format!("https://{listen}");
    let tunnel = ["--proxy", &proxy, "--proxy-cacert", &ca, "--proxytunnel"];
    assert_eq!(crate::curl::fetch(&curl, &tunnel, origin), BODY);
}

#[test]
fn http_over_tls_verifies_sing_box_through_an_intermediate_ca() {
    let test = "http_over_tls_verifies_sing_box_through_an_intermediate_ca";
    let Some(sing_box) = peer(test, "sing-box") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let upstream = free_addr();
    let config = format!(
        r#"{{ "log": {{ "level": "info" }},
  "inbounds": [{}],
  "outbounds": [{{ "type": "direct", "tag": "direct" }}] }}
"#,
        sing_box_tls_http_inbound("http-tls", upstream, &pki.chained)
    );
    let _sing_box = start_sing_box(&sing_box, &dir, &config, &[upstream]);
    let front = free_addr();
    // ca_file is the root alone: the intermediate comes from sing-box.
    let config = plain_inbound("socks-in", "socks", front)
        + &tls_outbound("out", "http", upstream, &pki.ca, None)
        + "[route]\ndefault = \"out\"\n";
    let _ours = start_ours(&dir, "etemenanki.toml", &config, &[front]);

    check_echo(
        socks5_connect(front, echo, None).unwrap(),
        b"hello through a chain",
    );
}

#[test]
fn socks_over_tls_to_a_plain_socks_server_fails_cleanly_and_keeps_serving() {
    let test = "socks_over_tls_to_a_plain_socks_server_fails_cleanly_and_keeps_serving";
    let Some(v2ray) = peer(test, "v2ray") else {
        return;
    };
    let dir = scratch_dir(test);
    let Some(pki) = pki(test, &dir) else { return };
    let echo = tcp_echo();
    let tls = free_addr();
    let plain = free_addr();
    let plain_inbound = format!(
        r#"{{ "listen": "127.0.0.1", "port": {}, "protocol": "socks",
  "settings": {{ "auth": "noauth", "udp": false }} }}"#,
        plain.port()
    );
    let _v2ray = start_v2ray(
        &v2ray,
        &dir,
        &[v2ray_tls_socks_inbound(tls, &pki.server), plain_inbound],
        &[V2RAY_FREEDOM.to_owned()],
        &[tls, plain],
    );
    let (good, misconfigured) = (free_addr(), free_addr());
    let routes = [("good", good, tls), ("plain", misconfigured, plain)];
    let config = failure_config("socks", &routes, &pki.ca, None);
    let ours = start_ours(&dir, "etemenanki.toml", &config, &[good, misconfigured]);

    // v2ray reads our ClientHello as a SOCKS greeting of version 22 and
    // hangs up: a failed dial, not a stalled one.
    let error = refused(socks5_connect(misconfigured, echo, None), "a plain server");
    assert_eq!(error, "socks reply 1");
    ours.wait_for_log("ended: tls handshake with 127.0.0.1 failed: the peer closed the connection");
    check_echo(socks5_connect(good, echo, None).unwrap(), b"good after");
}
