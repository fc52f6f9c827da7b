//! vless: a tunnel per TCP flow over the upstream's transport, the request
//! header written at dial and the response header skipped on the first
//! read ([`VlessStream`]).

use std::io;

use etemenanki_ir::spec::Uuid;
use etemenanki_proto::vless::Request;
use etemenanki_proto::Address;
use etemenanki_transport::Connector;

use super::handshake::dial;
use super::vless_stream::VlessStream;
use super::OutboundStream;

pub struct Vless {
    connector: Connector,
    id: [u8; 16],
}

impl Vless {
    pub fn new(connector: Connector, id: &Uuid) -> Vless {
        Vless {
            connector,
            id: id.0,
        }
    }

    /// Dials the server and writes the request. VLESS answers nothing
    /// before the target's first bytes, so the dial resolves once the
    /// request is flushed: an unreachable server, a refused connection and
    /// a failed TLS or WebSocket handshake fail it; an unknown id closes
    /// the stream, which its first read reports.
    pub async fn connect(&self, destination: &Address) -> io::Result<OutboundStream> {
        let mut codec = Request::tcp(&self.id, destination);
        // The request opens without reading, so nothing was read ahead;
        // over a WebSocket with early data it rides in the upgrade.
        let (stream, (), _) = dial(&self.connector, &mut codec).await?;
        Ok(OutboundStream::Vless(VlessStream::new(stream)))
    }
}
