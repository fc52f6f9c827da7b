//! The real `etc` binary: exit codes, output formats, plan files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs etc, for at most 30 s: a command that hangs fails its test.
fn etc(args: &[&str]) -> Output {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_etc"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etc runs");
    let pid = child.id();
    let (done, output) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match output.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(output) => output.expect("etc runs"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("etc {args:?} ran past 30 s");
        }
    }
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("etc-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const VALID: &str = r#"
[[inbound]]
tag = "socks-in"
protocol = "socks"
port = 1080

[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "proxy"
protocol = "trojan"
server = "proxy.example.com"
port = 443

[outbound.stream]
network = "tls"

[outbound.settings]
password = "correct-horse-battery-staple"

[route]
default = "proxy"

[[route.rule]]
outbound = "direct"
cidr = ["10.0.0.0/8"]
"#;

#[test]
fn check_exits_0_when_valid_1_when_invalid_2_when_unreadable() {
    let dir = temp("exit");
    let good = dir.join("good.toml");
    std::fs::write(&good, VALID).unwrap();
    assert_eq!(
        etc(&["check", good.to_str().unwrap()]).status.code(),
        Some(0)
    );
    assert_eq!(
        etc(&["check", &fixture("E0201.toml")]).status.code(),
        Some(1)
    );
    assert_eq!(etc(&["check", "/no/such/file.toml"]).status.code(), Some(2));
    assert_eq!(
        etc(&["check"]).status.code(),
        Some(2),
        "no file is a usage error"
    );
}

#[test]
fn deny_warnings_turns_a_warning_into_a_failure() {
    let warned = fixture("W0002.toml");
    assert_eq!(etc(&["check", &warned]).status.code(), Some(0));
    assert_eq!(
        etc(&["check", "--deny-warnings", &warned]).status.code(),
        Some(1)
    );
}

#[test]
fn json_output_is_one_versioned_document() {
    let out = etc(&["check", "--format", "json", &fixture("E0202.toml")]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["format_version"], 1);
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "E0202");
    assert_eq!(d["severity"], "error");
    assert_eq!(
        d["message"],
        "balancer proxy references unknown outbound tag: backup"
    );
    assert_eq!(d["line"], 9);
    assert_eq!(d["column"], 25);
    assert!(d["file"].as_str().unwrap().ends_with("E0202.toml"));
}

#[test]
fn human_output_has_no_colour_under_no_color() {
    let out = etc(&["check", &fixture("E0103.toml")]);
    let text = String::from_utf8(out.stderr).unwrap();
    assert!(text.contains("route references unknown outbound tag: prxy"));
    assert!(!text.contains('\u{1b}'), "escape codes under NO_COLOR");
}

#[test]
fn build_writes_a_private_plan_that_decodes_to_the_compiled_spec() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp("build");
    let config = dir.join("c.toml");
    std::fs::write(&config, VALID).unwrap();
    let plan = dir.join("plan.bin");
    let out = etc(&[
        "build",
        config.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::metadata(&plan).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let decoded = etemenanki_ir::encode::decode(&std::fs::read(&plan).unwrap()).unwrap();
    let source = etemenanki_compiler::Source::new(config.display().to_string(), VALID);
    assert_eq!(
        decoded.spec,
        etemenanki_compiler::compile(&source).unwrap().spec
    );
    assert_eq!(
        decoded.source_digest,
        etemenanki_ir::encode::sha256(VALID.as_bytes())
    );
}

#[test]
fn inspect_masks_secrets_in_both_formats() {
    let dir = temp("inspect");
    let config = dir.join("c.toml");
    std::fs::write(&config, VALID).unwrap();
    let plan = dir.join("plan.bin");
    etc(&[
        "build",
        config.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    for format in ["human", "json"] {
        let out = etc(&["inspect", plan.to_str().unwrap(), "--format", format]);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("proxy.example.com"), "{format}: {text}");
        assert!(
            !text.contains("correct-horse"),
            "{format} leaks the password"
        );
    }
}

#[test]
fn inspect_refuses_a_truncated_plan_with_one_line() {
    let dir = temp("truncated");
    let plan = dir.join("plan.bin");
    std::fs::write(&plan, b"ETEMPLAN\x01").unwrap();
    let out = etc(&["inspect", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stderr).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("truncated plan"), "{text}");
}

#[test]
fn explain_prints_the_long_text_of_a_code() {
    let out = etc(&["explain", "E0203"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("TCP connect"));
    assert_eq!(etc(&["explain", "E9999"]).status.code(), Some(2));
}

/// `etc inspect` of a configuration under examples/, pinned as `snapshot`.
fn assert_inspect_snapshot(example: &str, snapshot: &str) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let plan = temp(&format!("inspect-{snapshot}")).join("plan.bin");
    let built = etc(&[
        "build",
        example.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(
        built.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = etc(&["inspect", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots/inspect"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(snapshot, String::from_utf8(out.stdout).unwrap());
    });
}

/// A valid configuration whose inline secrets sit beside a warning (an
/// outbound nothing routes to), one of them written without quotes where
/// TOML reads a number.
const SECRET_BESIDE_A_WARNING: &str = r#"
[[outbound]]
tag = "proxy"
protocol = "trojan"
server = "proxy.example.com"
port = 443
[outbound.stream]
network = "tls"
[outbound.settings]
password = "correct-horse-battery-staple"

[[outbound]]
tag = "unused"
settings = { user = "alice", pass = "tr0ub4dor-and-3" }
protocol = "socks"
server = "socks.example.com"
port = 1080
"#;

#[test]
fn a_secret_value_never_appears_in_check_or_build_output() {
    let dir = temp("secret-output");
    let config = dir.join("c.toml");
    std::fs::write(&config, SECRET_BESIDE_A_WARNING).unwrap();
    let config = config.to_str().unwrap();
    let plan = dir.join("plan.bin");
    let runs = [
        etc(&["check", config]),
        etc(&["check", "--format", "json", config]),
        etc(&["build", config, "-o", plan.to_str().unwrap()]),
    ];
    for out in runs {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("nothing routes to outbound unused"), "{text}");
        for secret in ["correct-horse", "tr0ub4dor"] {
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
    }
}

#[test]
fn a_secret_written_without_quotes_is_never_echoed_by_any_command() {
    let dir = temp("unquoted-secret");
    let et = dir.join("c.et");
    std::fs::write(
        &et,
        "outbound proxy trojan {\n  server = proxy.example.com:443\n  password = hunter2x\n  tls {}\n}\n",
    )
    .unwrap();
    let toml = dir.join("c.toml");
    std::fs::write(
        &toml,
        SECRET_BESIDE_A_WARNING.replace("\"correct-horse-battery-staple\"", "987654321"),
    )
    .unwrap();
    for (config, secret, kind) in [(&et, "hunter2x", "name"), (&toml, "987654321", "integer")] {
        let config = config.to_str().unwrap();
        let runs = [
            etc(&["check", config]),
            etc(&["check", "--format", "json", config]),
            etc(&["plan", "--from", config, config]),
            etc(&["plan", "--format", "json", "--from", config, config]),
            etc(&["route", config, "tcp", "example.com:443"]),
        ];
        for out in runs {
            assert_eq!(out.status.code(), Some(1));
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                text.contains(&format!("invalid type: {kind}, expected")),
                "{text}"
            );
            assert!(!text.contains(secret), "{secret} printed:\n{text}");
        }
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::process::Stdio;
    // Far more than a pipe holds, so writing fails once the reader is gone
    // whenever it goes.
    let config: String = (0..3000)
        .map(|n| format!("[[outbound]]\ntag = \"o{n}\"\nprotocol = \"freedom\"\n\n"))
        .collect();
    let path = temp("closed-reader").join("many.toml");
    std::fs::write(&path, config).unwrap();
    for (format, stdout) in [("json", true), ("human", false)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_etc"))
            .args(["check", "--format", format, path.to_str().unwrap()])
            .env("NO_COLOR", "1")
            .stdout(if stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .spawn()
            .expect("etc runs");
        let report = if stdout {
            drop(child.stdout.take());
            child.stderr.take()
        } else {
            drop(child.stderr.take());
            None
        };
        let status = child.wait().unwrap();
        let mut said = String::new();
        if let Some(mut stderr) = report {
            std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
        }
        assert_eq!(status.code(), Some(0), "{format}: {said}");
        assert!(said.is_empty(), "{format}: {said}");
    }
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo runs");
}

#[test]
fn a_secret_file_that_is_a_fifo_or_a_device_is_refused_at_once() {
    let dir = temp("secret-fifo");
    mkfifo(&dir.join("fifo"));
    for (reference, why) in [
        ("fifo", "a FIFO is not a regular file"),
        ("/dev/zero", "a character device is not a regular file"),
    ] {
        let config = dir.join("c.et");
        std::fs::write(
            &config,
            format!(
                "outbound p trojan {{\n  server = p.example.com:443\n  password = file(\"{reference}\")\n  tls {{}}\n}}\n"
            ),
        )
        .unwrap();
        let out = etc(&["check", "--format", "json", config.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let d = &doc["diagnostics"][0];
        assert_eq!(d["code"], "E0601");
        assert_eq!(
            d["message"],
            format!("cannot read secret file `{reference}`: {why}")
        );
        assert_eq!(
            (d["line"].as_u64(), d["column"].as_u64()),
            (Some(3), Some(14))
        );
    }
}

#[test]
fn a_configuration_that_is_a_fifo_is_refused_at_once() {
    let fifo = temp("config-fifo").join("c.et");
    mkfifo(&fifo);
    let out = etc(&["check", fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stderr).unwrap();
    assert!(
        text.ends_with("c.et: a FIFO is not a regular file\n"),
        "{text}"
    );
}

#[test]
fn invalid_utf8_is_an_error_at_its_line_and_column() {
    let dir = temp("utf8");
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        b"[[outbound]]\ntag = \"d\xffx\"\nprotocol = \"freedom\"\n",
    )
    .unwrap();
    let out = etc(&["check", "--format", "json", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["diagnostics"][0];
    assert_eq!(d["code"], "E0001");
    assert_eq!(d["message"], "the file is not valid UTF-8");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(2), Some(9))
    );
    let human = etc(&["check", config.to_str().unwrap()]);
    let text = String::from_utf8(human.stderr).unwrap();
    assert!(text.contains("this byte is not UTF-8"), "{text}");
}

#[test]
fn a_state_file_shorter_than_its_header_is_told_by_its_magic() {
    let dir = temp("short-state");
    let config = dir.join("c.toml");
    std::fs::write(&config, VALID).unwrap();
    for (bytes, says) in [
        (
            &b"ETEMS"[..],
            "truncated state file: the header needs 42 bytes, found 5",
        ),
        (
            &b"ETEMPL"[..],
            "truncated plan: the header needs at least 75 bytes, found 6",
        ),
        (
            &b"ETE"[..],
            "truncated plan or state file: 3 bytes, shorter than the 8-byte magic",
        ),
    ] {
        let old = dir.join("state");
        std::fs::write(&old, bytes).unwrap();
        let out = etc(&[
            "plan",
            "--from",
            old.to_str().unwrap(),
            config.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let text = String::from_utf8(out.stderr).unwrap();
        assert_eq!(text, format!("error: {}: {says}\n", old.display()));
    }
}

#[test]
fn inspect_of_every_outbound_protocol_is_pinned() {
    assert_inspect_snapshot("outbounds.toml", "outbounds_human");
}

#[test]
fn inspect_of_every_inbound_protocol_and_its_tls_is_pinned() {
    assert_inspect_snapshot("inbounds.toml", "inbounds_human");
}

#[test]
fn inspect_of_the_dns_service_example_is_pinned() {
    assert_inspect_snapshot("dns-service.toml", "dns_service_human");
}

#[test]
fn route_shows_the_dns_service_as_the_target_of_port_53() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dns-service.et");
    let out = etc(&["route", config.to_str().unwrap(), "udp", "1.1.1.1:53"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("rule 1 (line 23) -> dns (the internal DNS service): "),
        "{text}"
    );
}
