//! Our shadowsocks-2022 inbound against shadowsocks-rust's `sslocal` and
//! sing-box, single-user for every method and multi-user (identity
//! headers, SIP023) for the AES methods, TCP and UDP; our own
//! shadowsocks-2022 outbound both ways; a wrong key and an unknown user
//! refused while the right ones are served; and probes that must not
//! crash it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::serve::{
    carries_nothing, carries_tcp, carries_udp, ours_to_ours, own_dir, refused_and_held, serve,
    sing_box_client, survives_probes, SsLocal, HELD, SHORT_HANDSHAKE, UDP_MAX,
};
use crate::support::binaries::peer;
use crate::support::process::scratch_dir;
use crate::support::servers::free_addr;

/// The PSKs of one key length, in base64: the server's (the identity PSK
/// of a multi-user server), two users', and one the server does not know.
struct Keys {
    server: &'static str,
    alice: &'static str,
    bob: &'static str,
    stranger: &'static str,
}

const KEYS_16: Keys = Keys {
    server: "aeANxvHZkEQoy3QqvETZLw==",
    alice: "6xqWcGRCjxvWj8do4awLfQ==",
    bob: "bPT4VdMVCOkXkrmBDWSmoQ==",
    stranger: "MF3QU8HTMMawM8EWYmdl+w==",
};

const KEYS_32: Keys = Keys {
    server: "M+1iEBrvxH+8pPxiR3n9LzcGR2RhLMCmbRppGXgjZYU=",
    alice: "VZClf5iJu5UPckSEz79E6R2dye9aGTLqSq0LJT/DCIM=",
    bob: "aWZ8uIDbWp9zP/jwECDPZKIUtW7L6J+hvmNMlKBIIsQ=",
    stranger: "u7RtbvDb7gafyripL+pSMmA6XhEPX+k378sGIEWzmxE=",
};

/// Every method with its keys, and whether it has identity headers
/// (multi-user): SIP023 defines them for the AES methods only.
const METHODS: [(&str, &Keys, bool); 3] = [
    ("2022-blake3-aes-128-gcm", &KEYS_16, true),
    ("2022-blake3-aes-256-gcm", &KEYS_32, true),
    ("2022-blake3-chacha20-poly1305", &KEYS_32, false),
];

/// Our inbound's tables: single-user with `psk`, or multi-user with the
/// server's PSK and `users`.
fn inbound_tables(method: &str, psk: &str, users: &[&str]) -> String {
    let mut text = format!("[inbound.settings]\nmethod = \"{method}\"\npsk = \"{psk}\"\n");
    if !users.is_empty() {
        let list: Vec<String> = users.iter().map(|k| format!("\"{k}\"")).collect();
        text.push_str(&format!("users = [{}]\n", list.join(", ")));
    }
    text
}

/// Our outbound's tables: `psk`, behind `identity` when the server is
/// multi-user.
fn outbound_tables(method: &str, psk: &str, identity: Option<&str>) -> String {
    let mut text = format!("[outbound.settings]\nmethod = \"{method}\"\npsk = \"{psk}\"\n");
    if let Some(identity) = identity {
        text.push_str(&format!("identity_psks = [\"{identity}\"]\n"));
    }
    text
}

/// The password a client outside us writes: `psk`, or for a multi-user
/// server `<identity psk>:<user psk>` (sslocal and sing-box alike).
fn password(psk: &str, identity: Option<&str>) -> String {
    match identity {
        Some(identity) => format!("{identity}:{psk}"),
        None => psk.to_owned(),
    }
}

/// sing-box's shadowsocks outbound to `server`.
fn sing_box_ss(server: SocketAddr, method: &str, password: &str) -> String {
    format!(
        r#"{{ "type": "shadowsocks", "tag": "ours", "server": "127.0.0.1", "server_port": {},
    "method": "{method}", "password": "{password}" }}"#,
        server.port()
    )
}

/// A client of `server` that users run, `sslocal` or sing-box.
#[derive(Clone, Copy)]
enum Client<'a> {
    Sslocal(&'a Path),
    SingBox(&'a Path),
}

impl Client<'_> {
    fn name(self) -> &'static str {
        match self {
            Client::Sslocal(_) => "sslocal",
            Client::SingBox(_) => "sing-box",
        }
    }

    fn start(
        self,
        dir: &Path,
        server: SocketAddr,
        method: &str,
        password: &str,
    ) -> (crate::support::process::Process, SocketAddr) {
        match self {
            Client::Sslocal(bin) => SsLocal::Rust.start(bin, dir, server, method, password),
            Client::SingBox(bin) => {
                sing_box_client(bin, dir, &sing_box_ss(server, method, password))
            }
        }
    }
}

/// The peers a test needs, or `None` (it skips).
fn peers(test: &str, names: &[&str]) -> Option<Vec<PathBuf>> {
    names.iter().map(|name| peer(test, name)).collect()
}

/// `client` carries TCP and UDP through our single-user inbound for every
/// method.
fn single_user_every_method(test: &str, client: Client) {
    let dir = scratch_dir(test);
    for (method, keys, _) in METHODS {
        let what = format!("{} through our ss2022 inbound with {method}", client.name());
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "shadowsocks-2022",
            server,
            &inbound_tables(method, keys.server, &[]),
            "",
        );
        let (_client, front) = client.start(&dir, server, method, keys.server);
        // UDP first: it needs nothing TCP does.
        carries_udp(front, &what, UDP_MAX);
        carries_tcp(front, &what);
        ours.wait_for_log("via out@v1");
    }
}

