//! Congestion control. With a rate negotiated in the authentication
//! exchange, "Brutal", hysteria's fixed-rate sender: it keeps a window of
//! twice the rate times the smoothed RTT, divided by the share of bytes
//! acknowledged over the last five seconds (never below 0.8), so loss
//! raises the send rate instead of lowering it. Without one, quinn's BBR.
//!
//! quinn builds the controller when the connection starts, before the
//! authentication has said which it is, so [`Congestion`] holds both and
//! a shared rate the authentication sets: 0 means BBR.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{BbrConfig, Controller, ControllerFactory};
use quinn_proto::RttEstimator;

/// How many one-second slots the acknowledged share is taken over.
const SLOTS: usize = 5;
/// Below this many bytes seen in the slots, the share counts as 1.
const MIN_SAMPLE_PACKETS: u64 = 50;
const MIN_ACK_RATE: f64 = 0.8;
const WINDOW_MULTIPLIER: f64 = 2.0;

#[derive(Clone, Copy, Default)]
struct Slot {
    second: u64,
    acked: u64,
    lost: u64,
}

/// Brutal's state, sans-IO: time comes in as arguments.
#[derive(Clone)]
pub struct Brutal {
    origin: Instant,
    slots: [Slot; SLOTS],
    ack_rate: f64,
    rtt: Duration,
    mtu: u64,
}

impl Brutal {
    pub fn new(now: Instant, mtu: u16) -> Brutal {
        Brutal {
            origin: now,
            slots: [Slot::default(); SLOTS],
            ack_rate: 1.0,
            rtt: Duration::from_millis(333),
            mtu: u64::from(mtu),
        }
    }

    fn record(&mut self, now: Instant, acked: u64, lost: u64) {
        let second = now.saturating_duration_since(self.origin).as_secs();
        let slot = &mut self.slots[(second % SLOTS as u64) as usize];
        if slot.second != second || (slot.acked == 0 && slot.lost == 0) {
            *slot = Slot {
                second,
                acked: 0,
                lost: 0,
            };
        }
        slot.acked += acked;
        slot.lost += lost;
        let (mut acked, mut lost) = (0u64, 0u64);
        for s in &self.slots {
            if second.saturating_sub(s.second) < SLOTS as u64 {
                acked += s.acked;
                lost += s.lost;
            }
        }
        self.ack_rate = if acked + lost < MIN_SAMPLE_PACKETS * self.mtu {
            1.0
        } else {
            (acked as f64 / (acked + lost) as f64).max(MIN_ACK_RATE)
        };
    }

    /// Bytes were acknowledged; `rtt` is the smoothed RTT now.
    pub fn on_ack(&mut self, now: Instant, bytes: u64, rtt: Duration) {
        self.rtt = rtt;
        self.record(now, bytes, 0);
    }

    pub fn on_loss(&mut self, now: Instant, bytes: u64) {
        self.record(now, 0, bytes);
    }

    pub fn set_mtu(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
    }

    /// The window for sending `rate` bytes a second.
    pub fn window(&self, rate: u64) -> u64 {
        let window = rate as f64 * self.rtt.as_secs_f64() * WINDOW_MULTIPLIER / self.ack_rate;
        (window as u64).max(self.mtu)
    }
}

/// The controller of one connection: Brutal at the shared rate when it
/// is set, BBR otherwise.
pub struct Congestion {
    rate: Arc<AtomicU64>,
    bbr: Box<dyn Controller>,
    brutal: Brutal,
}

