//! The body securities, as the request header names them and the options
//! each brings.

use etemenanki_ir::spec::VmessSecurity;

/// The request options VMess defines (only these are sent).
pub const OPTION_CHUNK_STREAM: u8 = 0x01;
pub const OPTION_CHUNK_MASKING: u8 = 0x04;
pub const OPTION_GLOBAL_PADDING: u8 = 0x08;

/// The security of a request's body, `auto` resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    Aes128Gcm,
    ChaCha20Poly1305,
    /// Chunks with masked lengths and no cipher.
    None,
    /// No framing at all on a stream: the bytes as they are, under the
    /// `none` nibble with chunk stream and masking cleared, as v2ray sends
    /// it. A UDP flow frames as `none` does, since packets need lengths.
    Zero,
}

impl Security {
    /// `auto` is aes-128-gcm where the CPU has AES instructions, else
    /// chacha20-poly1305, which is faster in software.
    pub fn resolve(security: VmessSecurity, has_aes: bool) -> Self {
        match security {
            VmessSecurity::Aes128Gcm => Self::Aes128Gcm,
            VmessSecurity::Chacha20Poly1305 => Self::ChaCha20Poly1305,
            VmessSecurity::None => Self::None,
            VmessSecurity::Zero => Self::Zero,
            VmessSecurity::Auto if has_aes => Self::Aes128Gcm,
            VmessSecurity::Auto => Self::ChaCha20Poly1305,
        }
    }

    /// What the header's low nibble says: v2ray's SecurityType numbers.
    pub fn nibble(self) -> u8 {
        match self {
            Self::Aes128Gcm => 3,
            Self::ChaCha20Poly1305 => 4,
            Self::None | Self::Zero => 5,
        }
    }

    /// How a body under this security is framed, for a stream or for
    /// packets.
    pub fn framing(self, packets: bool) -> Framing {
        match self {
            Self::Aes128Gcm | Self::ChaCha20Poly1305 => Framing::Sealed,
            Self::None => Framing::Masked,
            Self::Zero if packets => Framing::Masked,
            Self::Zero => Framing::Raw,
        }
    }
}

/// The shape of a body's chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Masked length, sealed payload and tag, then padding.
    Sealed,
    /// Masked length and payload in clear.
    Masked,
    /// No chunks.
    Raw,
}

impl Framing {
    /// The option byte the request header carries: v2ray's client pads
    /// sealed chunks (its global padding, always on) and masks every
    /// chunked body.
    pub fn options(self) -> u8 {
        match self {
            Self::Sealed => OPTION_CHUNK_STREAM | OPTION_CHUNK_MASKING | OPTION_GLOBAL_PADDING,
            Self::Masked => OPTION_CHUNK_STREAM | OPTION_CHUNK_MASKING,
            Self::Raw => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_cpu_and_zero_frames_packets_as_none() {
        assert_eq!(
            Security::resolve(VmessSecurity::Auto, true),
            Security::Aes128Gcm
        );
        assert_eq!(
            Security::resolve(VmessSecurity::Auto, false),
            Security::ChaCha20Poly1305
        );
        assert_eq!(Security::Zero.framing(false), Framing::Raw);
        assert_eq!(Security::Zero.framing(true), Framing::Masked);
        assert_eq!(Security::Zero.nibble(), Security::None.nibble());
        assert_eq!(Security::Aes128Gcm.framing(false).options(), 0x0d);
    }
}
