//! The body securities, as the request header names them and the options
//! each brings.

use etemenanki_ir::spec::VmessSecurity;

/// The request options VMess defines.
pub const OPTION_CHUNK_STREAM: u8 = 0x01;
pub const OPTION_CHUNK_MASKING: u8 = 0x04;
pub const OPTION_GLOBAL_PADDING: u8 = 0x08;
/// Sealed chunk lengths (sing-box's `authenticated_length`), which this
/// implementation does not speak.
pub const OPTION_AUTHENTICATED_LENGTH: u8 = 0x10;

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

    /// How our client lays out a body under this security, for a stream
    /// or for packets: v2ray's client pads sealed chunks (its global
    /// padding) and masks every chunked body.
    pub fn layout(self, packets: bool) -> Layout {
        let chunked = packets || self != Self::Zero;
        Layout {
            chunked,
            masked: chunked,
            padded: self.sealed(),
            packets,
        }
    }

    /// Whether chunks are sealed under a cipher.
    pub fn sealed(self) -> bool {
        matches!(self, Self::Aes128Gcm | Self::ChaCha20Poly1305)
    }
}

/// The shape of a body's chunks, both directions alike: what the request
/// header's options say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// In chunks; else the bytes as they are (a stream under `zero`).
    pub chunked: bool,
    /// Each length XORed with a word of the mask stream.
    pub masked: bool,
    /// Each chunk padded by a length the mask stream draws.
    pub padded: bool,
    /// A UDP flow's body: each chunk one packet, opened whole.
    pub packets: bool,
}

impl Layout {
    /// The option byte the request header carries.
    pub fn options(self) -> u8 {
        let mut options = 0;
        for (on, bit) in [
            (self.chunked, OPTION_CHUNK_STREAM),
            (self.masked, OPTION_CHUNK_MASKING),
            (self.padded, OPTION_GLOBAL_PADDING),
        ] {
            if on {
                options |= bit;
            }
        }
        options
    }

    /// What a server makes of a request's `options` under `security`, as
    /// v2ray's does: sealed bodies are chunked whatever the options say; a
    /// `none` stream without chunk stream is raw, and its padding option is
    /// ignored (only packets and sealed chunks are padded); padding draws
    /// from the mask stream, so it needs masking.
    pub fn from_options(
        security: Security,
        options: u8,
        packets: bool,
    ) -> Result<Self, &'static str> {
        if options & OPTION_AUTHENTICATED_LENGTH != 0 {
            return Err("vmess: authenticated length is not supported");
        }
        let chunked = security.sealed() || options & OPTION_CHUNK_STREAM != 0;
        if packets && !chunked {
            return Err("vmess: udp without chunk stream");
        }
        let masked = chunked && options & OPTION_CHUNK_MASKING != 0;
        let padding = options & OPTION_GLOBAL_PADDING != 0;
        if padding && !masked {
            return Err("vmess: global padding without chunk masking");
        }
        Ok(Layout {
            chunked,
            masked,
            padded: padding && (security.sealed() || packets),
            packets,
        })
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
        assert!(!Security::Zero.layout(false).chunked);
        assert_eq!(Security::Zero.layout(true), Security::None.layout(true));
        assert_eq!(Security::Zero.nibble(), Security::None.nibble());
        assert_eq!(Security::Aes128Gcm.layout(false).options(), 0x0d);
    }

    /// A server reads back what our client sends, and what v2ray's and
    /// sing-box's send.
    #[test]
    fn a_server_reads_the_layout_the_options_say() {
        for security in [
            Security::Aes128Gcm,
            Security::ChaCha20Poly1305,
            Security::None,
        ] {
            for packets in [false, true] {
                let layout = security.layout(packets);
                assert_eq!(
                    Layout::from_options(security, layout.options(), packets),
                    Ok(layout)
                );
            }
        }
        let zero = Security::Zero.layout(false).options();
        assert_eq!(
            Layout::from_options(Security::None, zero, false),
            Ok(Security::Zero.layout(false))
        );
        // Chunk stream alone: plain lengths; sealed chunks even without it.
        let plain = Layout::from_options(Security::Aes128Gcm, 0x00, false).unwrap();
        assert!(plain.chunked && !plain.masked && !plain.padded);
        // Padding on a none stream is ignored, on none packets kept.
        assert!(
            !Layout::from_options(Security::None, 0x0d, false)
                .unwrap()
                .padded
        );
        assert!(
            Layout::from_options(Security::None, 0x0d, true)
                .unwrap()
                .padded
        );
        assert_eq!(
            Layout::from_options(Security::None, 0x09, false),
            Err("vmess: global padding without chunk masking")
        );
        assert_eq!(
            Layout::from_options(Security::None, 0x00, true),
            Err("vmess: udp without chunk stream")
        );
        assert_eq!(
            Layout::from_options(Security::Aes128Gcm, 0x1d, false),
            Err("vmess: authenticated length is not supported")
        );
    }
}
