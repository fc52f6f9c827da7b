//! Mux.Cool, Xray's and v2ray's multiplexing of sessions over one stream
//! (a VLESS or VMess request with the mux command, destination
//! `v1.mux.cool`), and XUDP, its UDP sessions whose packets carry their own
//! addresses: what sing-box (`packet_encoding: xudp`, its default) and Xray
//! clients send UDP as.
//!
//! A frame is a big-endian u16 metadata length (at most 512), the metadata,
//! and, when its option has the data bit, a big-endian u16 data length and
//! the data. The metadata: the session id (u16), the status (1 new, 2 keep,
//! 3 end, 4 keep-alive) and the option (bit 1 data, bit 2 error). A new
//! frame adds the network (1 TCP, 2 UDP) and the target, port first then
//! the address as VLESS writes it; XUDP's 8-byte global id may follow,
//! with other bytes Xray adds, and is read past. A keep frame of a UDP
//! session may add the network (2) and the packet's address, in both
//! directions; without it the packet is to (or from) the session's target.
//!
//! A keep frame of a TCP session carries its bytes; an end frame ends its
//! sender's direction.
//!
//! [`server::Server`] is the server side: what each client frame asks of
//! the runtime, and the frames the runtime sends back.

mod frame;
pub mod server;

/// The destination Xray and v2ray give a Mux.Cool stream.
pub const MUX_COOL: &str = "v1.mux.cool";

pub use frame::{DATA_HEADER_LEN, END_LEN};
pub use server::{Event, Key, Server, Step, MAX_SESSIONS, REPLY_HEADROOM};
