use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::spec::*;
use crate::state::DeployedState;
use crate::testing::*;

/// The step for `tag` of `kind` with this action shape (build, reuse, drain or
/// remove), if the plan has exactly one.
fn step<'p>(plan: &'p Plan, kind: Kind, tag: &str, action: &str) -> Option<&'p Step> {
    let found: Vec<&Step> = plan
        .steps
        .iter()
        .filter(|s| s.kind == kind && s.tag == tag)
        .filter(|s| {
            action
                == match s.action {
                    Action::Build { .. } => "build",
                    Action::Reuse => "reuse",
                    Action::Drain(_) => "drain",
                    Action::Remove => "remove",
                }
        })
        .collect();
    assert!(found.len() <= 1, "{found:?}");
    found.first().copied()
}

fn built(plan: &Plan, kind: Kind, tag: &str) -> (u32, Option<u32>, String) {
    let s =
        step(plan, kind, tag, "build").unwrap_or_else(|| panic!("no build of {tag}: {plan:#?}"));
    let Action::Build { from } = s.action else {
        unreachable!()
    };
    (s.version, from, s.reason.to_string())
}

fn reused(plan: &Plan, kind: Kind, tag: &str) -> u32 {
    step(plan, kind, tag, "reuse")
        .unwrap_or_else(|| panic!("no reuse of {tag}: {plan:#?}"))
        .version
}

fn drains(plan: &Plan) -> Vec<(String, u32, DrainPolicy, String)> {
    plan.steps
        .iter()
        .filter_map(|s| match s.action {
            Action::Drain(p) => Some((s.tag.clone(), s.version, p, s.reason.to_string())),
            _ => None,
        })
        .collect()
}

fn fleet() -> Spec {
    spec(
        vec![
            freedom("direct"),
            blackhole("block"),
            trojan("a", "a.example", "hunter2"),
            trojan("b", "b.example", "hunter2"),
            trojan("c", "c.example", "hunter2"),
        ],
        vec![balancer("proxy", &["a", "b"])],
    )
}

#[test]
fn a_balancer_is_rebuilt_exactly_when_one_of_its_members_is() {
    let state = DeployedState::initial(fleet());

    let mut other = fleet();
    other.outbounds[4] = trojan("c", "c2.example", "hunter2");
    let p = plan(&state, &other);
    assert_eq!(
        built(&p, Kind::Outbound, "c"),
        (2, Some(1), "server changed, sni changed".into())
    );
    assert_eq!(reused(&p, Kind::Balancer, "proxy"), 1);

    let mut member = fleet();
    member.outbounds[2] = trojan("a", "a.example", "correct horse");
    let p = plan(&state, &member);
    assert_eq!(
        built(&p, Kind::Outbound, "a"),
        (2, Some(1), "password changed".into())
    );
    assert_eq!(
        built(&p, Kind::Balancer, "proxy"),
        (2, Some(1), "member a rebuilt".into())
    );
    assert!(p.publishes());
    assert_eq!(p.publish, vec![PublishReason::Targets]);
}

#[test]
fn removing_a_balancer_alone_republishes_the_plane() {
    let state = DeployedState::initial(fleet());
    let mut without = fleet();
    without.balancers.clear();
    let p = plan(&state, &without);
    assert!(p.publishes());
    assert!(drains(&p).is_empty());
    let removed = step(&p, Kind::Balancer, "proxy", "remove").unwrap();
    assert_eq!(
        (removed.version, removed.reason.to_string()),
        (1, "removed".into())
    );
    assert_eq!(p.summary().build, 0);

    let after = state.apply(&p, without);
    assert_eq!(
        after.versions.target("proxy"),
        Some(1),
        "the removed balancer keeps its version"
    );
    let p = plan(&after, &fleet());
    assert_eq!(
        built(&p, Kind::Balancer, "proxy"),
        (2, None, "added back (last deployed as v1)".into())
    );
}

