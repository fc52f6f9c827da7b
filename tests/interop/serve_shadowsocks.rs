//! Our shadowsocks (AEAD) inbound against shadowsocks-libev's `ss-local`
//! and shadowsocks-rust's `sslocal`, TCP and UDP, for every method; our
//! own shadowsocks outbound; a wrong password refused while the right one
//! is served; and probes that must not crash it.

use crate::serve::{
    carries_nothing, carries_tcp, carries_udp, ours_to_ours, own_dir, refused_and_held, serve,
    survives_probes, SsLocal, HELD, SHORT_HANDSHAKE, SMALL_UDP_MAX, UDP_MAX,
};
use crate::support::binaries::peer;
use crate::support::process::scratch_dir;
use crate::support::servers::free_addr;

const PASSWORD: &str = "shadowsocks-serve-secret";
const WRONG_PASSWORD: &str = "not-the-shadowsocks-password";
const METHODS: [&str; 3] = ["aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305"];

/// Our shadowsocks inbound's tables.
fn inbound_tables(method: &str) -> String {
    format!("[inbound.settings]\nmethod = \"{method}\"\npassword = \"{PASSWORD}\"\n")
}

/// Our shadowsocks outbound's tables.
fn outbound_tables(method: &str, password: &str) -> String {
    format!("[outbound.settings]\nmethod = \"{method}\"\npassword = \"{password}\"\n")
}

/// `client` carries TCP and UDP through our inbound for every method.
fn carries_every_method(test: &str, client: SsLocal) {
    let Some(bin) = peer(test, client.binary()) else {
        return;
    };
    let dir = scratch_dir(test);
    for method in METHODS {
        let what = format!(
            "{} through our shadowsocks inbound with {method}",
            client.binary()
        );
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "shadowsocks",
            server,
            &inbound_tables(method),
            "",
        );
        let (_client, front) = client.start(&bin, &dir, server, method, PASSWORD);
        let largest = match client {
            SsLocal::Libev => SMALL_UDP_MAX,
            SsLocal::Rust => UDP_MAX,
        };
        // UDP first: it needs nothing TCP does.
        carries_udp(front, &what, largest);
        carries_tcp(front, &what);
        ours.wait_for_log("via out@v1");
    }
}

#[test]
fn ss_local_carries_tcp_and_udp_through_our_shadowsocks_inbound_for_every_method() {
    carries_every_method(
        "ss_local_carries_tcp_and_udp_through_our_shadowsocks_inbound_for_every_method",
        SsLocal::Libev,
    );
}

#[test]
fn sslocal_carries_tcp_and_udp_through_our_shadowsocks_inbound_for_every_method() {
    carries_every_method(
        "sslocal_carries_tcp_and_udp_through_our_shadowsocks_inbound_for_every_method",
        SsLocal::Rust,
    );
}

#[test]
fn our_shadowsocks_outbound_reaches_our_shadowsocks_inbound_for_every_method() {
    let dir = scratch_dir("our_shadowsocks_outbound_reaches_our_shadowsocks_inbound");
    for method in METHODS {
        ours_to_ours(
            &dir,
            "shadowsocks",
            &inbound_tables(method),
            &outbound_tables(method, PASSWORD),
            &format!("our shadowsocks outbound to our inbound with {method}"),
        );
    }
}

#[test]
fn a_wrong_shadowsocks_password_is_refused_and_the_right_one_served() {
    let test = "a_wrong_shadowsocks_password_is_refused_and_the_right_one_served";
    let Some(libev) = peer(test, "ss-local") else {
        return;
    };
    let Some(rust) = peer(test, "sslocal") else {
        return;
    };
    let dir = scratch_dir(test);
    let method = METHODS[2];
    let server = free_addr();
    let ours = serve(
        &dir,
        "shadowsocks",
        server,
        &inbound_tables(method),
        SHORT_HANDSHAKE,
    );
    let start = |client: SsLocal, bin, password| client.start(bin, &dir, server, method, password);
    let (_wrong_libev, wrong_libev) = start(SsLocal::Libev, &libev, WRONG_PASSWORD);
    let (_wrong_rust, wrong_rust) = start(SsLocal::Rust, &rust, WRONG_PASSWORD);
    let (_libev, right_libev) = start(SsLocal::Libev, &libev, PASSWORD);
    let (_rust, right_rust) = start(SsLocal::Rust, &rust, PASSWORD);

    for _ in 0..2 {
        carries_nothing(wrong_libev, "ss-local with a wrong password");
        carries_tcp(right_libev, "ss-local with the right password");
        carries_nothing(wrong_rust, "sslocal with a wrong password");
        carries_tcp(right_rust, "sslocal with the right password");
    }
    ours.wait_for_log(HELD);
}

#[test]
fn a_wrong_shadowsocks_password_gets_no_byte_and_is_held_until_the_handshake_deadline() {
    refused_and_held(
        "a_wrong_shadowsocks_password_gets_no_byte_and_is_held_until_the_handshake_deadline",
        "shadowsocks",
        &inbound_tables(METHODS[0]),
        &outbound_tables(METHODS[0], WRONG_PASSWORD),
    );
}

#[test]
fn noise_and_truncated_handshakes_never_crash_our_shadowsocks_inbound() {
    let dir = scratch_dir("noise_and_truncated_handshakes_never_crash_our_shadowsocks_inbound");
    for method in METHODS {
        survives_probes(
            &dir,
            "shadowsocks",
            &inbound_tables(method),
            &outbound_tables(method, PASSWORD),
            true,
            &format!("our shadowsocks inbound with {method}"),
        );
    }
}
