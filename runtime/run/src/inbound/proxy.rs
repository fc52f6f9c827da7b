//! The proxy-protocol inbounds (Trojan, VLESS, VMess, Shadowsocks,
//! Shadowsocks 2022): one core per connection over the inbound's shared
//! user table, then a stream relayed or a UDP association over the client's
//! stream. A client the core refuses gets what [`refused`] gives it.
//!
//! The framed protocols (VMess, both Shadowsocks) wrap the client's stream
//! in the same framed-stream runtime their clients use; their request's
//! answer is the codec's to send, so the relay sees an [`Answered`]
//! request.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use etemenanki_ir::spec::{InboundProtocol, Secret, Uuid};
use etemenanki_proto::aead::{Algorithm, MasterKey};
use etemenanki_proto::codec::{DatagramCodec, FlowKind, ServerCore, ServerRequest, StreamCodec};
use etemenanki_proto::{shadowsocks, ss2022, trojan, vless, vmess, Address};
use etemenanki_transport::Stream;
use tokio::io::AsyncWriteExt;

use super::admission::Handshaking;
use super::handshake::{handshake, open_and_relay, unspecified, Handshake};
use super::refused::refused;
use super::server::{Listens, Pump, Server};
use super::ss_udp;
use super::{datagrams, mux, Member, Shared};
use crate::framed::Framed;
use crate::outbound::{TROJAN_BUF, VLESS_BUF, VMESS_BUF};
use crate::stream_datagrams::StreamDatagrams;

/// A Shadowsocks inbound serves UDP on its port when its spec says so.
fn listens(udp: bool) -> Listens {
    match udp {
        true => Listens::StreamAndDatagrams(Pump::Shadowsocks),
        false => Listens::Stream,
    }
}

fn ids(ids: &[Secret<Uuid>]) -> Vec<[u8; 16]> {
    ids.iter().map(|id| id.expose().0).collect()
}

pub struct Trojan {
    users: Arc<trojan::server::Users>,
    fallback: Option<SocketAddr>,
}

impl Server for Trojan {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Trojan>> {
        let InboundProtocol::Trojan {
            passwords,
            fallback,
            ..
        } = protocol
        else {
            return None;
        };
        let passwords: Vec<&str> = passwords.iter().map(|p| p.expose().as_str()).collect();
        Some(Ok(Trojan {
            users: Arc::new(trojan::server::Users::new(&passwords)),
            fallback: *fallback,
        }))
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        admitted: Handshaking,
    ) -> io::Result<()> {
        let (users, fallback) = (self.users.clone(), self.fallback);
        let mut core = trojan::server::Core::new(users);
        if fallback.is_some() {
            core = core.with_fallback();
        }
        let member = |request: &trojan::server::Request| Some(Member::Hash(*request.user()));
        serve(
            shared,
            client,
            admitted,
            core,
            fallback,
            member,
            |client, request, early| async move {
                match request.kind() {
                    FlowKind::Stream => open_and_relay(shared, client, peer, &request, early).await,
                    FlowKind::Datagrams => {
                        relay_packets::<_, _, TROJAN_BUF>(
                            shared,
                            client,
                            peer,
                            trojan::UdpFraming,
                            &early,
                            &[],
                        )
                        .await
                    }
                }
            },
        )
        .await
    }

    fn keeps(&self, member: &Member) -> bool {
        matches!(member, Member::Hash(hash) if self.users.knows(hash))
    }
}

pub struct Vless {
    users: Arc<vless::server::Users>,
    fallback: Option<SocketAddr>,
}

