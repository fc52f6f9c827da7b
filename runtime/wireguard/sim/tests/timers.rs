//! WireGuard's timers in the tunnel driver, under simulated time: tokio's
//! clock is paused (it jumps to the next timer whenever every task waits)
//! and boringtun's clock, mock_instant's, follows it. What the peer, plain
//! boringtun on a loopback socket, sees on the wire is asserted: message
//! types, their times, and the session indices transport messages carry.
//!
//! The timers are WireGuard's (the whitepaper, section 6): an initiation
//! unanswered is sent again after REKEY_TIMEOUT (plus up to 333 ms of
//! jitter) until REKEY_ATTEMPT_TIME has passed; the initiator of a session
//! starts a new handshake once the session is REKEY_AFTER_TIME old and it
//! sends; a session is not used past REJECT_AFTER_TIME; a keepalive answers
//! data left unanswered for KEEPALIVE_TIMEOUT, and a persistent keepalive
//! goes out every `keepalive` seconds. Past its handshake rate limit, the
//! driver answers an initiation with a cookie reply.

#[path = "../../tests/peer/mod.rs"]
mod peer;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use boringtun::noise::TunnResult;
use etemenanki_wireguard::{Tunnel, WgUdp};
use mock_instant::MockClock;
use peer::{message_type, Peer, INITIATION, LOCAL, TRANSPORT};
use tokio::io::ReadBuf;
use tokio::time::{sleep, timeout, Instant};

const RESPONSE: u8 = 2;
const COOKIE_REPLY: u8 = 3;
/// A transport message with nothing inside: header, counter and tag.
const KEEPALIVE_LEN: usize = 32;

const REKEY_TIMEOUT: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
const REKEY_ATTEMPT_TIME: Duration = Duration::from_secs(90);
const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
/// The most WireGuard delays a retried initiation past REKEY_TIMEOUT.
const JITTER: Duration = Duration::from_millis(333);

/// How often boringtun's clock is brought to tokio's: it lags by at most
/// this much.
const STEP: Duration = Duration::from_millis(5);
/// How often the driver runs boringtun's timers (tunnel.rs): a timer fires
/// at most this much after its time, plus STEP.
const TICK: Duration = Duration::from_millis(250);
/// Slack for what is due at once, or on a timer.
const LATE: Duration = TICK.saturating_add(STEP).saturating_add(STEP);

/// Where the link's datagrams go inside the tunnel; the peer echoes them.
const ECHO: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1)), 53);
/// How long an exchange waits for each half.
const EXCHANGE: Duration = Duration::from_secs(1);
/// Bound on the messages one wait of the peer handles.
const MESSAGES: usize = 1000;

/// Starts boringtun's clock at zero and keeps it on tokio's paused clock.
/// mock_instant's clock is kept per thread, and the test's runtime is
/// single-threaded: the driver, the peer and this task share it. Returns
/// the start, which the times the tests assert on count from.
fn follow_tokio_clock() -> Instant {
    let start = Instant::now();
    MockClock::set_time(Duration::ZERO);
    tokio::spawn(async move {
        loop {
            sleep(STEP).await;
            MockClock::set_time(start.elapsed());
        }
    });
    start
}

/// A message the peer received from the driver.
#[derive(Clone, Copy, Debug)]
struct Seen {
    at: Duration,
    kind: u8,
    len: usize,
    /// A transport message's receiver index: the peer's session it rides.
    /// An initiation's sender index: the driver's session it offers.
    index: u32,
}

impl Seen {
    fn is_data(&self) -> bool {
        self.kind == TRANSPORT && self.len > KEEPALIVE_LEN
    }

    fn is_keepalive(&self) -> bool {
        self.kind == TRANSPORT && self.len == KEEPALIVE_LEN
    }
}

fn index(datagram: &[u8]) -> u32 {
    u32::from_le_bytes(datagram[4..8].try_into().unwrap())
}

struct Sim {
    start: Instant,
    peer: Peer,
    tunnel: Arc<Tunnel>,
    /// Whether the peer answers initiations.
    answer: bool,
    /// Everything the peer received, in order.
    seen: Vec<Seen>,
    /// The session index of each echo the peer sent: the driver's session.
    echoed: Vec<(Duration, u32)>,
    /// The last IP packet the peer opened.
    last: Option<Vec<u8>>,
}

