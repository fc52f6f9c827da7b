//! The Etemenanki runtime: executes a compiled plan.
//!
//! It parses no configuration language, fills in no default and makes no
//! policy decision of its own: it serves the frozen plan. [`apply::Runtime`]
//! builds a plan's inbounds, outbounds and balancers, and applies each new
//! plan atomically; [`plan_file`] reads plan.bin. The `etemenanki-run`
//! binary is a thin command line over them.

pub mod apply;
mod balancer;
mod connect;
mod dns;
mod drain;
mod fanout;
mod framed;
mod id;
mod inbound;
mod names;
mod outbound;
mod own_inbounds;
pub mod plan_file;
mod plane;
mod registry;
mod relay;
mod route;
mod stream_datagrams;

use etemenanki_transport::{buffers, dial, resolve};
