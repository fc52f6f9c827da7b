//! How `etc plan` shows a plan: a human preview in the manner of
//! `terraform plan`, and versioned JSON for CI.
//!
//! Both are rendered from `Plan::steps` alone and the summary is counted from
//! the same list. Neither prints a value from the spec: tags, kinds,
//! versions, policies and reasons (which name fields, never their values), so
//! no secret can reach the output.

use std::fmt::Write;

use etemenanki_ir::plan::{Action, Plan, Reason, Step};
use serde::Serialize;

/// The version of the JSON schema below; bumped on any incompatible change.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// The symbol a step is shown with: `+` new, `~` rebuilt, `=` reused, `-`
/// drained or removed.
pub fn symbol(step: &Step) -> char {
    match step.action {
        Action::Build { from: None } => '+',
        Action::Build { from: Some(_) } => '~',
        Action::Reuse => '=',
        Action::Drain(_) | Action::Remove => '-',
    }
}

fn versions(step: &Step) -> String {
    match step.action {
        Action::Build { from: Some(from) } => format!("v{from} -> v{}", step.version),
        _ => format!("v{}", step.version),
    }
}

fn name(step: &Step) -> String {
    match step.tag.is_empty() {
        true => step.kind.name().to_owned(),
        false => format!("{} {}", step.kind.name(), step.tag),
    }
}

fn reason(step: &Step) -> String {
    match step.action {
        Action::Drain(policy) => format!("{} (drain: {policy})", step.reason),
        _ => step.reason.to_string(),
    }
}

/// The human preview. Unchanged resources are folded into one count unless
/// `verbose`.
pub fn human(plan: &Plan, verbose: bool) -> String {
    let shown: Vec<&Step> = plan
        .steps
        .iter()
        .filter(|s| verbose || !(s.action == Action::Reuse && s.reason == Reason::Unchanged))
        .collect();
    let folded = plan.steps.len() - shown.len();
    let rows: Vec<(char, String, String, String)> = shown
        .iter()
        .map(|s| (symbol(s), name(s), versions(s), reason(s)))
        .collect();
    let name_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let version_width = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Applying this plan makes epoch {} (deployed: epoch {}).\n",
        plan.epoch,
        plan.epoch - 1
    );
    for (symbol, name, versions, reason) in &rows {
        let _ = writeln!(
            out,
            "  {symbol} {name:name_width$}  {versions:version_width$}  {reason}"
        );
    }
    if folded > 0 {
        let _ = writeln!(out, "  = {folded} unchanged (--verbose lists them)");
    }
    if plan.publishes() {
        let reasons: Vec<String> = plan.publish.iter().map(|r| r.to_string()).collect();
        let _ = writeln!(out, "  ~ route plane republished: {}", reasons.join(", "));
    }
    let _ = writeln!(out, "\n{}", plan.summary());
    out
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    format_version: u32,
    epoch: u64,
    steps: Vec<JsonStep<'a>>,
    publish: bool,
    publish_reasons: Vec<String>,
    summary: JsonSummary,
}

#[derive(Serialize)]
struct JsonStep<'a> {
    action: &'static str,
    kind: &'static str,
    tag: &'a str,
    version: u32,
    from_version: Option<u32>,
    policy: Option<String>,
    reason: String,
}

#[derive(Serialize)]
struct JsonSummary {
    build: usize,
    reuse: usize,
    drain: usize,
    remove: usize,
    changed: bool,
}

/// The JSON preview, pretty-printed; its schema is in docs/plan.md.
pub fn json(plan: &Plan) -> String {
    let summary = plan.summary();
    let doc = JsonPlan {
        format_version: JSON_FORMAT_VERSION,
        epoch: plan.epoch,
        steps: plan
            .steps
            .iter()
            .map(|s| JsonStep {
                action: match s.action {
                    Action::Build { .. } => "build",
                    Action::Reuse => "reuse",
                    Action::Drain(_) => "drain",
                    Action::Remove => "remove",
                },
                kind: s.kind.name(),
                tag: &s.tag,
                version: s.version,
                from_version: match s.action {
                    Action::Build { from } => from,
                    _ => None,
                },
                policy: match s.action {
                    Action::Drain(policy) => Some(policy.to_string()),
                    _ => None,
                },
                reason: s.reason.to_string(),
            })
            .collect(),
        publish: plan.publishes(),
        publish_reasons: plan.publish.iter().map(|r| r.to_string()).collect(),
        summary: JsonSummary {
            build: summary.build,
            reuse: summary.reuse,
            drain: summary.drain,
            remove: summary.remove,
            changed: summary.changed,
        },
    };
    serde_json::to_string_pretty(&doc).expect("a plan always serializes")
}
