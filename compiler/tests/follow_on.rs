//! A value that failed to lower is reported once, and feeds none of the
//! analyses after it: no rule "never matches" because an earlier one lost a
//! bad CIDR, no outbound is "unrouted" because the rule naming it had a bad
//! category, no balancer member "cannot be probed" because its protocol was
//! misspelt.

use etemenanki_compiler::{compile, Source};

/// The code and the text under the span of every diagnostic.
fn found(path: &str, text: &str) -> Vec<(&'static str, String)> {
    let diags = match compile(&Source::new(path, text)) {
        Ok(compiled) => compiled.warnings,
        Err(diags) => diags,
    };
    diags
        .iter()
        .map(|d| (d.code, text[d.span.clone()].to_owned()))
        .collect()
}

const OUTBOUNDS: &str = r#"
[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "block"
protocol = "blackhole"
"#;

fn with_rules(rules: &str) -> String {
    format!("{OUTBOUNDS}\n[route]\ndefault = \"direct\"\n{rules}")
}

#[test]
fn a_rule_that_lost_a_bad_value_shadows_no_rule_after_it() {
    for bad in [
        r#"cidr = ["10.0.0.0/33"]"#,
        r#"source_cidr = ["not-a-cidr"]"#,
        r#"network = "tcpp""#,
    ] {
        let text = with_rules(&format!(
            "[[route.rule]]\noutbound = \"block\"\n{bad}\n\n[[route.rule]]\noutbound = \"block\"\ncidr = [\"10.1.0.0/16\"]\n"
        ));
        let found = found("c.toml", &text);
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert!(found[0].0.starts_with("E0"), "{bad}: {found:?}");
    }
}

#[test]
fn an_outbound_named_only_by_a_rule_with_a_bad_value_is_not_unrouted() {
    for bad in [
        r#"geoip = ["nowhere"]"#,
        r#"geosite = ["nowhere"]"#,
        r#"domain = ["bad domain"]"#,
        r#"domain_suffix = ["bad..suffix"]"#,
        r#"domain_keyword = [""]"#,
    ] {
        let text = with_rules(&format!("[[route.rule]]\noutbound = \"block\"\n{bad}\n"));
        let found = found("c.toml", &text);
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert!(
            found[0].0.starts_with("E07") || found[0].0 == "E0309",
            "{bad}: {found:?}"
        );
    }
}

#[test]
fn an_et_outbound_without_server_is_told_only_of_server() {
    let found = found("c.et", "outbound px socks {}\n");
    assert_eq!(found, [("E0303", "outbound px socks {}".to_owned())]);
    let d = compile(&Source::new("c.et", "outbound px socks {}\n")).unwrap_err();
    assert_eq!(d[0].message, "a socks outbound needs `server`");
    assert_eq!(d[0].help.as_deref(), Some("write `server = <host>:<port>`"));
    // TOML has both keys, and is told of both.
    let toml = "[[outbound]]\ntag = \"px\"\nprotocol = \"socks\"\n";
    let codes: Vec<_> = found_codes("c.toml", toml);
    assert_eq!(codes, ["E0303", "E0303"]);
}

fn found_codes(path: &str, text: &str) -> Vec<&'static str> {
    found(path, text)
        .into_iter()
        .map(|(code, _)| code)
        .collect()
}

#[test]
fn a_balancer_member_with_a_misspelt_protocol_is_not_also_unprobeable() {
    let text = r#"
outbound a trojn { server = a.example.com:443  password = "x" }
outbound b trojan { server = b.example.com:443  password = "x"  tls {} }
balancer proxy [a, b]
route { default -> proxy }
"#;
    assert_eq!(
        found("c.et", text),
        [("E0301", "trojn".to_owned())],
        "only the protocol is wrong"
    );
}

#[test]
fn an_inbound_with_a_bad_listen_address_conflicts_with_nothing() {
    let text = format!(
        "{OUTBOUNDS}\n[[inbound]]\ntag = \"a\"\nprotocol = \"socks\"\nlisten = \"localhost\"\nport = 1080\n\n[[inbound]]\ntag = \"b\"\nprotocol = \"socks\"\nport = 1080\n"
    );
    assert_eq!(found_codes("c.toml", &text), ["W0002", "E0307"]);
}

#[test]
fn rules_keep_their_numbers_when_one_before_them_failed() {
    let text = with_rules(
        "[[route.rule]]\noutbound = \"block\"\ncidr = [\"bad\"]\n\n\
         [[route.rule]]\noutbound = \"block\"\ncidr = [\"10.0.0.0/8\"]\n\n\
         [[route.rule]]\noutbound = \"direct\"\ncidr = [\"10.1.0.0/16\"]\n",
    );
    let diags = compile(&Source::new("c.toml", text)).unwrap_err();
    let shadowed = diags
        .iter()
        .find(|d| d.code == "W0001")
        .expect("a shadowed rule");
    assert!(
        shadowed
            .message
            .starts_with("rule 3 can never match: rule 2 (line"),
        "{}",
        shadowed.message
    );
}
