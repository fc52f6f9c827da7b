//! vmess: a VMess AEAD tunnel per TCP flow over the upstream's transport,
//! framed by the VMess body codec; and per fan-out sub-link a UDP flow to
//! one target, the destination of the packet that opened it, each packet
//! one chunk of the tunnel (the per-packet address is not carried, and
//! every reply is attributed to that target).
//!
//! Each request draws its keys, IVs and padding from the system's CSPRNG
//! and takes its timestamp when it is sealed, after the transport is up,
//! so the server never sees a stale time. The auth id's four free bytes
//! count up from a random start per outbound: within one outbound no two
//! requests of the same second share an auth id (v2ray refuses a repeat
//! as `invalid user > replayed request`), and other processes with the
//! same id start elsewhere.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use etemenanki_ir::spec::OutboundProtocol;
use etemenanki_ir::spec::{Uuid, VmessSecurity};
use etemenanki_proto::vmess::{
    Command, Entropy, Request, Security, Session, User, VmessDatagram, VmessStream,
};
use etemenanki_proto::Address;
use etemenanki_transport::{Connector, Stream};
use ring::rand::{SecureRandom, SystemRandom};

use super::handshake::{first_bytes, framed_with_request, handshake};
use super::protocol::{Build, Protocol};
use crate::framed::Framed;
use crate::own_inbounds::OwnInbounds;
use crate::plane::Plane;
use crate::stream_datagrams::StreamDatagrams;

/// The VMess client's buffer (32 KiB): each of a flow's two.
pub const VMESS_BUF: usize = 32 * 1024;

pub type VmessFramed = Framed<Stream, VmessStream, VMESS_BUF>;

pub type VmessUdp = StreamDatagrams<Stream, VmessDatagram, VMESS_BUF>;

pub struct Vmess {
    connector: Connector,
    user: User,
    security: Security,
    /// The next auth id's four free bytes.
    next_id: AtomicU32,
    random: SystemRandom,
}

fn random_failed() -> io::Error {
    io::Error::other("vmess: the system's random source failed")
}

/// Whether this CPU has AES instructions, which is what `auto` asks.
fn has_aes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

impl Vmess {
    pub fn new(connector: Connector, id: &Uuid, security: VmessSecurity) -> io::Result<Vmess> {
        let random = SystemRandom::new();
        let mut start = [0u8; 4];
        random.fill(&mut start).map_err(|_| random_failed())?;
        Ok(Vmess {
            connector,
            user: User::new(&id.0),
            security: Security::resolve(security, has_aes()),
            next_id: AtomicU32::new(u32::from_be_bytes(start)),
            random,
        })
    }

    /// Seals a request now, and the session its body runs under.
    fn request(&self, command: Command, target: &Address) -> io::Result<(Request, Session)> {
        let mut bytes = [0u8; Entropy::LEN];
        self.random.fill(&mut bytes).map_err(|_| random_failed())?;
        let entropy = Entropy::from_bytes(&bytes);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_be_bytes();
        let request = Request::new(
            &self.user,
            command,
            target,
            self.security,
            SystemTime::now(),
            id,
            &entropy,
        )?;
        Ok((request, Session::new(self.security, &entropy)))
    }
}

impl Protocol for Vmess {
    type Stream = Box<VmessFramed>;
    type Datagram = Box<VmessUdp>;

    fn build(protocol: &OutboundProtocol, with: &Build) -> Option<io::Result<Vmess>> {
        let OutboundProtocol::Vmess {
            upstream,
            id,
            security,
        } = protocol
        else {
            return None;
        };
        Some(
            with.connector(upstream)
                .and_then(|connector| Vmess::new(connector, id.expose(), *security)),
        )
    }

    /// Dials the server; the request leaves with the first payload
    /// ([`first_bytes`]). The server answers only with its first bytes,
    /// whose response header is checked on the first read.
    async fn connect(
        &self,
        destination: &Address,
        _: Option<&[IpAddr]>,
        _: &OwnInbounds,
    ) -> io::Result<Box<VmessFramed>> {
        let stream = self.connector.connect().await?;
        let (mut request, session) = self.request(Command::Tcp, destination)?;
        let header = first_bytes(&mut request)?;
        let codec = VmessStream::new(&session)?;
        Ok(Box::new(framed_with_request(stream, codec, &header)?))
    }

    /// Opens a UDP flow to `target`, the first packet's destination.
    async fn associate(
        &self,
        target: &Address,
        _: Arc<ArcSwap<Plane>>,
    ) -> io::Result<Box<VmessUdp>> {
        let mut stream = self.connector.connect().await?;
        let (mut request, session) = self.request(Command::Udp, target)?;
        let ((), ahead) = handshake(&mut stream, &mut request).await?;
        let codec = VmessDatagram::new(&session, target.clone())?;
        StreamDatagrams::new(stream, codec, &ahead).map(Box::new)
    }
}