impl Server for Vless {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Vless>> {
        let InboundProtocol::Vless {
            ids: list,
            fallback,
            ..
        } = protocol
        else {
            return None;
        };
        Some(Ok(Vless {
            users: Arc::new(vless::server::Users::new(&ids(list))),
            fallback: *fallback,
        }))
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        admitted: Handshaking,
    ) -> io::Result<()> {
        let (users, fallback) = (self.users.clone(), self.fallback);
        let mut core = vless::server::Core::new(users);
        if fallback.is_some() {
            core = core.with_fallback();
        }
        let member = |request: &vless::server::Request| Some(Member::Id(*request.user()));
        serve(
            shared,
            client,
            admitted,
            core,
            fallback,
            member,
            |client, request, early| async move {
                match request.kind() {
                    FlowKind::Stream => open_and_relay(shared, client, peer, &request, early).await,
                    FlowKind::Datagrams => {
                        // The response header goes ahead of the first packet.
                        let mut header = Vec::new();
                        request.on_connected(unspecified(), &mut header);
                        if request.is_mux() {
                            // Mux.Cool: its TCP sessions, and its UDP sessions
                            // (XUDP) in one association.
                            tracing::debug!("vless: a mux.cool stream from {peer}");
                            mux::serve::<_, VLESS_BUF>(shared, client, peer, &early, &header).await
                        } else {
                            let codec = request.datagrams();
                            relay_packets::<_, _, VLESS_BUF>(
                                shared, client, peer, codec, &early, &header,
                            )
                            .await
                        }
                    }
                }
            },
        )
        .await
    }

    fn keeps(&self, member: &Member) -> bool {
        matches!(member, Member::Id(id) if self.users.knows(id))
    }
}

pub struct Vmess {
    users: Arc<vmess::server::Users>,
    replay: Arc<vmess::server::ReplayFilter>,
}

impl Server for Vmess {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Vmess>> {
        let InboundProtocol::Vmess { ids: list, .. } = protocol else {
            return None;
        };
        Some(Ok(Vmess {
            users: Arc::new(vmess::server::Users::new(&ids(list))),
            replay: Arc::new(vmess::server::ReplayFilter::new()),
        }))
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        admitted: Handshaking,
    ) -> io::Result<()> {
        let (users, replay) = (self.users.clone(), self.replay.clone());
        let core = vmess::server::Core::new(users, replay);
        let member = |request: &vmess::server::Request| Some(Member::Id(*request.user()));
        serve(
            shared,
            client,
            admitted,
            core,
            None,
            member,
            |client, request, early| async move {
                // The response header does not depend on the dial: it is staged
                // ahead of the first sealed chunk, and never sent if the dial fails.
                let mut header = Vec::new();
                request.on_connected(unspecified(), &mut header);
                match request.kind() {
                    FlowKind::Stream => {
                        let answered = Answered::of(&request);
                        // Boxed: its key schedules would sit in every future
                        // the stream is moved through, for the flow's life.
                        let codec = Box::new(request.into_codec()?);
                        relay_framed::<_, VMESS_BUF>(
                            shared, client, peer, &answered, codec, early, &header,
                        )
                        .await
                    }
                    FlowKind::Datagrams if request.is_mux() => {
                        // Mux.Cool inside the VMess body stream: its TCP
                        // sessions (v2ray's mux), and its UDP sessions (XUDP,
                        // as Xray's clients send UDP) in one association.
                        tracing::debug!("vmess: a mux.cool stream from {peer}");
                        let body = Box::new(request.into_codec()?);
                        let framed =
                            Framed::<_, _, VMESS_BUF>::with_header(client, body, early, &header);
                        mux::serve::<_, VMESS_BUF>(shared, framed, peer, &[], &[]).await
                    }
                    FlowKind::Datagrams => {
                        let codec = request.into_datagrams()?;
                        relay_packets::<_, _, VMESS_BUF>(
                            shared, client, peer, codec, &early, &header,
                        )
                        .await
                    }
                }
            },
        )
        .await
    }

    fn keep_filters(&mut self, old: &Vmess) {
        self.replay = old.replay.clone();
    }

    fn keeps(&self, member: &Member) -> bool {
        matches!(member, Member::Id(key) if self.users.knows(key))
    }
}

pub struct Shadowsocks {
    master: MasterKey,
    salts: Arc<shadowsocks::server::SaltFilter>,
    udp: bool,
}

