//! WebSocket (RFC 6455) without I/O: the client's upgrade ([`Upgrade`]),
//! the server's answer to one ([`Upgrader`]), and the frames of the
//! connection after it ([`Decoder`] and [`encode_header`], with masking).

mod frame;
mod server;
mod upgrade;

pub use frame::{
    apply_mask, encode_control, encode_header, header_len, Close, Decoder, Masks, Opcode, Role,
    MAX_CONTROL, MAX_HEADER,
};
pub use server::{
    request_end, write_date, Answer, Refusal, Upgrader, MAX_DISCARDED_BODY, RESPONSE_TOO_LARGE,
};
pub use upgrade::{EarlyData, Upgrade};
