//! curl as the client of our SOCKS5 and HTTP inbounds: SOCKS5 with remote
//! name resolution, HTTP absolute-form, and HTTP CONNECT with Basic
//! authentication.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::client::Login;
use crate::support::etemenanki::Config;
use crate::support::process::scratch_dir;
use crate::support::servers::{free_addr, http_origin};

const BODY: &[u8] = b"served to curl through etemenanki\n";

/// Runs curl with `proxy_args` on `http://<origin>/` (bounded by
/// `--max-time`), failing the test unless it succeeds; returns the body.
pub fn fetch(curl: &Path, proxy_args: &[&str], origin: SocketAddr) -> Vec<u8> {
    fetch_url(curl, proxy_args, &format!("http://{origin}/"))
}

fn fetch_url(curl: &Path, proxy_args: &[&str], url: &str) -> Vec<u8> {
    let mut command = Command::new(curl);
    // Only the arguments choose the proxy, never the environment.
    for var in [
        "no_proxy",
        "NO_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        command.env_remove(var);
    }
    let out = command
        .args(["--silent", "--show-error", "--fail", "--max-time", "10"])
        .args(proxy_args)
        .arg(url)
        .output()
        .expect("running curl");
    assert!(
        out.status.success(),
        "curl {proxy_args:?} {url} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn curl_fetches_through_our_socks_inbound_by_name() {
    let test = "curl_fetches_through_our_socks_inbound_by_name";
    let Some(curl) = peer(test, "curl") else {
        return;
    };
    let dir = scratch_dir(test);
    let origin = http_origin(BODY);
    let ours = free_addr();
    let _ours = Config::default().socks_in(ours, None).freedom().start(&dir);

    // socks5h: curl sends the name, our runtime resolves it.
    let url = format!("http://localhost:{}/", origin.port());
    let proxy = format!("socks5h://{ours}");
    assert_eq!(fetch_url(&curl, &["--proxy", &proxy], &url), BODY);
}

#[test]
fn curl_fetches_through_our_http_inbound() {
    let test = "curl_fetches_through_our_http_inbound";
    let Some(curl) = peer(test, "curl") else {
        return;
    };
    let dir = scratch_dir(test);
    let origin = http_origin(BODY);
    let ours = free_addr();
    let login = Login {
        user: "carol",
        pass: "curl-pass",
    };
    let _ours = Config::default()
        .http_in(ours, Some(login))
        .freedom()
        .start(&dir);

    let proxy = format!("http://{ours}");
    let user = format!("{}:{}", login.user, login.pass);
    let plain = ["--proxy", &proxy, "--proxy-user", &user];
    assert_eq!(fetch(&curl, &plain, origin), BODY, "absolute-form");
    let tunnel = ["--proxy", &proxy, "--proxy-user", &user, "--proxytunnel"];
    assert_eq!(fetch(&curl, &tunnel, origin), BODY, "CONNECT");
}