#[test]
fn sslocal_carries_tcp_and_udp_through_our_ss2022_inbound_for_every_method() {
    let test = "sslocal_carries_tcp_and_udp_through_our_ss2022_inbound_for_every_method";
    let Some(found) = peers(test, &["sslocal"]) else {
        return;
    };
    single_user_every_method(test, Client::Sslocal(&found[0]));
}

#[test]
fn sing_box_carries_tcp_and_udp_through_our_ss2022_inbound_for_every_method() {
    let test = "sing_box_carries_tcp_and_udp_through_our_ss2022_inbound_for_every_method";
    let Some(found) = peers(test, &["sing-box"]) else {
        return;
    };
    single_user_every_method(test, Client::SingBox(&found[0]));
}

#[test]
fn sslocal_and_sing_box_reach_each_user_of_our_multi_user_ss2022_inbound() {
    let test = "sslocal_and_sing_box_reach_each_user_of_our_multi_user_ss2022_inbound";
    let Some(found) = peers(test, &["sslocal", "sing-box"]) else {
        return;
    };
    let dir = scratch_dir(test);
    for (method, keys, _) in METHODS.iter().filter(|(_, _, multi)| *multi) {
        let server = free_addr();
        let ours = serve(
            &own_dir(&dir, "ours", server),
            "shadowsocks-2022",
            server,
            &inbound_tables(method, keys.server, &[keys.alice, keys.bob]),
            SHORT_HANDSHAKE,
        );
        for client in [Client::SingBox(&found[1]), Client::Sslocal(&found[0])] {
            for (user, psk) in [("alice", keys.alice), ("bob", keys.bob)] {
                let what = format!("{} as {user} with {method}", client.name());
                let (_client, front) =
                    client.start(&dir, server, method, &password(psk, Some(keys.server)));
                carries_udp(front, &what, UDP_MAX);
                carries_tcp(front, &what);
            }
            let (_stranger, front) = client.start(
                &dir,
                server,
                method,
                &password(keys.stranger, Some(keys.server)),
            );
            carries_nothing(front, &format!("{} as an unknown user", client.name()));
        }
        ours.wait_for_log(HELD);
    }
}

#[test]
fn our_ss2022_outbound_reaches_our_ss2022_inbound_single_and_multi_user() {
    let dir = scratch_dir("our_ss2022_outbound_reaches_our_ss2022_inbound");
    for (method, keys, multi) in METHODS {
        ours_to_ours(
            &dir,
            "shadowsocks-2022",
            &inbound_tables(method, keys.server, &[]),
            &outbound_tables(method, keys.server, None),
            &format!("our ss2022 outbound to our inbound with {method}"),
        );
        if multi {
            ours_to_ours(
                &dir,
                "shadowsocks-2022",
                &inbound_tables(method, keys.server, &[keys.alice, keys.bob]),
                &outbound_tables(method, keys.bob, Some(keys.server)),
                &format!("our ss2022 outbound to our multi-user inbound with {method}"),
            );
        }
    }
}

#[test]
fn a_wrong_ss2022_key_is_refused_and_the_right_one_served() {
    let test = "a_wrong_ss2022_key_is_refused_and_the_right_one_served";
    let Some(found) = peers(test, &["sslocal", "sing-box"]) else {
        return;
    };
    let dir = scratch_dir(test);
    let (method, keys, _) = METHODS[0];
    let server = free_addr();
    let ours = serve(
        &dir,
        "shadowsocks-2022",
        server,
        &inbound_tables(method, keys.server, &[]),
        SHORT_HANDSHAKE,
    );
    let clients = [Client::SingBox(&found[1]), Client::Sslocal(&found[0])];
    for client in clients {
        let (_wrong, wrong) = client.start(&dir, server, method, keys.stranger);
        let (_right, right) = client.start(&dir, server, method, keys.server);
        for _ in 0..2 {
            carries_nothing(wrong, &format!("{} with a wrong key", client.name()));
            carries_tcp(right, &format!("{} with the right key", client.name()));
        }
    }
    ours.wait_for_log(HELD);
}

#[test]
fn a_wrong_ss2022_key_gets_no_byte_and_is_held_until_the_handshake_deadline() {
    for (method, keys, multi) in METHODS {
        let users = if multi {
            vec![keys.alice, keys.bob]
        } else {
            Vec::new()
        };
        let identity = multi.then_some(keys.server);
        refused_and_held(
            "a_wrong_ss2022_key_gets_no_byte_and_is_held_until_the_handshake_deadline",
            "shadowsocks-2022",
            &inbound_tables(method, keys.server, &users),
            &outbound_tables(method, keys.stranger, identity),
        );
    }
}

#[test]
fn noise_and_truncated_handshakes_never_crash_our_ss2022_inbound() {
    let dir = scratch_dir("noise_and_truncated_handshakes_never_crash_our_ss2022_inbound");
    for (method, keys, multi) in METHODS {
        let (users, psk, identity) = if multi {
            (vec![keys.alice, keys.bob], keys.alice, Some(keys.server))
        } else {
            (Vec::new(), keys.server, None)
        };
        survives_probes(
            &dir,
            "shadowsocks-2022",
            &inbound_tables(method, keys.server, &users),
            &outbound_tables(method, psk, identity),
            true,
            &format!("our ss2022 inbound with {method}"),
        );
    }
}