impl Server for Shadowsocks {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Shadowsocks>> {
        let InboundProtocol::Shadowsocks {
            method,
            password,
            udp,
        } = protocol
        else {
            return None;
        };
        let algorithm = Algorithm::from(*method);
        Some(Ok(Shadowsocks {
            master: MasterKey::from_password(algorithm, password.expose().as_bytes()),
            salts: Arc::new(shadowsocks::server::SaltFilter::new()),
            udp: *udp,
        }))
    }

    fn listens(&self) -> Listens {
        listens(self.udp)
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        admitted: Handshaking,
    ) -> io::Result<()> {
        let (master, salts) = (self.master.clone(), self.salts.clone());
        let core = shadowsocks::server::Core::new(master, salts);
        // One password, which a reload cannot remove without a rebuild.
        let member = |_: &shadowsocks::server::Request| None;
        serve(
            shared,
            client,
            admitted,
            core,
            None,
            member,
            |client, request, early| async move {
                let answered = Answered::of(&request);
                const BUF: usize = shadowsocks::server::ServerStream::BUF_SIZE;
                let codec = request.into_codec();
                relay_framed::<_, BUF>(shared, client, peer, &answered, codec, early, &[]).await
            },
        )
        .await
    }

    fn keep_filters(&mut self, old: &Shadowsocks) {
        self.salts = old.salts.clone();
    }

    fn udp_keys(&self) -> Option<ss_udp::Keys> {
        Some(ss_udp::Keys::Aead(self.master.clone()))
    }
}

pub struct Ss2022 {
    users: Arc<ss2022::server::Users>,
    salts: Arc<ss2022::server::SaltFilter>,
    udp: bool,
}

impl Server for Ss2022 {
    fn build(protocol: &InboundProtocol) -> Option<io::Result<Ss2022>> {
        let InboundProtocol::Ss2022 {
            method,
            psk,
            users,
            udp,
        } = protocol
        else {
            return None;
        };
        let users: Vec<&[u8]> = users.iter().map(|u| u.expose().as_slice()).collect();
        let users = ss2022::server::Users::new(*method, psk.expose(), &users, SystemTime::now);
        Some(users.map_err(io::Error::from).map(|users| Ss2022 {
            users: Arc::new(users),
            salts: Arc::new(ss2022::server::SaltFilter::new()),
            udp: *udp,
        }))
    }

    fn listens(&self) -> Listens {
        listens(self.udp)
    }

    async fn serve(
        &self,
        shared: &Arc<Shared>,
        client: Stream,
        peer: SocketAddr,
        admitted: Handshaking,
    ) -> io::Result<()> {
        let (users, salts) = (self.users.clone(), self.salts.clone());
        let table = users.clone();
        let core = ss2022::server::Core::new(users, salts.clone());
        // A single-user inbound's one user changes only with its PSK, which
        // rebuilds it.
        let member =
            |request: &ss2022::server::Request| table.identity(request.user()).map(Member::Id);
        let served = serve(
            shared,
            client,
            admitted,
            core,
            None,
            member,
            |client, request, early| async move {
                let answered = Answered::of(&request);
                const BUF: usize = ss2022::server::ServerStream::BUF_SIZE;
                let codec = request.into_codec();
                relay_framed::<_, BUF>(shared, client, peer, &answered, codec, early, &[]).await
            },
        )
        .await;
        // Once a fill, not once a connection refused.
        if salts.take_full_report() {
            tracing::warn!(
                "inbound {}: {} ({}); new connections are refused until the oldest are {} s old",
                shared.tag,
                ss2022::Ss2022Error::SaltFilterFull.message(),
                ss2022::server::MAX_SALTS,
                ss2022::server::KEEP_SECS,
            );
        }
        served
    }

    fn keep_filters(&mut self, old: &Ss2022) {
        self.salts = old.salts.clone();
    }

    fn keeps(&self, member: &Member) -> bool {
        matches!(member, Member::Id(identity) if self.users.knows(identity))
    }

    fn udp_keys(&self) -> Option<ss_udp::Keys> {
        Some(ss_udp::Keys::Ss2022(self.users.clone()))
    }
}

