//! The route table's domain strategy in both front ends: the value reaches
//! the spec, the default is `as_is`, and a misspelt one is an error with a
//! suggestion, pinned by snapshots under snapshots/diagnostics/.

use etemenanki_compiler::render::{self, Style};
use etemenanki_compiler::{codes, compile, Source};
use etemenanki_ir::route::DomainStrategy;

const TOML: &str = r#"[[outbound]]
tag = "direct"
protocol = "freedom"

[[outbound]]
tag = "block"
protocol = "blackhole"

[route]
domain_strategy = "STRATEGY"

[[route.rule]]
outbound = "block"
geoip = ["private"]
"#;

const ET: &str = "outbound direct freedom {}
outbound block blackhole {}

route {
  domain_strategy = STRATEGY
  geoip private -> block
  default -> direct
}
";

fn strategy_of(path: &str, text: &str) -> DomainStrategy {
    match compile(&Source::new(path, text)) {
        Ok(compiled) => compiled.spec.route.domain_strategy(),
        Err(diags) => panic!("does not compile: {diags:#?}"),
    }
}

#[test]
fn both_front_ends_carry_the_domain_strategy_into_the_spec() {
    for strategy in DomainStrategy::ALL {
        let name = strategy.name();
        assert_eq!(
            strategy_of("c.toml", &TOML.replace("STRATEGY", name)),
            strategy
        );
        assert_eq!(strategy_of("c.et", &ET.replace("STRATEGY", name)), strategy);
    }
}

#[test]
fn without_a_domain_strategy_the_table_is_as_is() {
    let toml = TOML.replace("domain_strategy = \"STRATEGY\"\n", "");
    assert_eq!(strategy_of("c.toml", &toml), DomainStrategy::AsIs);
    let et = ET.replace("  domain_strategy = STRATEGY\n", "");
    assert_eq!(strategy_of("c.et", &et), DomainStrategy::AsIs);
}

fn rendered_error(path: &str, text: &str) -> String {
    let source = Source::new(path, text);
    let diags = compile(&source).expect_err("a misspelt strategy is an error");
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].code, codes::INVALID_VALUE);
    render::human(&source, &diags, Style::plain())
}

#[test]
fn a_misspelt_domain_strategy_is_an_error_with_a_suggestion() {
    let toml = rendered_error(
        "fixtures/c.toml",
        &TOML.replace("STRATEGY", "ip_if_nonmatch"),
    );
    let et = rendered_error("fixtures/c.et", &ET.replace("STRATEGY", "IPOnDemand"));
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots/diagnostics"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("domain_strategy_misspelt_toml", toml);
        insta::assert_snapshot!("domain_strategy_xray_spelling_et", et);
    });
}
