//! The VLESS response header: a version byte, an addons length and that
//! many addons bytes, in front of the server's first bytes. Skipped byte by
//! byte, so a header split across reads needs no buffer of its own.

use std::io;

use super::VERSION;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Version,
    AddonsLen,
    Addons(u8),
    Done,
}

/// Skips the response header at the start of what the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHeader {
    state: State,
}

impl Default for ResponseHeader {
    fn default() -> Self {
        ResponseHeader {
            state: State::Version,
        }
    }
}

impl ResponseHeader {
    /// Whether the whole header has been skipped.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Takes the header bytes at the start of `input`, the next bytes the
    /// server sent; returns how many were the header's. What follows them
    /// is the stream's.
    pub fn skip(&mut self, input: &[u8]) -> io::Result<usize> {
        let mut used = 0;
        while used < input.len() {
            let byte = input[used];
            self.state = match self.state {
                State::Done => break,
                State::Version if byte != VERSION => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "vless: unexpected response version",
                    ))
                }
                State::Version => State::AddonsLen,
                State::AddonsLen if byte == 0 => State::Done,
                State::AddonsLen => State::Addons(byte),
                State::Addons(1) => State::Done,
                State::Addons(left) => State::Addons(left - 1),
            };
            used += 1;
        }
        Ok(used)
    }

    /// The length of a whole header at the start of `input`, `Ok(None)`
    /// when it is not all there yet: for framing that cannot keep a partial
    /// skip, because the same bytes are shown again.
    pub fn whole_len(input: &[u8]) -> io::Result<Option<usize>> {
        let mut header = ResponseHeader::default();
        let used = header.skip(input)?;
        Ok(header.done().then_some(used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_skipped_whole_and_what_follows_is_left() {
        let mut header = ResponseHeader::default();
        assert_eq!(header.skip(b"\x00\x00HTTP/1.1 200").unwrap(), 2);
        assert!(header.done());
        assert_eq!(header.skip(b"more").unwrap(), 0, "nothing after the header");
        let mut header = ResponseHeader::default();
        assert_eq!(header.skip(b"\x00\x03abcrest").unwrap(), 5);
        assert!(header.done());
    }

    #[test]
    fn a_header_split_at_every_byte_is_skipped_the_same() {
        let wire = b"\x00\x04addsdata";
        for cut in 0..wire.len() {
            let mut header = ResponseHeader::default();
            let first = header.skip(&wire[..cut]).unwrap();
            let second = header.skip(&wire[first..]).unwrap();
            assert_eq!((first + second, header.done()), (6, true), "cut at {cut}");
        }
        assert_eq!(ResponseHeader::whole_len(b"\x00\x04add").unwrap(), None);
        assert_eq!(
            ResponseHeader::whole_len(b"\x00\x04addsX").unwrap(),
            Some(6)
        );
    }

    #[test]
    fn another_version_is_refused() {
        let e = ResponseHeader::default().skip(b"\x01\x00").unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                io::ErrorKind::InvalidData,
                "vless: unexpected response version".into()
            )
        );
    }
}