#[test]
fn a_changed_dns_spec_rebuilds_every_outbound_but_blackhole() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.dns = dns([10, 0, 0, 1]);
    let p = plan(&state, &next);
    for tag in ["direct", "a", "b", "c"] {
        assert_eq!(
            built(&p, Kind::Outbound, tag),
            (2, Some(1), "DNS changed".into())
        );
    }
    assert_eq!(reused(&p, Kind::Outbound, "block"), 1);
    assert_eq!(
        built(&p, Kind::Balancer, "proxy"),
        (2, Some(1), "member a rebuilt, member b rebuilt".into())
    );
    assert_eq!(built(&p, Kind::Dns, ""), (2, Some(1), "DNS changed".into()));
    assert_eq!(drains(&p).len(), 4);
    assert_eq!(reused(&p, Kind::Inbound, "socks-in"), 1);
}

#[test]
fn the_dns_target_is_rebuilt_only_with_the_dns_spec() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.outbounds[0] = outbound("direct", OutboundProtocol::Blackhole);
    next.balancers[0].strategy = Strategy::RoundRobin;
    next.inbounds[0].sniff = true;
    next.route = RouteTable::new(next.route.rules().to_vec(), "a".into()).unwrap();
    let p = plan(&state, &next);
    assert_eq!(reused(&p, Kind::Dns, ""), 1);

    next.dns = dns([10, 0, 0, 1]);
    let p = plan(&state, &next);
    assert_eq!(built(&p, Kind::Dns, "").0, 2);
    assert!(
        step(&p, Kind::Dns, "", "drain").is_none(),
        "drains are for outbound versions only"
    );
}

#[test]
fn a_tag_removed_and_added_back_is_built_one_past_its_last_version() {
    let mut state = DeployedState::initial(fleet());
    // Rebuild a twice: v3.
    for password in ["x", "y"] {
        let mut next = fleet();
        next.outbounds[2] = trojan("a", "a.example", password);
        let p = plan(&state, &next);
        state = state.apply(&p, next);
    }
    assert_eq!(state.versions.target("a"), Some(3));

    let mut without = state.spec.clone();
    without.outbounds.retain(|o| o.tag != "a");
    without.balancers[0].members = vec!["b".into()];
    let p = plan(&state, &without);
    assert_eq!(
        drains(&p),
        vec![("a".into(), 3, DrainPolicy::Keep, "removed".into())]
    );
    state = state.apply(&p, without);

    let p = plan(&state, &fleet());
    assert_eq!(
        built(&p, Kind::Outbound, "a"),
        (4, None, "added back (last deployed as v3)".into())
    );
    assert_eq!(p.epoch, 4);
}

#[test]
fn a_balancer_whose_own_spec_changed_is_rebuilt_and_never_drained() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.balancers[0].members = vec!["b".into(), "a".into()];
    next.balancers[0].probe_interval = Duration::from_secs(10);
    let p = plan(&state, &next);
    assert_eq!(
        built(&p, Kind::Balancer, "proxy"),
        (2, Some(1), "members changed, probe interval changed".into())
    );
    assert!(drains(&p).is_empty(), "a balancer is never drained itself");
    assert_eq!(reused(&p, Kind::Outbound, "a"), 1);
    assert!(p.publishes());
}

#[test]
fn an_unchanged_inbound_is_reused_and_a_changed_one_rebuilt() {
    let mut old = fleet();
    old.inbounds.push(socks_in("other", 1081));
    let state = DeployedState::initial(old.clone());

    let mut next = old.clone();
    next.inbounds[1].listen = "127.0.0.1:2080".parse().unwrap();
    let p = plan(&state, &next);
    assert_eq!(reused(&p, Kind::Inbound, "socks-in"), 1);
    assert_eq!(
        built(&p, Kind::Inbound, "other"),
        (2, Some(1), "listen changed".into())
    );
    assert!(!p.publishes(), "an inbound is not on the route plane");

    next.inbounds.remove(1);
    let p = plan(&state, &next);
    assert_eq!(
        step(&p, Kind::Inbound, "other", "remove").unwrap().version,
        1
    );
}