/// Runs `core` over the client; an authenticated request goes to `open`
/// with the client and what it sent after the request, and runs until it
/// ends or a reload removes its user (`member` names it).
async fn serve<C, F, Fut>(
    shared: &Shared,
    mut client: Stream,
    admitted: Handshaking,
    mut core: C,
    fallback: Option<SocketAddr>,
    member: impl FnOnce(&C::Request) -> Option<Member>,
    open: F,
) -> io::Result<()>
where
    C: ServerCore,
    F: FnOnce(Stream, C::Request, Vec<u8>) -> Fut,
    Fut: Future<Output = io::Result<()>>,
{
    let deadline = shared.handshake_deadline();
    match handshake(shared, &mut client, &mut core).await? {
        Handshake::Refused { reason, read } => {
            // A held client keeps its handshake slot until the deadline;
            // one relayed to the fallback is served like any connection.
            if fallback.is_some() {
                drop(admitted);
            }
            Box::pin(refused(shared, client, read, reason, fallback, deadline)).await
        }
        // With a fallback, a client still short of a request at the
        // deadline goes to it with what it sent, as a refused one does.
        Handshake::TimedOut { error, read } => match fallback {
            None => Err(error),
            Some(_) => {
                drop(admitted);
                let reason = "the request was not whole at the handshake deadline";
                Box::pin(refused(shared, client, read, reason, fallback, deadline)).await
            }
        },
        Handshake::Open { request, early } => {
            drop(admitted);
            let Some(member) = member(&request) else {
                return open(client, request, early).await;
            };
            tokio::select! {
                served = open(client, request, early) => served,
                () = shared.removed(&member) => Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{}: the user was removed by a reload",
                        shared.spec.protocol.name()
                    ),
                )),
            }
        }
    }
}

/// Relays `client`, framed by `codec` (`header`, the server's answer, in
/// clear ahead of the first frame), to where `answered` goes; `early` is
/// what the client sent after its request, still sealed.
async fn relay_framed<C: StreamCodec + Unpin, const BUF: usize>(
    shared: &Shared,
    client: Stream,
    peer: SocketAddr,
    answered: &Answered,
    codec: C,
    early: Vec<u8>,
    header: &[u8],
) -> io::Result<()> {
    let framed = Framed::<_, _, BUF>::with_header(client, codec, early, header);
    open_and_relay(shared, framed, peer, answered, Vec::new()).await
}

/// A UDP association over the packets inside `client`'s stream, framed by
/// `codec`, after `header` (the server's answer); `early` is what the
/// client sent after its request, the first of its packets.
async fn relay_packets<S, C: DatagramCodec, const BUF: usize>(
    shared: &Shared,
    mut client: S,
    peer: SocketAddr,
    codec: C,
    early: &[u8],
    header: &[u8],
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if !header.is_empty() {
        client.write_all(header).await?;
    }
    let link = StreamDatagrams::<_, _, BUF>::new(client, codec, early)?;
    // Boxed, so that a stream flow's task is not the size of a UDP one's.
    Box::pin(datagrams::relay(shared, link, peer.ip())).await
}

/// A framed protocol's request once its codec is taken: where it goes and
/// the payload that came with it. The codec answers the client, so this
/// stages nothing on either outcome.
struct Answered {
    destination: Address,
    first: Vec<u8>,
}

impl Answered {
    fn of<R: ServerRequest>(request: &R) -> Answered {
        Answered {
            destination: request.destination().clone(),
            first: request.first_bytes().to_vec(),
        }
    }
}

impl ServerRequest for Answered {
    fn destination(&self) -> &Address {
        &self.destination
    }

    fn kind(&self) -> FlowKind {
        FlowKind::Stream
    }

    fn first_bytes(&self) -> &[u8] {
        &self.first
    }

    fn on_connected(&self, _bound: SocketAddr, _out: &mut Vec<u8>) {}

    fn on_connect_failed(&self, _error: io::ErrorKind, _out: &mut Vec<u8>) {}
}
