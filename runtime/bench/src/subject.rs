//! What the benchmark measures: the same work done directly, through each
//! Debian peer, and through Etemenanki.

/// One column of the result table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Subject {
    /// No proxy: the client talks to the loopback servers itself.
    Direct,
    Microsocks,
    Dante,
    V2ray,
    Etemenanki,
}

impl Subject {
    pub const ALL: [Subject; 5] = [
        Subject::Direct,
        Subject::Microsocks,
        Subject::Dante,
        Subject::V2ray,
        Subject::Etemenanki,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subject::Direct => "direct",
            Subject::Microsocks => "microsocks",
            Subject::Dante => "dante",
            Subject::V2ray => "v2ray",
            Subject::Etemenanki => "etemenanki",
        }
    }
}