#[test]
fn a_change_of_users_only_keeps_the_inbound_and_any_other_change_rebuilds_it() {
    let trojan_in = |passwords: &[&str], fallback: Option<std::net::SocketAddr>| {
        let mut spec = fleet();
        spec.inbounds.push(InboundSpec {
            protocol: InboundProtocol::Trojan {
                passwords: passwords.iter().map(|p| Secret(p.to_string())).collect(),
                transport: InboundTransport {
                    shape: ServerShape::Tcp,
                    tls: None,
                },
                fallback,
            },
            ..socks_in("trojan-in", 8443)
        });
        spec
    };
    let state = DeployedState::initial(trojan_in(&["alice", "bob"], None));
    let p = plan(&state, &trojan_in(&["alice", "carol"], None));
    let kept = step(&p, Kind::Inbound, "trojan-in", "reuse").expect("reused");
    assert_eq!((kept.version, &kept.reason), (1, &Reason::UsersChanged));
    assert_eq!(
        kept.reason.to_string(),
        "users changed; kept, with its connections"
    );
    assert!(!p.summary().to_string().contains("alice"));

    let p = plan(
        &state,
        &trojan_in(&["alice"], Some("127.0.0.1:80".parse().unwrap())),
    );
    assert_eq!(
        built(&p, Kind::Inbound, "trojan-in"),
        (2, Some(1), "passwords changed, fallback changed".into())
    );
}

#[test]
fn a_ws_inbound_whose_path_or_host_changed_is_rebuilt_saying_which() {
    let ws_in = |path: &str, host: Option<&str>| {
        let mut spec = fleet();
        spec.inbounds.push(InboundSpec {
            protocol: InboundProtocol::Trojan {
                passwords: vec![Secret("alice".to_owned())],
                transport: InboundTransport {
                    shape: ServerShape::Ws {
                        path: path.to_owned(),
                        host: host.map(str::to_owned),
                    },
                    tls: None,
                },
                fallback: None,
            },
            ..socks_in("ws-in", 8443)
        });
        spec
    };
    let state = DeployedState::initial(ws_in("/ws", None));
    for (next, reason) in [
        (ws_in("/ws", Some("cdn.example")), "ws host changed"),
        (ws_in("/other", None), "ws path changed"),
        (
            ws_in("/other", Some("cdn.example")),
            "ws path changed, ws host changed",
        ),
    ] {
        let p = plan(&state, &next);
        assert_eq!(
            built(&p, Kind::Inbound, "ws-in"),
            (2, Some(1), reason.into())
        );
    }
    let p = plan(&state, &ws_in("/ws", None));
    assert_eq!(reused(&p, Kind::Inbound, "ws-in"), 1);
}

#[test]
fn an_inbound_tls_change_is_named_by_what_changed_never_the_key() {
    let tls = |cert: &str, key: &str| ServerTls {
        cert_path: "cert.pem".into(),
        cert_pem: cert.as_bytes().to_vec(),
        key_pem: Secret(key.as_bytes().to_vec()),
        alpn: vec![],
    };
    let with_tls = |tls: Option<ServerTls>| {
        let mut spec = fleet();
        spec.inbounds.push(InboundSpec {
            protocol: InboundProtocol::Http {
                accounts: vec![],
                tls,
            },
            ..socks_in("https", 8443)
        });
        spec
    };
    let reason = |old: Option<ServerTls>, new: Option<ServerTls>| {
        let state = DeployedState::initial(with_tls(old));
        built(&plan(&state, &with_tls(new)), Kind::Inbound, "https").2
    };
    let plain_key = "PRIVATE-KEY-hunter2";
    assert_eq!(reason(None, Some(tls("a", plain_key))), "tls changed");
    assert_eq!(reason(Some(tls("a", plain_key)), None), "tls changed");
    assert_eq!(
        reason(Some(tls("a", plain_key)), Some(tls("b", plain_key))),
        "certificate changed"
    );
    let rekeyed = reason(
        Some(tls("a", plain_key)),
        Some(tls("a", "PRIVATE-KEY-s3cr3t")),
    );
    assert_eq!(rekeyed, "private key changed");
    let mut h2 = tls("a", plain_key);
    h2.alpn = vec!["h2".into()];
    assert_eq!(reason(Some(tls("a", plain_key)), Some(h2)), "alpn changed");

    let state = DeployedState::initial(with_tls(Some(tls("a", plain_key))));
    let p = plan(&state, &with_tls(Some(tls("a", "PRIVATE-KEY-s3cr3t"))));
    let everything = format!("{p:?} {}", p.summary());
    assert!(
        !everything.contains("PRIVATE-KEY"),
        "a key leaked: {everything}"
    );
}

