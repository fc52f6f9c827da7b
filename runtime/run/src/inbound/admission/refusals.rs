//! What admission turned away, counted and reported at most once a second
//! per inbound: a flood refused socket by socket would otherwise write a
//! log line per socket, or, at debug level, nothing an operator sees.

use std::time::{Duration, Instant};

use super::Refusal;

/// How long refusals are counted before they are reported.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The refusals of the current window, by reason.
#[derive(Default)]
pub struct Refusals {
    /// When the first refusal of the window came; `None` while there is none.
    since: Option<Instant>,
    counts: [u64; Refusal::ALL.len()],
}

impl Refusals {
    /// Counts one refusal at `now`; true when it opened a window, so the
    /// caller knows a report is now due.
    pub fn record(&mut self, refusal: Refusal, now: Instant) -> bool {
        let opened = self.since.is_none();
        self.since.get_or_insert(now);
        self.counts[refusal as usize] += 1;
        opened
    }

    /// When the counts must be reported, if there are any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.since.map(|since| since + WINDOW)
    }

    /// At or after [`Refusals::poll_timeout`]: the window's counts, one
    /// `(count, refusal)` a reason, and a new window; before it, nothing.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<(u64, Refusal)> {
        match self.poll_timeout() {
            Some(due) if now >= due => {}
            _ => return Vec::new(),
        }
        self.since = None;
        let counts = std::mem::take(&mut self.counts);
        Refusal::ALL
            .into_iter()
            .zip(counts)
            .filter(|&(_, count)| count > 0)
            .map(|(refusal, count)| (count, refusal))
            .collect()
    }
}

/// The line an inbound logs for `count` refusals of one reason.
pub fn report(tag: &str, count: u64, refusal: Refusal) -> String {
    let (verb, what) = match refusal {
        Refusal::Shed => ("shed", "handshaking connection"),
        _ => ("refused", "connection"),
    };
    let plural = if count == 1 { "" } else { "s" };
    format!(
        "inbound {tag}: {verb} {count} {what}{plural} in the last second: {}",
        refusal.text()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_reported_once_a_window_whatever_their_number() {
        let start = Instant::now();
        let mut refusals = Refusals::default();
        assert_eq!(refusals.poll_timeout(), None);
        assert!(refusals.record(Refusal::HandshakesFull, start));
        for i in 1..117 {
            let now = start + Duration::from_millis(i);
            assert!(!refusals.record(Refusal::HandshakesFull, now));
        }
        refusals.record(Refusal::Shed, start + Duration::from_millis(500));
        assert_eq!(refusals.poll_timeout(), Some(start + WINDOW));
        assert!(refusals
            .handle_timeout(start + Duration::from_millis(999))
            .is_empty());
        assert_eq!(
            refusals.handle_timeout(start + WINDOW),
            [(117, Refusal::HandshakesFull), (1, Refusal::Shed)]
        );
        // Nothing more until the next refusal, which opens a new window.
        assert_eq!(refusals.poll_timeout(), None);
        let later = start + Duration::from_secs(5);
        assert!(refusals.record(Refusal::OverShare, later));
        assert_eq!(refusals.poll_timeout(), Some(later + WINDOW));
    }

    #[test]
    fn a_report_names_the_inbound_the_count_and_the_reason() {
        assert_eq!(
            report("socks-in", 117, Refusal::HandshakesFull),
            "inbound socks-in: refused 117 connections in the last second: handshake slots full"
        );
        assert_eq!(
            report("socks-in", 1, Refusal::Shed),
            "inbound socks-in: shed 1 handshaking connection in the last second: \
             source over its fair share of handshake slots"
        );
    }
}
