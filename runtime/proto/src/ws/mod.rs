//! WebSocket (RFC 6455) without I/O: the client's upgrade ([`Upgrade`])
//! and the frames of the connection after it ([`Decoder`] and
//! [`encode_header`], with masking).

mod frame;
mod upgrade;

pub use frame::{
    apply_mask, encode_control, encode_header, header_len, Close, Decoder, Masks, Opcode, Role,
    MAX_CONTROL, MAX_HEADER,
};
pub use upgrade::{EarlyData, Upgrade};