#[test]
fn a_changed_outbound_is_drained_with_the_new_policy_and_a_removed_one_with_its_own() {
    let mut old = fleet();
    old.outbounds[3].drain = DrainPolicy::Close;
    let state = DeployedState::initial(old);

    let mut next = fleet();
    next.outbounds[2] = trojan("a", "a.example", "changed");
    next.outbounds[2].drain = DrainPolicy::CloseAfter(Duration::from_secs(30));
    next.outbounds.remove(3);
    next.balancers[0].members = vec!["a".into()];
    let p = plan(&state, &next);
    assert_eq!(
        drains(&p),
        vec![
            (
                "a".into(),
                1,
                DrainPolicy::CloseAfter(Duration::from_secs(30)),
                "replaced by v2".into()
            ),
            ("b".into(), 1, DrainPolicy::Close, "removed".into()),
        ]
    );
    assert_eq!(
        p.summary().to_string(),
        "Plan: 2 to build, 5 reused, 2 to drain (1 close after 30s, 1 close); route plane republished"
    );
}

#[test]
fn a_drain_policy_change_alone_is_not_a_rebuild() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.outbounds[2].drain = DrainPolicy::Close;
    let p = plan(&state, &next);
    assert_eq!(reused(&p, Kind::Outbound, "a"), 1);
    assert_eq!(
        step(&p, Kind::Outbound, "a", "reuse")
            .unwrap()
            .reason
            .to_string(),
        "unchanged; drain policy keep -> close"
    );
    assert!(!p.publishes());
    assert!(
        p.has_changes(),
        "the next drain of a will close: the apply changes something"
    );
}

#[test]
fn reasons_name_what_changed_never_a_secret() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.outbounds[2] = trojan("a", "a.example", "s3cr3t-new");
    next.outbounds[3] = vless("b", "b.example", 7);
    let OutboundProtocol::Trojan { upstream, .. } = &mut next.outbounds[4].protocol else {
        unreachable!()
    };
    upstream.transport.shape = StreamShape::Ws {
        path: "/ws".into(),
        host: "c.example".into(),
        early_data: None,
    };
    upstream.transport.address_family = AddressFamily::Ipv4Only;
    let p = plan(&state, &next);
    assert_eq!(built(&p, Kind::Outbound, "a").2, "password changed");
    assert_eq!(
        built(&p, Kind::Outbound, "b").2,
        "protocol changed (trojan -> vless)"
    );
    assert_eq!(
        built(&p, Kind::Outbound, "c").2,
        "transport changed, address family changed"
    );
    let everything = format!("{p:?} {}", p.summary());
    for secret in ["hunter2", "s3cr3t-new"] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }

    let mut vmess = fleet();
    vmess.outbounds[2] = vless("a", "a.example", 1);
    let state = DeployedState::initial(vmess.clone());
    vmess.outbounds[2] = vless("a", "a.example", 2);
    vmess.socket.mark = Some(7);
    let p = plan(&state, &vmess);
    assert_eq!(
        built(&p, Kind::Outbound, "a").2,
        "id changed, socket policy changed"
    );
    assert_eq!(
        built(&p, Kind::Outbound, "direct").2,
        "socket policy changed"
    );
}

#[test]
fn the_route_table_and_limits_republish_the_plane_and_rebuild_nothing() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.route = RouteTable::new(next.route.rules().to_vec(), "proxy".into()).unwrap();
    next.limits.relay_idle_timeout = Duration::from_secs(60);
    let p = plan(&state, &next);
    assert_eq!(p.publish, vec![PublishReason::Route, PublishReason::Limits]);
    assert_eq!(p.summary().build, 0);
    assert!(p.steps.iter().all(|s| s.action == Action::Reuse));
}

