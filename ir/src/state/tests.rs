use super::*;
use crate::plan::plan;
use crate::testing::*;

fn state() -> DeployedState {
    let spec = spec(
        vec![freedom("direct"), trojan("a", "a.example", "hunter2")],
        vec![balancer("proxy", &["a"])],
    );
    let initial = DeployedState::initial(spec.clone());
    let mut next = spec;
    next.outbounds[1] = trojan("a", "a.example", "changed");
    let p = plan(&initial, &next);
    initial.apply(&p, next)
}

#[test]
fn the_initial_state_has_everything_at_v1_and_epoch_0() {
    let s = DeployedState::initial(spec(
        vec![freedom("direct")],
        vec![balancer("lb", &["direct"])],
    ));
    assert_eq!(s.epoch, 0);
    assert_eq!(s.versions.target("direct"), Some(1));
    assert_eq!(s.versions.target("lb"), Some(1));
    assert_eq!(s.versions.inbound("socks-in"), Some(1));
    assert_eq!(s.versions.dns, 1);
}

#[test]
fn apply_records_built_versions_and_advances_the_epoch() {
    let s = state();
    assert_eq!(s.epoch, 1);
    assert_eq!(s.versions.target("a"), Some(2));
    assert_eq!(s.versions.target("proxy"), Some(2));
    assert_eq!(s.versions.target("direct"), Some(1));
}

#[test]
fn a_state_round_trips() {
    let s = state();
    assert_eq!(DeployedState::decode(&s.encode()), Ok(s));
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let bytes = state().encode();
    for len in 0..bytes.len() {
        assert!(
            DeployedState::decode(&bytes[..len]).is_err(),
            "length {len} decoded"
        );
    }
}

#[test]
fn a_plan_file_is_not_a_state_file() {
    let err = DeployedState::decode(b"ETEMPLAN\x01\x00rest").unwrap_err();
    assert_eq!(
        err.to_string(),
        "not a state file: expected the magic bytes \"ETEMSTAT\", found \"ETEMPLAN\""
    );
}

#[test]
fn another_format_version_says_what_it_found_and_needs() {
    let mut bytes = state().encode();
    bytes[8] = 9;
    assert_eq!(
        DeployedState::decode(&bytes).unwrap_err().to_string(),
        "state format version 9 is not supported: this build reads version 3"
    );
}

#[test]
fn a_flipped_byte_is_caught_by_the_digest() {
    let mut bytes = state().encode();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    assert_eq!(
        DeployedState::decode(&bytes),
        Err(StateError::DigestMismatch)
    );
}

#[test]
fn a_running_tag_without_a_version_is_refused() {
    let mut s = state();
    s.versions.targets.remove("a");
    assert_eq!(
        DeployedState::decode(&s.encode()).unwrap_err().to_string(),
        "corrupt state file: the running outbound a has no version"
    );
}

#[test]
fn random_bodies_never_panic() {
    let good = state().encode();
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    for _ in 0..2_000 {
        let len = rng.below(300) as usize;
        let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut bytes = good[..10].to_vec();
        bytes.extend_from_slice(&crate::encode::sha256(&body));
        bytes.extend_from_slice(&body);
        let _ = DeployedState::decode(&bytes);
    }
}

#[test]
fn a_counter_that_cannot_advance_is_refused() {
    let mut s = state();
    s.versions.targets.insert("old".into(), u32::MAX);
    assert_eq!(
        DeployedState::decode(&s.encode()),
        Err(StateError::Exhausted)
    );
}
