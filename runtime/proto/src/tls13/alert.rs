//! Alerts (RFC 8446 6): the close_notify we send, and what a peer's alert
//! record means.

use super::Error;

/// The body of our close_notify alert (warning, close_notify).
pub const CLOSE_NOTIFY: [u8; 2] = [1, 0];

/// What an Alert record's plaintext says: Ok(()) for close_notify (the end
/// of the stream), Err(Error::Alert(description)) for any other,
/// DecodeError unless exactly 2 bytes. The level is not read: TLS 1.3
/// treats every alert but the closure alerts as fatal whatever its level
/// (6.2). user_canceled, the other closure alert, is an error here: after
/// the handshake a peer that means to stop cleanly sends close_notify.
pub fn alert(plaintext: &[u8]) -> Result<(), Error> {
    match *plaintext {
        [_, 0] => Ok(()),
        [_, description] => Err(Error::Alert(description)),
        _ => Err(Error::DecodeError),
    }
}

/// The name RFC 8446 6 gives an alert description (those TLS 1.3 defines).
pub(super) fn description_name(description: u8) -> Option<&'static str> {
    Some(match description {
        0 => "close_notify",
        10 => "unexpected_message",
        20 => "bad_record_mac",
        22 => "record_overflow",
        40 => "handshake_failure",
        42 => "bad_certificate",
        43 => "unsupported_certificate",
        44 => "certificate_revoked",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        47 => "illegal_parameter",
        48 => "unknown_ca",
        49 => "access_denied",
        50 => "decode_error",
        51 => "decrypt_error",
        70 => "protocol_version",
        71 => "insufficient_security",
        80 => "internal_error",
        86 => "inappropriate_fallback",
        90 => "user_canceled",
        109 => "missing_extension",
        110 => "unsupported_extension",
        112 => "unrecognized_name",
        113 => "bad_certificate_status_response",
        115 => "unknown_psk_identity",
        116 => "certificate_required",
        120 => "no_application_protocol",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_notify_ends_the_stream_and_any_other_alert_is_an_error() {
        assert_eq!(alert(&CLOSE_NOTIFY), Ok(()));
        assert_eq!(alert(&[2, 0]), Ok(()));
        assert_eq!(alert(&[2, 40]), Err(Error::Alert(40)));
        assert_eq!(alert(&[1, 90]), Err(Error::Alert(90)));
        assert_eq!(alert(&[2]), Err(Error::DecodeError));
        assert_eq!(alert(&[2, 0, 0]), Err(Error::DecodeError));
        assert_eq!(alert(&[]), Err(Error::DecodeError));
    }
}
