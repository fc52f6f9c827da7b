//! A VMess TCP flow's body, as a [`StreamCodec`]: our chunks sealed in
//! place, and on a client the server's response header checked on the
//! first open, before its chunks. A server's stream seals with the response
//! keys and opens with the request's; its response header is staged
//! before (by the request's `on_connected`), not by this codec.

use std::io;
use std::ops::Range;

use super::body::{BodyOpener, BodySealer, HEADROOM, TAILROOM};
use super::response::ResponseOpener;
use super::security::Layout;
use super::session::Session;
use crate::codec::{Opened, StreamCodec};

pub struct VmessStream {
    sealer: BodySealer,
    /// Until the server's response header is checked.
    response: Option<ResponseOpener>,
    opener: BodyOpener,
}

impl VmessStream {
    pub fn new(session: &Session) -> io::Result<Self> {
        Ok(Self {
            sealer: BodySealer::new(
                session.security,
                false,
                &session.request,
                &session.padding_seed,
            )?,
            response: Some(ResponseOpener::new(
                &session.response,
                session.response_auth,
            )?),
            opener: BodyOpener::new(session.security, false, &session.response)?,
        })
    }

    /// The server's side of a TCP request's `session`, laid out as its
    /// options say.
    pub fn server(session: &Session, layout: Layout) -> io::Result<Self> {
        let (sealer, opener) = session.server_body(layout)?;
        Ok(Self {
            sealer,
            response: None,
            opener,
        })
    }
}

impl StreamCodec for VmessStream {
    const HEADROOM: usize = HEADROOM;
    const TAILROOM: usize = TAILROOM;
    /// 16 KiB a chunk: a sealed chunk's 16-bit length has room for twice
    /// that, and v2ray and sing-box read chunks of any length it allows.
    const MAX_PAYLOAD: usize = 16 * 1024;

    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        self.sealer.seal(buf, len)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        let Some(response) = &mut self.response else {
            return self.opener.open(buf);
        };
        let opened = response.open(buf)?;
        if let Opened::Frame { .. } = opened {
            self.response = None;
        }
        Ok(opened)
    }

    /// VMess's end of a direction, as v2ray sends it: an empty chunk
    /// (its length, tag and padding only) under a chunked layout; nothing
    /// but the stream's end without one.
    fn seal_end(&mut self, buf: &mut [u8]) -> io::Result<Range<usize>> {
        self.sealer.seal(buf, 0)
    }

    fn ended(&self) -> bool {
        self.opener.ended()
    }

    fn finish(&mut self) -> io::Result<()> {
        match self.response {
            Some(_) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "vmess: the server closed the connection without a response (a wrong id is refused so)",
            )),
            None => Ok(()),
        }
    }
}
