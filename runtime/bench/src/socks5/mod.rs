//! The SOCKS5 client the benchmark drives every proxy with.

pub mod client;
pub mod codec;
