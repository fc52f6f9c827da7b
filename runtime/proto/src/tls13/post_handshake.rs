//! Handshake messages after the handshake (RFC 8446 4.6): what a peer may
//! still send on an established session, read as it comes, record by
//! record.
//!
//! A NewSessionTicket only matters to a client that resumes, and the
//! sessions handed to this layer are past the point where OpenSSL stores
//! tickets, so a server's tickets are skipped unread, however long and
//! however split. Only a server sends tickets (RFC 8446 4.6.1): one from a
//! client is unexpected_message, as OpenSSL and Go answer it. A KeyUpdate's
//! one-byte body is the only handshake byte ever read. So the reader keeps
//! a few bytes of state and no buffer.

use super::Error;

const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;
/// A handshake message header: type and 24-bit length.
const MESSAGE_HEADER_LEN: usize = 4;

/// The body of the KeyUpdate we send: update_not_requested.
pub const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [KEY_UPDATE, 0, 0, 1, 0];

/// A whole post-handshake message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// A server's NewSessionTicket, skipped.
    Ticket,
    /// The peer's KeyUpdate: its sending keys change after this record.
    /// `update_requested`: it asks for our KeyUpdate back (RFC 8446 4.6.3).
    KeyUpdate { update_requested: bool },
}

/// The side whose post-handshake messages a reader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// A client: KeyUpdates only.
    Client,
    /// A server: KeyUpdates and NewSessionTickets.
    Server,
}

/// Post-handshake handshake messages, which may be split across records or
/// several in one.
#[derive(Clone, Copy, Debug)]
pub struct PostHandshake {
    sender: Sender,
    state: State,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Between messages (`read` 0) or inside a message header.
    Header {
        header: [u8; MESSAGE_HEADER_LEN],
        read: u8,
    },
    /// Inside a NewSessionTicket's body, `left` bytes to skip.
    Ticket { left: u32 },
    /// A KeyUpdate's header read; its body byte next.
    KeyUpdate,
}

impl Default for State {
    fn default() -> Self {
        State::Header {
            header: [0; MESSAGE_HEADER_LEN],
            read: 0,
        }
    }
}

impl PostHandshake {
    /// A reader of the messages `sender` sends.
    pub fn new(sender: Sender) -> PostHandshake {
        PostHandshake {
            sender,
            state: State::default(),
        }
    }

