//! What can go wrong in the record layer: each a static text naming the
//! alert RFC 8446 says to close with, and the io::Error kind a flow fails
//! with.

use std::fmt;
use std::io;

use super::alert::description_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A record whose tag does not match: bytes changed on the way, or
    /// keys or sequence numbers out of step with the peer's.
    BadRecordMac,
    /// A record or message that may not come now: a record in the clear
    /// after the handshake, an unknown inner content type, a handshake
    /// message other than NewSessionTicket and KeyUpdate.
    UnexpectedMessage,
    /// More than [`super::MAX_EMPTY_RECORDS`] empty records in a row.
    TooManyEmptyRecords,
    /// A record longer than RFC 8446 5.2 allows, or a caller's plaintext
    /// over MAX_PLAINTEXT.
    RecordOverflow,
    /// A malformed header, record, alert or handshake message.
    DecodeError,
    /// A KeyUpdate whose request is neither 0 nor 1.
    IllegalParameter,
    /// 2^64 - 1 records under one key: the sequence number would wrap.
    SequenceExhausted,
    /// A traffic secret of another length than its suite's hash.
    BadSecret,
    /// A caller's buffer too short for the sealed record.
    BufferTooSmall,
    /// The peer sent this alert (any but close_notify).
    Alert(u8),
}

impl Error {
    /// The alert description to close the connection with (RFC 8446 6.2):
    /// what we answer a peer's fault with; None for our own limits and for
    /// a peer's alert, which is answered with nothing.
    pub fn alert_to_send(self) -> Option<u8> {
        match self {
            Self::BadRecordMac => Some(20),
            Self::UnexpectedMessage | Self::TooManyEmptyRecords => Some(10),
            Self::RecordOverflow => Some(22),
            Self::DecodeError => Some(50),
            Self::IllegalParameter => Some(47),
            Self::SequenceExhausted | Self::BadSecret | Self::BufferTooSmall | Self::Alert(_) => {
                None
            }
        }
    }

    /// What a peer sent is InvalidData, its alert ConnectionAborted; what
    /// a caller asked for is InvalidInput.
    pub fn kind(self) -> io::ErrorKind {
        match self {
            Self::BadRecordMac
            | Self::UnexpectedMessage
            | Self::TooManyEmptyRecords
            | Self::RecordOverflow
            | Self::DecodeError
            | Self::IllegalParameter => io::ErrorKind::InvalidData,
            Self::Alert(_) => io::ErrorKind::ConnectionAborted,
            Self::BadSecret | Self::BufferTooSmall => io::ErrorKind::InvalidInput,
            Self::SequenceExhausted => io::ErrorKind::Other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match *self {
            Self::BadRecordMac => "tls record failed authentication (bad_record_mac)",
            Self::UnexpectedMessage => {
                "tls record or message not allowed after the handshake (unexpected_message)"
            }
            Self::TooManyEmptyRecords => {
                "tls peer sent more than 32 empty records in a row (unexpected_message)"
            }
            Self::RecordOverflow => "tls record longer than the protocol allows (record_overflow)",
            Self::DecodeError => "tls record or message malformed (decode_error)",
            Self::IllegalParameter => "tls key update request neither 0 nor 1 (illegal_parameter)",
            Self::SequenceExhausted => "tls record sequence number exhausted",
            Self::BadSecret => "tls traffic secret of the wrong length for its cipher suite",
            Self::BufferTooSmall => "tls buffer too short for the sealed record",
            Self::Alert(description) => {
                return match description_name(description) {
                    Some(name) => write!(f, "tls peer sent alert {description} ({name})"),
                    None => write!(f, "tls peer sent alert {description}"),
                };
            }
        };
        f.write_str(text)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(error: Error) -> Self {
        io::Error::new(error.kind(), error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_the_alert() {
        assert_eq!(
            Error::BadRecordMac.to_string(),
            "tls record failed authentication (bad_record_mac)"
        );
        assert_eq!(
            Error::Alert(40).to_string(),
            "tls peer sent alert 40 (handshake_failure)"
        );
        assert_eq!(Error::Alert(200).to_string(), "tls peer sent alert 200");
        let error = io::Error::from(Error::Alert(80));
        assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted);
        assert_eq!(error.to_string(), "tls peer sent alert 80 (internal_error)");
        assert_eq!(
            io::Error::from(Error::DecodeError).kind(),
            io::ErrorKind::InvalidData
        );
    }
}
