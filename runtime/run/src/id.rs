//! Outbound identity: a tag and a version.

use std::fmt;
use std::sync::Arc;

/// One version of one tag. Fan-out sub-links and drains are keyed by this,
/// never by an address: one tag can run an old version beside a new one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OutboundId {
    pub tag: Arc<str>,
    pub version: u32,
}

impl OutboundId {
    pub fn new(tag: &str, version: u32) -> Self {
        OutboundId {
            tag: tag.into(),
            version,
        }
    }
}

impl fmt::Display for OutboundId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@v{}", self.tag, self.version)
    }
}
