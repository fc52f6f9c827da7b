//! What the benchmark measures: the same work done directly, through each
//! Debian peer, through Etemenanki, and through chains of two proxies that
//! speak SOCKS over TLS between them.

/// One column of the result table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Subject {
    /// No proxy: the client talks to the loopback servers itself.
    Direct,
    Microsocks,
    Dante,
    V2ray,
    Etemenanki,
    /// Etemenanki in front (plain socks in, socks over TLS out) of
    /// Etemenanki serving socks over TLS (then freedom).
    EtemenankiTls,
    /// v2ray 4.34 likewise, as both front and server.
    V2rayTls,
    /// Etemenanki as the `etemenanki` column, from the binaries in
    /// `--alt-bin-dir` (another build, to compare two commits in one run);
    /// only when asked for.
    EtemenankiAlt,
}

impl Subject {
    pub const ALL: [Subject; 7] = [
        Subject::Direct,
        Subject::Microsocks,
        Subject::Dante,
        Subject::V2ray,
        Subject::Etemenanki,
        Subject::EtemenankiTls,
        Subject::V2rayTls,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subject::Direct => "direct",
            Subject::Microsocks => "microsocks",
            Subject::Dante => "dante",
            Subject::V2ray => "v2ray",
            Subject::Etemenanki => "etemenanki",
            Subject::EtemenankiTls => "etemenanki-tls",
            Subject::V2rayTls => "v2ray-tls",
            Subject::EtemenankiAlt => "etemenanki-alt",
        }
    }

    /// A chain of a front proxy and a TLS socks server behind it.
    pub fn is_chain(self) -> bool {
        matches!(self, Subject::EtemenankiTls | Subject::V2rayTls)
    }
}