    /// Feeds the plaintext of one Handshake record; calls `on` for each
    /// whole message. A server's NewSessionTicket (type 4) is skipped
    /// whatever its length (it may span records), a client's is
    /// UnexpectedMessage; KeyUpdate (type 24) must have a 1-byte
    /// body 0 or 1 (else DecodeError / IllegalParameter) and end its record
    /// (RFC 8446 5.1: a message before a key change aligns with a record
    /// boundary; else UnexpectedMessage), so `on` may change the keys at
    /// once; any other type (a CertificateRequest for post-handshake auth,
    /// a second Finished...) is UnexpectedMessage. A message's declared
    /// length is bounded by the wire's 24 bits and never buffered.
    pub fn feed(&mut self, mut bytes: &[u8], mut on: impl FnMut(Message)) -> Result<(), Error> {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Header { header, read } => {
                    let at = usize::from(*read);
                    let take = (MESSAGE_HEADER_LEN - at).min(bytes.len());
                    header[at..at + take].copy_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    *read += take as u8;
                    // Refused at its first byte, not once its header is in.
                    match (header[0], self.sender) {
                        (KEY_UPDATE, _) | (NEW_SESSION_TICKET, Sender::Server) => {}
                        _ => return Err(Error::UnexpectedMessage),
                    }
                    if usize::from(*read) < MESSAGE_HEADER_LEN {
                        continue;
                    }
                    let len = u32::from_be_bytes([0, header[1], header[2], header[3]]);
                    self.state = match header[0] {
                        KEY_UPDATE if len != 1 => return Err(Error::DecodeError),
                        KEY_UPDATE => State::KeyUpdate,
                        _ => State::Ticket { left: len },
                    };
                }
                State::Ticket { left } => {
                    let take = (*left as usize).min(bytes.len());
                    bytes = &bytes[take..];
                    *left -= take as u32;
                }
                State::KeyUpdate => {
                    let update_requested = match bytes[0] {
                        0 => false,
                        1 => true,
                        _ => return Err(Error::IllegalParameter),
                    };
                    if bytes.len() > 1 {
                        return Err(Error::UnexpectedMessage);
                    }
                    bytes = &[];
                    self.state = State::default();
                    on(Message::KeyUpdate { update_requested });
                }
            }
            // A ticket ends when its last byte is skipped, or at its header
            // when it declares no body.
            if let State::Ticket { left: 0 } = self.state {
                self.state = State::default();
                on(Message::Ticket);
            }
        }
        Ok(())
    }

    /// Whether a message is partly read (a KeyUpdate sent by us must not
    /// interleave; and an alert or application data arriving mid-message
    /// is UnexpectedMessage for the caller).
    pub fn is_mid_message(&self) -> bool {
        !matches!(self.state, State::Header { read: 0, .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(reader: &mut PostHandshake, feeds: &[&[u8]]) -> Result<Vec<Message>, Error> {
        let mut messages = Vec::new();
        for bytes in feeds {
            reader.feed(bytes, |message| messages.push(message))?;
        }
        Ok(messages)
    }

    fn ticket(body_len: usize) -> Vec<u8> {
        let mut message = vec![NEW_SESSION_TICKET];
        message.extend_from_slice(&(body_len as u32).to_be_bytes()[1..]);
        message.extend((0..body_len).map(|i| i as u8));
        message
    }

    #[test]
    fn a_ticket_split_over_three_feeds_is_one_message() {
        let message = ticket(300);
        let mut reader = PostHandshake::new(Sender::Server);
        let mut seen = Vec::new();
        for part in [&message[..2], &message[2..150], &message[150..]] {
            assert!(seen.is_empty());
            reader.feed(part, |m| seen.push(m)).unwrap();
            assert_eq!(reader.is_mid_message(), seen.is_empty());
        }
        assert_eq!(seen, [Message::Ticket]);
        assert!(!reader.is_mid_message());
    }

    #[test]
    fn two_messages_in_one_feed_are_two_messages() {
        let mut bytes = ticket(57);
        bytes.extend_from_slice(&ticket(0));
        bytes.extend_from_slice(&[KEY_UPDATE, 0, 0, 1, 1]);
        let mut reader = PostHandshake::new(Sender::Server);
        assert_eq!(
            feed_all(&mut reader, &[&bytes]),
            Ok(vec![
                Message::Ticket,
                Message::Ticket,
                Message::KeyUpdate {
                    update_requested: true
                }
            ])
        );
        assert!(!reader.is_mid_message());
    }

    #[test]
    fn a_ticket_of_the_longest_length_is_skipped_unbuffered() {
        let mut reader = PostHandshake::new(Sender::Server);
        let chunk = [0; 1 << 16];
        reader
            .feed(&[NEW_SESSION_TICKET, 0xff, 0xff, 0xff], |_| panic!())
            .unwrap();
        let mut left = (1 << 24) - 1;
        let mut seen = 0;
        while left > 0 {
            let take = left.min(chunk.len());
            reader.feed(&chunk[..take], |_| seen += 1).unwrap();
            left -= take;
        }
        assert_eq!(seen, 1);
        assert!(!reader.is_mid_message());
    }

    #[test]
    fn a_key_update_may_span_records_but_must_end_one() {
        let mut reader = PostHandshake::new(Sender::Server);
        assert_eq!(
            feed_all(&mut reader, &[&[KEY_UPDATE, 0], &[0, 1], &[0]]),
            Ok(vec![Message::KeyUpdate {
                update_requested: false
            }])
        );
        let mut reader = PostHandshake::new(Sender::Server);
        let mut bytes = KEY_UPDATE_NOT_REQUESTED.to_vec();
        bytes.extend_from_slice(&ticket(3));
        assert_eq!(
            feed_all(&mut reader, &[&bytes]),
            Err(Error::UnexpectedMessage)
        );
    }

    #[test]
    fn a_key_update_with_request_2_is_an_illegal_parameter() {
        let mut reader = PostHandshake::new(Sender::Server);
        assert_eq!(
            feed_all(&mut reader, &[&[KEY_UPDATE, 0, 0, 1, 2]]),
            Err(Error::IllegalParameter)
        );
    }

    #[test]
    fn a_key_update_of_another_length_is_a_decode_error() {
        for bytes in [&[KEY_UPDATE, 0, 0, 0][..], &[KEY_UPDATE, 0, 0, 2, 0, 0]] {
            let mut reader = PostHandshake::new(Sender::Server);
            assert_eq!(feed_all(&mut reader, &[bytes]), Err(Error::DecodeError));
        }
    }

    #[test]
    fn any_other_message_type_is_unexpected_at_its_first_byte() {
        // CertificateRequest (post-handshake auth), Finished, ClientHello.
        for kind in [13, 20, 1, 0] {
            let mut reader = PostHandshake::new(Sender::Server);
            assert_eq!(
                feed_all(&mut reader, &[&[kind]]),
                Err(Error::UnexpectedMessage)
            );
        }
        let mut reader = PostHandshake::new(Sender::Server);
        let mut bytes = ticket(2);
        bytes.push(13);
        assert_eq!(
            feed_all(&mut reader, &[&bytes]),
            Err(Error::UnexpectedMessage)
        );
    }

    #[test]
    fn our_key_update_body_is_update_not_requested() {
        let mut reader = PostHandshake::new(Sender::Server);
        assert_eq!(
            feed_all(&mut reader, &[&KEY_UPDATE_NOT_REQUESTED]),
            Ok(vec![Message::KeyUpdate {
                update_requested: false
            }])
        );
    }

    #[test]
    fn a_clients_ticket_is_unexpected_at_its_first_byte_and_its_key_update_is_read() {
        let mut reader = PostHandshake::new(Sender::Client);
        assert_eq!(
            feed_all(&mut reader, &[&ticket(0)[..1]]),
            Err(Error::UnexpectedMessage)
        );
        let mut reader = PostHandshake::new(Sender::Client);
        assert_eq!(
            feed_all(&mut reader, &[&[KEY_UPDATE, 0, 0, 1, 1]]),
            Ok(vec![Message::KeyUpdate {
                update_requested: true
            }])
        );
        assert_eq!(
            feed_all(&mut reader, &[&ticket(4)]),
            Err(Error::UnexpectedMessage)
        );
    }
}