impl Controller for Congestion {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.bbr.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.bbr.on_ack(now, sent, bytes, app_limited, rtt);
        self.brutal.on_ack(now, bytes, rtt.get());
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest: Option<u64>,
    ) {
        self.bbr.on_end_acks(now, in_flight, app_limited, largest);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        lost_bytes: u64,
    ) {
        self.bbr
            .on_congestion_event(now, sent, persistent, lost_bytes);
        self.brutal.on_loss(now, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.bbr.on_mtu_update(new_mtu);
        self.brutal.set_mtu(new_mtu);
    }

    fn window(&self) -> u64 {
        match self.rate.load(Ordering::Relaxed) {
            0 => self.bbr.window(),
            rate => self.brutal.window(rate),
        }
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Congestion {
            rate: self.rate.clone(),
            bbr: self.bbr.clone_box(),
            brutal: self.brutal.clone(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.bbr.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds the [`Congestion`] of one connection; `rate` (bytes a second,
/// 0 for BBR) is set once the authentication has negotiated it.
pub struct CongestionFactory {
    pub rate: Arc<AtomicU64>,
}

impl ControllerFactory for CongestionFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Congestion {
            rate: self.rate.clone(),
            bbr: Arc::new(BbrConfig::default()).build(now, current_mtu),
            brutal: Brutal::new(now, current_mtu),
        })
    }
}

/// The rate this side sends at, from its own limit and the peer's receive
/// rate (PROTOCOL.md, "Congestion Control"): `None` when the peer said
/// "auto" or this side set no limit (BBR); the peer's 0 means unlimited,
/// so this side's own limit holds.
pub fn send_rate(own_limit: u64, peer_rx: Option<u64>) -> u64 {
    match peer_rx {
        None => 0,
        Some(_) if own_limit == 0 => 0,
        Some(0) => own_limit,
        Some(rx) => own_limit.min(rx),
    }
}

/// What a server settles on when a client authenticates, all in bytes a
/// second.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct ServerRates {
    /// The rate it sends at: Brutal at this rate, or BBR for 0.
    pub send: u64,
    /// The receive rate it answers with in `Hysteria-CC-RX`: 0 for
    /// unlimited.
    pub receive: u64,
}

/// The server's side of the negotiation (PROTOCOL.md, "Congestion
/// Control", and hysteria's server): a client that announced its receive
/// rate is sent to at that rate, capped by `own_up`; one that announced 0
/// does not know it, so the server runs congestion control (BBR) whatever
/// its own limit. The server answers with `own_down`, its own receive
/// limit, 0 meaning unlimited.
pub fn server_rates(client_rx: u64, own_up: u64, own_down: u64) -> ServerRates {
    let send = match (client_rx, own_up) {
        (0, _) => 0,
        (rx, 0) => rx,
        (rx, up) => rx.min(up),
    };
    ServerRates {
        send,
        receive: own_down,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_twice_the_rate_times_the_rtt() {
        let t0 = Instant::now();
        let mut b = Brutal::new(t0, 1200);
        b.on_ack(t0, 1200, Duration::from_millis(100));
        assert_eq!(b.window(10_000_000), 2_000_000);
        assert_eq!(b.window(1), 1200, "never below one packet");
    }

    #[test]
    fn loss_widens_the_window_down_to_an_ack_rate_of_point_eight() {
        let t0 = Instant::now();
        let mut b = Brutal::new(t0, 1000);
        let rtt = Duration::from_millis(100);
        b.on_ack(t0, 90_000, rtt);
        b.on_loss(t0, 10_000);
        assert_eq!(b.window(1_000_000), (200_000.0 / 0.9) as u64);
        b.on_loss(t0, 100_000);
        assert_eq!(b.window(1_000_000), 250_000);
        // Five seconds on, the old samples have aged out.
        let later = t0 + Duration::from_secs(6);
        b.on_ack(later, 60_000, rtt);
        assert_eq!(b.window(1_000_000), 200_000);
    }

    #[test]
    fn few_samples_count_as_no_loss() {
        let t0 = Instant::now();
        let mut b = Brutal::new(t0, 1000);
        b.on_ack(t0, 1000, Duration::from_millis(100));
        b.on_loss(t0, 1000);
        assert_eq!(b.window(1_000_000), 200_000);
    }

    #[test]
    fn the_send_rate_follows_the_protocols_three_cases() {
        assert_eq!(send_rate(100, None), 0, "auto: congestion control");
        assert_eq!(send_rate(100, Some(0)), 100, "unlimited: our own limit");
        assert_eq!(send_rate(100, Some(40)), 40);
        assert_eq!(send_rate(0, Some(40)), 0, "no limit of ours: BBR");
    }

    #[test]
    fn the_server_sends_at_the_clients_rate_capped_by_its_own() {
        let rates = |rx, up, down| {
            let r = server_rates(rx, up, down);
            (r.send, r.receive)
        };
        assert_eq!(rates(0, 0, 0), (0, 0), "nothing known: BBR, unlimited");
        assert_eq!(
            rates(0, 1000, 500),
            (0, 500),
            "the client does not know: BBR"
        );
        assert_eq!(rates(2000, 0, 0), (2000, 0), "no cap of ours");
        assert_eq!(rates(2000, 1000, 0), (1000, 0), "capped by our up");
        assert_eq!(rates(400, 1000, 300), (400, 300), "the client's is lower");
    }

    #[test]
    fn a_client_of_our_server_sends_at_its_own_rate_capped_by_the_servers() {
        // Both ends of the exchange: the client announces its down, the
        // server answers its down, the client sends at min(its up, that).
        let server = server_rates(125_000, 250_000, 62_500);
        assert_eq!(server.send, 125_000);
        assert_eq!(send_rate(100_000, Some(server.receive)), 62_500);
        let unlimited = server_rates(125_000, 0, 0);
        assert_eq!(send_rate(100_000, Some(unlimited.receive)), 100_000);
    }
}