impl Sim {
    async fn new(keepalive: Option<u16>) -> (Sim, WgUdp) {
        let start = follow_tokio_clock();
        let (peer, tunnel) = Peer::with_tunnel(keepalive).await;
        let link = tunnel.open_udp().unwrap();
        let sim = Sim {
            start,
            peer,
            tunnel,
            answer: true,
            seen: Vec::new(),
            echoed: Vec::new(),
            last: None,
        };
        (sim, link)
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn at(&self, time: Duration) -> Instant {
        self.start + time
    }

    /// The peer handles what the driver sends until `until`, or until an
    /// IP packet arrives: it is returned.
    async fn serve(&mut self, until: Instant) -> Option<Vec<u8>> {
        for _ in 0..MESSAGES {
            let wait = until.saturating_duration_since(Instant::now());
            let datagram = self.peer.recv_within(wait).await?;
            self.seen.push(Seen {
                at: self.now(),
                kind: message_type(&datagram),
                len: datagram.len(),
                index: index(&datagram),
            });
            match message_type(&datagram) {
                INITIATION if self.answer => assert!(self.peer.open(&datagram).await.is_none()),
                INITIATION => {}
                TRANSPORT => {
                    if let Some(packet) = self.peer.open(&datagram).await {
                        self.last = Some(packet.clone());
                        return Some(packet);
                    }
                }
                other => panic!("the driver sent message type {other}"),
            }
        }
        panic!("more than {MESSAGES} messages in one wait");
    }

    /// The peer handles what the driver sends until `time`: no IP packet
    /// comes, as nothing in the tunnel sends.
    async fn idle_until(&mut self, time: Duration) {
        let until = self.at(time);
        assert_eq!(self.serve(until).await, None, "a packet no flow sent");
    }

    /// Seals `packet` as the peer and sends it; the driver's session index
    /// it rides.
    async fn send_sealed(&mut self, packet: &[u8]) -> u32 {
        let mut out = vec![0u8; packet.len() + 64];
        let TunnResult::WriteToNetwork(datagram) = self.peer.tunn.encapsulate(packet, &mut out)
        else {
            panic!("the peer has a session to seal with");
        };
        let mut datagram = datagram.to_vec();
        let session = index(&datagram);
        self.peer.send(&mut datagram).await;
        session
    }

    /// Sends `n` through the link to the peer, which echoes it: whether it
    /// came back, within EXCHANGE each way. `Err` once the tunnel is gone.
    async fn exchange(&mut self, link: &mut WgUdp, n: u32) -> io::Result<bool> {
        let payload = n.to_be_bytes();
        send(link, &payload).await?;
        let Some(packet) = self.serve(Instant::now() + EXCHANGE).await else {
            return Ok(false);
        };
        assert_eq!(udp_payload(&packet), payload, "the datagram sent, in order");
        let session = self.send_sealed(&reply_to(&packet)).await;
        self.echoed.push((self.now(), session));
        match timeout(EXCHANGE, recv(link)).await {
            Ok(echo) => {
                assert_eq!(echo?, payload);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    fn initiations(&self) -> Vec<Seen> {
        self.seen
            .iter()
            .copied()
            .filter(|s| s.kind == INITIATION)
            .collect()
    }
}

async fn send(link: &mut WgUdp, payload: &[u8]) -> io::Result<()> {
    std::future::poll_fn(|cx| link.poll_send_to(cx, payload, ECHO)).await
}

async fn recv(link: &mut WgUdp) -> io::Result<Vec<u8>> {
    let mut buf = [0u8; 2048];
    let mut read = ReadBuf::new(&mut buf);
    let from = std::future::poll_fn(|cx| link.poll_recv_from(cx, &mut read)).await?;
    assert_eq!(from, ECHO);
    Ok(read.filled().to_vec())
}

fn udp_payload(packet: &[u8]) -> &[u8] {
    assert_eq!(packet[0] >> 4, 4, "IPv4");
    assert_eq!(packet[9], 17, "UDP");
    assert_eq!(packet[12..16], LOCAL, "from our tunnel address");
    &packet[usize::from(packet[0] & 0x0f) * 4 + 8..]
}

/// The answer to an IPv4 UDP packet: its addresses and ports swapped, which
/// leaves both checksums valid.
fn reply_to(packet: &[u8]) -> Vec<u8> {
    let mut reply = packet.to_vec();
    let udp = usize::from(packet[0] & 0x0f) * 4;
    reply[12..16].copy_from_slice(&packet[16..20]);
    reply[16..20].copy_from_slice(&packet[12..16]);
    reply[udp..udp + 2].copy_from_slice(&packet[udp + 2..udp + 4]);
    reply[udp + 2..udp + 4].copy_from_slice(&packet[udp..udp + 2]);
    reply
}

fn within(what: &str, at: Duration, from: Duration, to: Duration) {
    assert!(
        from <= at && at <= to,
        "{what} at {at:?}, outside {from:?}..={to:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_initiation_is_retried_every_rekey_timeout_until_rekey_attempt_time() {
    let (mut sim, mut link) = Sim::new(None).await;
    sim.answer = false;
    send(&mut link, b"hello").await.unwrap();
    let start = sim.start;
    let stopped = tokio::spawn(async move {
        let e = recv(&mut link).await.expect_err("the flow fails");
        (start.elapsed(), e)
    });
    sim.idle_until(REKEY_ATTEMPT_TIME * 2).await;

    let inits = sim.initiations();
    assert_eq!(inits.len(), sim.seen.len(), "nothing but initiations");
    // The first with the first packet, then one per REKEY_TIMEOUT over
    // REKEY_ATTEMPT_TIME: 18 in all, as wireguard-go and the kernel send.
    assert_eq!(inits.len(), 18, "{inits:?}");
    within("the first initiation", inits[0].at, Duration::ZERO, LATE);
    for pair in inits.windows(2) {
        within(
            "a retry after the one before",
            pair[1].at - pair[0].at,
            REKEY_TIMEOUT - STEP,
            REKEY_TIMEOUT + JITTER,
        );
        assert_ne!(pair[0].index, pair[1].index, "each a handshake of its own");
    }
    // Then the attempt is over: the driver stops and its flows fail.
    let (at, e) = stopped.await.unwrap();
    within(
        "the driver's stop",
        at - inits[0].at,
        REKEY_ATTEMPT_TIME - STEP,
        REKEY_ATTEMPT_TIME + LATE,
    );
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(
        e.to_string(),
        "wireguard: the tunnel this flow rode has stopped"
    );
    assert!(!sim.tunnel.is_alive());
}

#[tokio::test(start_paused = true)]
async fn a_persistent_keepalive_goes_out_every_keepalive_seconds_of_silence() {
    const KEEPALIVE: u16 = 5;
    let keepalive = Duration::from_secs(KEEPALIVE.into());
    let (mut sim, mut link) = Sim::new(Some(KEEPALIVE)).await;
    assert!(sim.exchange(&mut link, 0).await.unwrap());
    let kinds: Vec<u8> = sim.seen.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [INITIATION, TRANSPORT, TRANSPORT]);
    assert!(sim.seen[1].is_keepalive(), "the session confirmed");
    assert!(sim.seen[2].is_data());
    let quiet = sim.now();

    sim.idle_until(quiet + keepalive * 12).await;
    let silence = &sim.seen[3..];
    assert!(
        silence.iter().all(Seen::is_keepalive),
        "only keepalives: {silence:?}"
    );
    assert!(silence.len() >= 11, "{silence:?}");
    within(
        "the first keepalive",
        silence[0].at - quiet,
        Duration::ZERO,
        keepalive + LATE,
    );
    for pair in silence.windows(2) {
        within(
            "a keepalive after the one before",
            pair[1].at - pair[0].at,
            keepalive - STEP,
            keepalive + LATE,
        );
    }
    // Each rides the session, and the peer opens it to nothing.
    let session = sim.seen[2].index;
    assert!(silence.iter().all(|s| s.index == session));
    // And the link still works.
    assert!(sim.exchange(&mut link, 1).await.unwrap());
}

/// boringtun's rule, checked on its timer: data came in after the last
/// message sent, and that one is KEEPALIVE_TIMEOUT old. (The whitepaper
/// counts the KEEPALIVE_TIMEOUT from the data received; boringtun's
/// keepalive can only come sooner.)
#[tokio::test(start_paused = true)]
async fn data_received_is_acknowledged_once_nothing_was_sent_for_keepalive_timeout() {
    let (mut sim, mut link) = Sim::new(None).await;
    assert!(sim.exchange(&mut link, 0).await.unwrap());
    let before = sim.seen.len();
    let last_sent = sim.seen[before - 1].at;
    // A few seconds on, the peer sends a datagram of its own, which the
    // flow reads and does not answer.
    sim.idle_until(Duration::from_secs(3)).await;
    let unasked = reply_to(sim.last.as_ref().unwrap());
    sim.send_sealed(&unasked).await;
    assert_eq!(recv(&mut link).await.unwrap(), 0u32.to_be_bytes());

    sim.idle_until(KEEPALIVE_TIMEOUT * 6).await;
    let after = &sim.seen[before..];
    assert_eq!(after.len(), 1, "one keepalive, then silence: {after:?}");
    assert!(after[0].is_keepalive());
    within(
        "the keepalive",
        after[0].at - last_sent,
        KEEPALIVE_TIMEOUT - STEP,
        KEEPALIVE_TIMEOUT + LATE,
    );
}

#[tokio::test(start_paused = true)]
async fn after_rekey_after_time_the_sender_rekeys_and_no_packet_is_lost() {
    let (mut sim, mut link) = Sim::new(None).await;
    // One datagram each way every second, past the old session's
    // REJECT_AFTER_TIME: every one comes back.
    const SECONDS: u32 = 200;
    for n in 0..SECONDS {
        sim.idle_until(Duration::from_secs(n.into())).await;
        assert!(sim.exchange(&mut link, n).await.unwrap(), "datagram {n}");
    }
    assert!(sim.tunnel.is_alive());

    let inits = sim.initiations();
    assert_eq!(
        inits.len(),
        2,
        "the first handshake and one rekey: {inits:?}"
    );
    let established = inits[0].at;
    let rekey = inits[1].at;
    within(
        "the rekey",
        rekey - established,
        REKEY_AFTER_TIME - STEP,
        REKEY_AFTER_TIME + LATE,
    );
    // The driver's data: on the first session until the new one is
    // confirmed (its first message on it is the keepalive that confirms),
    // on the new one from then on.
    let old = sim.seen[1].index;
    let confirm = sim
        .seen
        .iter()
        .position(|s| s.at >= rekey && s.kind == TRANSPORT && s.index != old)
        .unwrap();
    assert!(
        sim.seen[confirm].is_keepalive(),
        "the new session confirmed"
    );
    let new = sim.seen[confirm].index;
    assert_ne!(old, new);
    for (i, s) in sim.seen.iter().enumerate() {
        if s.kind == TRANSPORT {
            assert_eq!(s.index, if i < confirm { old } else { new }, "{s:?}");
        }
    }
    let data = sim.seen.iter().filter(|s| s.is_data()).count();
    assert_eq!(data, SECONDS as usize, "each datagram sent once");
    // The peer's echoes: addressed to the driver's first session, then,
    // from the first exchange after the rekey on, to the one its rekey
    // initiation offered.
    let first = sim.echoed[0].1;
    assert_ne!(first, inits[1].index);
    let switch = sim.echoed.iter().position(|e| e.1 != first).unwrap();
    within(
        "the peer's first echo on the new session",
        sim.echoed[switch].0,
        rekey,
        rekey + EXCHANGE + LATE,
    );
    assert!(sim.echoed[switch..].iter().all(|e| e.1 == inits[1].index));
}

#[tokio::test(start_paused = true)]
async fn a_session_is_not_used_past_reject_after_time_and_the_rekey_attempt_ends() {
    let (mut sim, mut link) = Sim::new(None).await;
    let mut outcomes = Vec::new();
    let mut gone = None;
    for n in 0..240u32 {
        sim.idle_until(Duration::from_secs(n.into())).await;
        match sim.exchange(&mut link, n).await {
            Ok(back) => outcomes.push(back),
            Err(e) => {
                gone = Some((sim.now(), e));
                break;
            }
        }
        // The peer answers the first handshake only.
        sim.answer = false;
        if n == 185 {
            // The peer still holds the session: what it seals now is
            // refused by the driver.
            let echo = reply_to(sim.last.as_ref().unwrap());
            sim.send_sealed(&echo).await;
            assert!(timeout(EXCHANGE, recv(&mut link)).await.is_err());
        }
    }
    let inits = sim.initiations();
    let established = inits[0].at;
    let expiry = established + REJECT_AFTER_TIME;
    // Every datagram came back while the session lasted, none after.
    for (n, &back) in outcomes.iter().enumerate() {
        let at = Duration::from_secs(n as u64);
        if at + STEP < expiry {
            assert!(back, "datagram {n} before REJECT_AFTER_TIME");
        } else if at > expiry + LATE {
            assert!(!back, "datagram {n} after REJECT_AFTER_TIME");
        }
    }
    // No transport message after it.
    let last_data = sim.seen.iter().rfind(|s| s.kind == TRANSPORT).unwrap();
    within(
        "the last transport message",
        last_data.at,
        established,
        expiry + LATE,
    );
    // The rekey began at REKEY_AFTER_TIME, unanswered, retried until
    // REKEY_ATTEMPT_TIME: then the driver stopped.
    let rekey = &inits[1..];
    within(
        "the rekey",
        rekey[0].at - established,
        REKEY_AFTER_TIME - STEP,
        REKEY_AFTER_TIME + LATE,
    );
    assert_eq!(rekey.len(), 18, "{rekey:?}");
    let (at, e) = gone.expect("the tunnel stops");
    assert!(
        at >= rekey[0].at + REKEY_ATTEMPT_TIME - STEP,
        "stopped at {at:?}"
    );
    assert!(at <= rekey[0].at + REKEY_ATTEMPT_TIME + LATE + EXCHANGE * 2 + Duration::from_secs(1));
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    assert!(!sim.tunnel.is_alive());
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_initiations_is_answered_with_a_cookie_and_the_peer_may_initiate() {
    let (mut sim, mut link) = Sim::new(None).await;
    let mut buf = vec![0u8; 256];
    // Past the driver's handshake rate limit (ten a second) within one
    // instant: the first answered, the nine replays of its timestamp
    // dropped, the eleventh answered with a cookie.
    let mut senders = Vec::new();
    for _ in 0..11 {
        let TunnResult::WriteToNetwork(init) =
            sim.peer.tunn.format_handshake_initiation(&mut buf, true)
        else {
            panic!("an initiation");
        };
        let mut init = init.to_vec();
        senders.push(index(&init));
        sim.peer.send(&mut init).await;
    }
    let mut replies = Vec::new();
    while let Some(reply) = sim.peer.recv_within(Duration::from_millis(10)).await {
        replies.push(reply);
    }
    let kinds: Vec<u8> = replies.iter().map(|r| message_type(r)).collect();
    assert_eq!(kinds, [RESPONSE, COOKIE_REPLY]);
    // A response's receiver index is at 8, a cookie reply's at 4.
    assert_eq!(
        u32::from_le_bytes(replies[0][8..12].try_into().unwrap()),
        senders[0]
    );
    assert_eq!(index(&replies[1]), senders[10]);
    let mut out = vec![0u8; 256];
    assert!(matches!(
        sim.peer.tunn.decapsulate(None, &replies[1], &mut out),
        TunnResult::Done
    ));
    // Still under load (the limit is counted per second), an initiation
    // bearing the cookie is answered.
    sleep(Duration::from_millis(100)).await;
    assert!(sim.now() < Duration::from_secs(1));
    let TunnResult::WriteToNetwork(init) =
        sim.peer.tunn.format_handshake_initiation(&mut buf, true)
    else {
        panic!("an initiation");
    };
    let mut init = init.to_vec();
    let offered = index(&init);
    sim.peer.send(&mut init).await;
    let response = sim.peer.recv().await;
    assert_eq!(message_type(&response), RESPONSE);
    assert_eq!(
        u32::from_le_bytes(response[8..12].try_into().unwrap()),
        offered
    );
    // The peer confirms; the driver, the responder now, sends on that
    // session once the confirmation is in (before, it would have no
    // session to send on and start a handshake of its own).
    assert!(sim.peer.open(&response).await.is_none());
    sleep(STEP).await;
    assert!(sim.exchange(&mut link, 0).await.unwrap());
    assert!(sim.initiations().is_empty(), "{:?}", sim.seen);
    assert_eq!(
        sim.echoed[0].1,
        u32::from_le_bytes(response[4..8].try_into().unwrap())
    );
}
