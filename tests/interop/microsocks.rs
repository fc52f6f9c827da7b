//! microsocks: our SOCKS outbound through it, without and with
//! username/password authentication.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::support::binaries::peer;
use crate::support::client::{check_echo, pattern, socks5_connect, Login};
use crate::support::etemenanki::Config;
use crate::support::process::{scratch_dir, Process};
use crate::support::servers::{free_addr, tcp_echo};
use crate::support::BULK;

const LOGIN: Login = Login {
    user: "alice",
    pass: "s3cret-pass",
};

fn start(microsocks: &Path, dir: &Path, listen: SocketAddr, login: Option<Login>) -> Process {
    let mut command = Command::new(microsocks);
    command.args(["-i", "127.0.0.1", "-p", &listen.port().to_string()]);
    if let Some(login) = login {
        command.args(["-u", login.user, "-P", login.pass]);
    }
    Process::spawn_listening("microsocks", command, dir, listen)
}

#[test]
fn socks_outbound_connects_through_microsocks() {
    let test = "socks_outbound_connects_through_microsocks";
    let Some(microsocks) = peer(test, "microsocks") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _microsocks = start(&microsocks, &dir, upstream, None);
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(upstream, None)
        .start(&dir);

    check_echo(
        socks5_connect(ours, echo, None).unwrap(),
        b"hello, microsocks",
    );
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn socks_outbound_authenticates_to_microsocks() {
    let test = "socks_outbound_authenticates_to_microsocks";
    let Some(microsocks) = peer(test, "microsocks") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _microsocks = start(&microsocks, &dir, upstream, Some(LOGIN));
    let ours = free_addr();
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(upstream, Some(LOGIN))
        .start(&dir);

    check_echo(socks5_connect(ours, echo, None).unwrap(), b"hello, alice");
    check_echo(socks5_connect(ours, echo, None).unwrap(), &pattern(BULK));
}

#[test]
fn socks_outbound_with_a_wrong_password_is_refused_by_microsocks() {
    let test = "socks_outbound_with_a_wrong_password_is_refused_by_microsocks";
    let Some(microsocks) = peer(test, "microsocks") else {
        return;
    };
    let dir = scratch_dir(test);
    let echo = tcp_echo();
    let upstream = free_addr();
    let _microsocks = start(&microsocks, &dir, upstream, Some(LOGIN));
    let ours = free_addr();
    let wrong = Login {
        user: LOGIN.user,
        pass: "not-the-password",
    };
    let _ours = Config::default()
        .socks_in(ours, None)
        .socks_out(upstream, Some(wrong))
        .start(&dir);

    let refused = socks5_connect(ours, echo, None);
    assert!(
        refused.is_err(),
        "a CONNECT with a wrong upstream password succeeded"
    );
}
