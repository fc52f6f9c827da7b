//! `etc plan` end to end: the real binary on real configurations, its human
//! and JSON previews snapshotted, its exit codes, and no secret in any output.

use std::path::PathBuf;
use std::process::Command;

use etemenanki_compiler::{compile, Source};
use etemenanki_ir::plan::plan;
use etemenanki_ir::state::DeployedState;

/// A small fleet: two Trojan servers behind a failover balancer, a direct and
/// a blackhole outbound, one SOCKS inbound. Old flows close 30 s after a
/// reload replaces their outbound, except on backup, whose flows run on.
const BASE: &str = r#"drain = "close after 30s"

[[inbound]]
tag = "socks-in"
protocol = "socks"
listen = "127.0.0.1"
port = 1080

[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "block"
protocol = "blackhole"

[[outbound]]
tag = "primary"
protocol = "trojan"
server = "proxy1.example.com"
port = 443

[outbound.stream]
network = "tls"

[outbound.settings]
password = "primary-secret-1"

[[outbound]]
tag = "backup"
protocol = "trojan"
server = "proxy2.example.com"
port = 443
drain = "keep"

[outbound.stream]
network = "tls"

[outbound.settings]
password = "backup-secret-1"

[[balancer]]
tag = "proxy"
outbounds = ["primary", "backup"]

[route]
default = "proxy"

[[route.rule]]
outbound = "direct"
cidr = ["10.0.0.0/8", "192.168.0.0/16"]
"#;

/// The secrets the fixtures hold; none may ever be printed.
const SECRETS: &[&str] = &[
    "primary-secret-1",
    "primary-secret-2",
    "backup-secret-1",
    "5783a3e7",
];

/// BASE with each `(from, to)` replaced once; a missing `from` is a broken
/// fixture.
fn edit(edits: &[(&str, &str)]) -> String {
    let mut text = BASE.to_owned();
    for (from, to) in edits {
        assert!(text.contains(from), "fixture has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    text
}

fn dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plan_preview");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn etc_plan(old: &PathBuf, new: &PathBuf, extra: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_etc"))
        .arg("plan")
        .arg("--from")
        .arg(old)
        .arg(new)
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let run = Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    for secret in SECRETS {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{secret} printed"
        );
    }
    run
}

/// Plans `new` over `old` (both sources), and snapshots both previews.
fn preview(case: &str, old: &str, new: &str, verbose: bool) {
    let old = write(&format!("{case}-old.toml"), old.as_bytes());
    let new = write(&format!("{case}-new.toml"), new.as_bytes());
    snapshot(case, &old, &new, verbose);
}

fn snapshot(case: &str, old: &PathBuf, new: &PathBuf, verbose: bool) {
    let human = etc_plan(old, new, if verbose { &["--verbose"] } else { &[] });
    assert_eq!(human.code, 0, "{}", human.stderr);
    let json = etc_plan(old, new, &["--format", "json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let parsed: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(parsed["format_version"], 1);
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots/plan"),
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(format!("{case}_human"), human.stdout);
        insta::assert_snapshot!(format!("{case}_json"), json.stdout);
    });
}

#[test]
fn a_members_password_change_rebuilds_it_and_its_balancer() {
    let new = edit(&[("primary-secret-1", "primary-secret-2")]);
    preview("member_password", BASE, &new, false);
}

#[test]
fn a_dns_change_rebuilds_every_outbound_but_blackhole() {
    let new = format!("{BASE}\n[dns]\nservers = [\"10.0.0.53\"]\n");
    preview("dns", BASE, &new, false);
}

#[test]
fn removing_a_balancer_drains_nothing() {
    let new = edit(&[
        (
            "[[balancer]]\ntag = \"proxy\"\noutbounds = [\"primary\", \"backup\"]\n\n",
            "",
        ),
        ("default = \"proxy\"", "default = \"primary\""),
    ]);
    preview("balancer_removed", BASE, &new, false);
}

#[test]
fn a_protocol_change_a_new_outbound_and_a_changed_inbound() {
    let new = edit(&[
        ("protocol = \"trojan\"\nserver = \"proxy2", "protocol = \"vless\"\nserver = \"proxy2"),
        ("password = \"backup-secret-1\"", "id = \"5783a3e7-e373-51cd-8642-c83782b807c5\""),
        ("port = 1080", "port = 1081"),
        (
            "[[balancer]]",
            "[[outbound]]\ntag = \"office\"\nprotocol = \"socks\"\nserver = \"10.1.2.3\"\nport = 1080\ndrain = \"close\"\n\n[[balancer]]",
        ),
    ]);
    preview("protocol_inbound", BASE, &new, false);
}

