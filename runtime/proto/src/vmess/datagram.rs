//! A VMess UDP flow's body, as a [`DatagramCodec`]: one target per flow,
//! named by the request header, and each packet one chunk of the stream.
//! The per-packet address is not carried: a packet is sealed for the
//! flow's target whatever `to` says, and every packet opened is
//! attributed to that target: a VMess sub-link carries one target.

use std::io;
use std::ops::Range;

use super::body::{BodyOpener, BodySealer, HEADROOM, TAILROOM};
use super::response::ResponseOpener;
use super::security::Layout;
use super::session::Session;
use crate::codec::{DatagramCodec, Opened, Packet};
use crate::Address;

pub struct VmessDatagram {
    sealer: BodySealer,
    /// Until the server's response header is checked.
    response: Option<ResponseOpener>,
    opener: BodyOpener,
    target: Address,
    /// Bytes at the front of the next input already opened: the response
    /// header, and empty chunks, which carry no packet.
    opened: usize,
}

impl VmessDatagram {
    pub fn new(session: &Session, target: Address) -> io::Result<Self> {
        Ok(Self {
            sealer: BodySealer::new(
                session.security,
                true,
                &session.request,
                &session.padding_seed,
            )?,
            response: Some(ResponseOpener::new(
                &session.response,
                session.response_auth,
            )?),
            opener: BodyOpener::new(session.security, true, &session.response)?,
            target,
            opened: 0,
        })
    }

    /// The server's side of a UDP request's `session` to `target`, laid
    /// out as its options say: packets opened from the client are bound for
    /// `target`, and the response header is staged before the first reply
    /// by the request, not by this codec.
    pub fn server(session: &Session, layout: Layout, target: Address) -> io::Result<Self> {
        let (sealer, opener) = session.server_body(layout)?;
        Ok(Self {
            sealer,
            response: None,
            opener,
            target,
            opened: 0,
        })
    }
}

impl DatagramCodec for VmessDatagram {
    const HEADROOM: usize = HEADROOM;
    const TAILROOM: usize = TAILROOM;

    fn seal_to(&mut self, buf: &mut [u8], len: usize, _to: &Address) -> io::Result<Range<usize>> {
        self.sealer.seal(buf, len)
    }

    fn open_from(&mut self, buf: &mut [u8]) -> io::Result<Option<Packet>> {
        let mut at = self.opened;
        loop {
            let Some(rest) = buf.get_mut(at..) else {
                return Ok(None);
            };
            let opened = match &mut self.response {
                Some(response) => response.open(rest)?,
                None => self.opener.open(rest)?,
            };
            match opened {
                Opened::NeedMore { .. } => {
                    self.opened = at;
                    return Ok(None);
                }
                Opened::Frame { consumed, payload } if payload.is_empty() => {
                    self.response = None;
                    at += consumed;
                }
                Opened::Frame { consumed, payload } => {
                    self.opened = 0;
                    return Ok(Some(Packet {
                        consumed: at + consumed,
                        peer: self.target.clone(),
                        payload: at + payload.start..at + payload.end,
                    }));
                }
            }
        }
    }
}