#[test]
fn a_changed_domain_strategy_republishes_the_plane() {
    let state = DeployedState::initial(fleet());
    let mut next = fleet();
    next.route = next
        .route
        .clone()
        .with_domain_strategy(crate::route::DomainStrategy::IpIfNonMatch);
    assert_eq!(plan(&state, &next).publish, vec![PublishReason::Route]);
}

#[test]
fn a_rule_that_only_moved_in_the_source_is_no_route_change() {
    let mut old = fleet();
    let rule = crate::route::Rule {
        target: "direct".into(),
        line: 10,
        ..Default::default()
    };
    let default = old.route.default().to_owned();
    let table =
        |rule: &crate::route::Rule| RouteTable::new(vec![rule.clone()], default.clone()).unwrap();
    let mut moved = old.clone();
    old.route = table(&rule);
    let state = DeployedState::initial(old.clone());
    moved.route = table(&crate::route::Rule {
        line: 14,
        ..rule.clone()
    });
    assert!(!plan(&state, &moved).has_changes());
    moved.route = table(&crate::route::Rule {
        line: 14,
        target: "block".into(),
        ..rule
    });
    assert_eq!(plan(&state, &moved).publish, vec![PublishReason::Route]);
}

#[test]
fn the_summary_counts_the_steps_it_sums_up() {
    let mut rng = Rng::new(7);
    for _ in 0..200 {
        let state = DeployedState::initial(random_spec(&mut rng));
        let p = plan(&state, &random_spec(&mut rng));
        let s = p.summary();
        assert_eq!(s.build + s.reuse + s.drain + s.remove, p.steps.len());
        assert_eq!(
            s.drain_policies.iter().map(|(_, n)| n).sum::<usize>(),
            s.drain
        );
    }
}

// ---------------------------------------------------------------- properties

#[test]
fn planning_a_spec_against_itself_reuses_everything_and_publishes_nothing() {
    let mut rng = Rng::new(1);
    for _ in 0..300 {
        let spec = random_spec(&mut rng);
        let p = plan(&DeployedState::initial(spec.clone()), &spec);
        assert!(p
            .steps
            .iter()
            .all(|s| s.action == Action::Reuse && s.reason == Reason::Unchanged));
        assert!(!p.publishes());
        assert!(!p.has_changes());
    }
}

#[test]
fn planning_is_deterministic() {
    let mut rng = Rng::new(2);
    for _ in 0..300 {
        let state = DeployedState::initial(random_spec(&mut rng));
        let next = random_spec(&mut rng);
        assert_eq!(plan(&state, &next), plan(&state.clone(), &next.clone()));
    }
}

#[test]
fn applying_a_plan_then_planning_again_is_a_no_op() {
    let mut rng = Rng::new(3);
    let mut state = DeployedState::initial(random_spec(&mut rng));
    for _ in 0..300 {
        let next = random_spec(&mut rng);
        let p = plan(&state, &next);
        state = state.apply(&p, next.clone());
        let again = plan(&state, &next);
        assert!(!again.has_changes(), "{again:#?}");
    }
}

/// Across a long run of applies, no (tag, version) of a target is built twice
/// and drains and removals name only versions that were running.
#[test]
fn no_version_is_ever_built_twice() {
    let mut rng = Rng::new(4);
    let mut state = DeployedState::initial(random_spec(&mut rng));
    let mut ever: BTreeSet<(String, u32)> = state.versions.targets.clone().into_iter().collect();
    for _ in 0..500 {
        let next = random_spec(&mut rng);
        let p = plan(&state, &next);
        for s in &p.steps {
            match s.action {
                Action::Build { from } if s.kind != Kind::Dns && s.kind != Kind::Inbound => {
                    assert!(
                        ever.insert((s.tag.clone(), s.version)),
                        "{} v{} built twice",
                        s.tag,
                        s.version
                    );
                    if let Some(from) = from {
                        assert_eq!(from + 1, s.version);
                    }
                }
                Action::Drain(_) => {
                    assert_eq!(s.kind, Kind::Outbound);
                    assert_eq!(state.versions.target(&s.tag), Some(s.version));
                    assert!(state.spec.outbound(&s.tag).is_some());
                }
                _ => {}
            }
        }
        state = state.apply(&p, next);
    }
}