#[test]
fn an_unchanged_configuration_lists_every_resource_with_verbose() {
    preview("unchanged_verbose", BASE, BASE, true);
}

/// From a state file with history: backup was rebuilt (v2), then removed;
/// adding it back builds v3, never a version whose flows may still drain.
#[test]
fn a_tag_added_back_from_a_state_file_gets_a_fresh_version() {
    let spec_of = |text: &str| compile(&Source::new("fixture.toml", text)).unwrap().spec;
    let mut state = DeployedState::initial(spec_of(BASE));
    let changed = edit(&[("backup-secret-1", "backup-secret-2")]);
    // Everything up to backup, then the balancer over primary alone.
    let without = BASE.split("[[outbound]]\ntag = \"backup\"").next().unwrap().to_owned()
        + "[[balancer]]\ntag = \"proxy\"\noutbounds = [\"primary\"]\n\n[route]\ndefault = \"proxy\"\n";
    for next in [changed.as_str(), without.as_str()] {
        let spec = spec_of(next);
        let p = plan(&state, &spec);
        state = state.apply(&p, spec);
    }
    assert_eq!(state.epoch, 2);
    let old = write("added_back-state.bin", &state.encode());
    let new = write("added_back-new.toml", BASE.as_bytes());
    snapshot("added_back", &old, &new, false);
}

#[test]
fn the_detailed_exitcode_is_0_without_changes_2_with_and_1_on_error() {
    let base = write("exit-base.toml", BASE.as_bytes());
    let changed = write(
        "exit-changed.toml",
        edit(&[("port = 1080", "port = 1081")]).as_bytes(),
    );
    let broken = write(
        "exit-broken.toml",
        edit(&[(
            "outbounds = [\"primary\", \"backup\"]",
            "outbounds = [\"primery\"]",
        )])
        .as_bytes(),
    );
    let flag = ["--detailed-exitcode"];
    assert_eq!(etc_plan(&base, &base, &flag).code, 0);
    assert_eq!(etc_plan(&base, &changed, &flag).code, 2);
    assert_eq!(
        etc_plan(&base, &changed, &[]).code,
        0,
        "without the flag a change is not an error"
    );
    let error = etc_plan(&base, &broken, &flag);
    assert_eq!(error.code, 1);
    assert!(error.stderr.contains("primery"), "{}", error.stderr);
    assert!(error.stdout.is_empty());
}

#[test]
fn a_plan_bin_counts_as_deployed_at_v1() {
    let source = Source::new("fixture.toml", BASE);
    let compiled = compile(&source).unwrap();
    let bin = write("bin-old.bin", &compiled.plan_bytes(&source));
    let toml = write("bin-old.toml", BASE.as_bytes());
    let new = write(
        "bin-new.toml",
        edit(&[("primary-secret-1", "primary-secret-2")]).as_bytes(),
    );
    let from_bin = etc_plan(&bin, &new, &["--format", "json"]);
    let from_toml = etc_plan(&toml, &new, &["--format", "json"]);
    assert_eq!(from_bin.code, 0, "{}", from_bin.stderr);
    assert_eq!(from_bin.stdout, from_toml.stdout);
}

#[test]
fn a_corrupt_state_file_is_one_line_that_says_what_it_found() {
    let spec = compile(&Source::new("fixture.toml", BASE)).unwrap().spec;
    let good = write("good-state.bin", &DeployedState::initial(spec).encode());
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[8] = 9;
    let old = write("corrupt-state.bin", &bytes);
    let new = write("corrupt-new.toml", BASE.as_bytes());
    let run = etc_plan(&old, &new, &[]);
    assert_eq!(
        run.code, 2,
        "a file that does not load is an I/O error, as in etc inspect"
    );
    assert_eq!(
        run.stderr,
        format!(
            "error: {}: state format version 9 is not supported: this build reads version 3\n",
            old.display()
        )
    );
    let as_new = etc_plan(&new, &good, &["--detailed-exitcode"]);
    assert_eq!(as_new.code, 1, "under --detailed-exitcode every error is 1");
    assert!(as_new
        .stderr
        .contains("is a state file: NEW must be a configuration or a plan.bin"));
}

#[test]
fn an_invalid_new_config_is_reported_without_quoting_its_secrets() {
    let old = write("quote-old.toml", BASE.as_bytes());
    // The broken key sits right next to a password line.
    let new = write(
        "quote-new.toml",
        edit(&[(
            "password = \"primary-secret-1\"",
            "password = \"primary-secret-1\"\npasword = 1",
        )])
        .as_bytes(),
    );
    let run = etc_plan(&old, &new, &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("error[E0002]: unknown field `pasword`"),
        "{}",
        run.stderr
    );
}
