//! The deployed state: what is running, and every version ever handed out.
//!
//! The runtime writes it after every apply; `etc plan` reads it to preview the
//! next one. It is the planner's whole input besides the new spec.
//!
//! ```text
//! magic            8 bytes  "ETEMSTAT"
//! format version   u16 LE
//! body digest      32 bytes (SHA-256 of the body)
//! body             postcard: epoch, versions, running spec
//! ```
//!
//! Decoding never panics: a short, foreign, corrupt or other-version file is
//! a [`StateError`] that says what was found and what was expected.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::encode::sha256;
use crate::plan::{Action, Kind, Plan};
use crate::spec::Spec;

pub const MAGIC: &[u8; 8] = b"ETEMSTAT";
/// Bumped with every change to the encoding of the spec (2: socks and http
/// inbounds carry an optional TLS server configuration; 3: the route table
/// carries its domain strategy).
pub const FORMAT_VERSION: u16 = 3;
const HEADER: usize = 8 + 2 + 32;

/// The running spec, the version of every tag ever deployed and the epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployedState {
    /// How many applies produced this state; 0 before the first.
    pub epoch: u64,
    pub versions: Versions,
    pub spec: Spec,
}

/// The last version of every tag ever deployed, removed tags included, so a
/// tag added back never reuses a version whose flows may still be draining.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versions {
    /// Outbounds and balancers share one namespace: a flow is keyed by the
    /// tag and version of the target it was opened on, whatever its kind, so
    /// an outbound and a later balancer of the same tag must never share a
    /// version.
    pub targets: BTreeMap<String, u32>,
    pub inbounds: BTreeMap<String, u32>,
    /// The internal DNS target.
    pub dns: u32,
}

impl Versions {
    pub fn target(&self, tag: &str) -> Option<u32> {
        self.targets.get(tag).copied()
    }

    pub fn inbound(&self, tag: &str) -> Option<u32> {
        self.inbounds.get(tag).copied()
    }

    /// The version map a step of this kind is counted in.
    fn of_kind(&mut self, kind: Kind) -> Option<&mut BTreeMap<String, u32>> {
        match kind {
            Kind::Outbound | Kind::Balancer => Some(&mut self.targets),
            Kind::Inbound => Some(&mut self.inbounds),
            Kind::Dns => None,
        }
    }
}

impl DeployedState {
    /// A spec deployed once: every resource at v1, epoch 0. This is what
    /// `etc plan --from` assumes of a plan or source configuration.
    pub fn initial(spec: Spec) -> DeployedState {
        let targets = spec
            .outbounds
            .iter()
            .map(|o| &o.tag)
            .chain(spec.balancers.iter().map(|b| &b.tag))
            .map(|tag| (tag.clone(), 1))
            .collect();
        let inbounds = spec.inbounds.iter().map(|i| (i.tag.clone(), 1)).collect();
        DeployedState {
            epoch: 0,
            versions: Versions {
                targets,
                inbounds,
                dns: 1,
            },
            spec,
        }
    }

    /// The state after `plan`, computed from this state and `spec`, has been
    /// applied: every built version recorded, removed tags' versions kept,
    /// the epoch the plan's.
    pub fn apply(&self, plan: &Plan, spec: Spec) -> DeployedState {
        let mut versions = self.versions.clone();
        for step in &plan.steps {
            if !matches!(step.action, Action::Build { .. }) {
                continue;
            }
            match versions.of_kind(step.kind) {
                Some(map) => {
                    map.insert(step.tag.clone(), step.version);
                }
                None => versions.dns = step.version,
            }
        }
        DeployedState {
            epoch: plan.epoch,
            versions,
            spec,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let body = postcard::to_allocvec(&(self.epoch, &self.versions, &self.spec))
            .expect("a state always serializes");
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&sha256(&body));
        out.extend_from_slice(&body);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<DeployedState, StateError> {
        let magic = &bytes[..bytes.len().min(8)];
        if magic != &MAGIC[..magic.len()] {
            return Err(StateError::NotAState {
                found: magic.to_vec(),
            });
        }
        if bytes.len() < 10 {
            return Err(StateError::Truncated {
                needed: HEADER,
                found: bytes.len(),
            });
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(StateError::FormatVersion { found: version });
        }
        if bytes.len() < HEADER {
            return Err(StateError::Truncated {
                needed: HEADER,
                found: bytes.len(),
            });
        }
        let body = &bytes[HEADER..];
        if sha256(body)[..] != bytes[10..HEADER] {
            return Err(StateError::DigestMismatch);
        }
        let (epoch, versions, spec): (u64, Versions, Spec) =
            postcard::from_bytes(body).map_err(|e| StateError::Body(e.to_string()))?;
        let state = DeployedState {
            epoch,
            versions,
            spec,
        };
        state.check()?;
        Ok(state)
    }

    /// Every running resource has a version, and every counter can be
    /// advanced once more: the planner counts on both.
    fn check(&self) -> Result<(), StateError> {
        let versions = &self.versions;
        let exhausted = versions.targets.values().chain(versions.inbounds.values());
        if self.epoch == u64::MAX || versions.dns == u32::MAX || exhausted.max() == Some(&u32::MAX)
        {
            return Err(StateError::Exhausted);
        }
        let unversioned = |kind: Kind, tag: &str| StateError::Unversioned {
            kind: kind.name(),
            tag: tag.to_owned(),
        };
        for o in &self.spec.outbounds {
            self.versions
                .target(&o.tag)
                .ok_or_else(|| unversioned(Kind::Outbound, &o.tag))?;
        }
        for b in &self.spec.balancers {
            self.versions
                .target(&b.tag)
                .ok_or_else(|| unversioned(Kind::Balancer, &b.tag))?;
        }
        for i in &self.spec.inbounds {
            self.versions
                .inbound(&i.tag)
                .ok_or_else(|| unversioned(Kind::Inbound, &i.tag))?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    Truncated { needed: usize, found: usize },
    NotAState { found: Vec<u8> },
    FormatVersion { found: u16 },
    DigestMismatch,
    Body(String),
    Unversioned { kind: &'static str, tag: String },
    Exhausted,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Truncated { needed, found } => write!(
                f,
                "truncated state file: the header needs {needed} bytes, found {found}"
            ),
            StateError::NotAState { found } => write!(
                f,
                "not a state file: expected the magic bytes {:?}, found {:?}",
                String::from_utf8_lossy(MAGIC),
                String::from_utf8_lossy(found)
            ),
            StateError::FormatVersion { found } => write!(
                f,
                "state format version {found} is not supported: this build reads version {FORMAT_VERSION}"
            ),
            StateError::DigestMismatch => f.write_str(
                "corrupt state file: the body does not match the digest in its header (the file is damaged or truncated)",
            ),
            StateError::Body(err) => write!(f, "corrupt state file: the body does not decode: {err}"),
            StateError::Exhausted => f.write_str(
                "corrupt state file: an epoch or version counter is at its maximum and cannot advance",
            ),
            StateError::Unversioned { kind, tag } => write!(
                f,
                "corrupt state file: the running {kind} {tag} has no version"
            ),
        }
    }
}

impl std::error::Error for StateError {}

#[cfg(test)]
mod tests;
