//! Record protection (RFC 8446 5.2-5.4): the outer header every protected
//! record has, and sealing and opening one record in place.
//!
//! A protected record is `23 03 03 <length>` and a body of AEAD ciphertext
//! and tag; the header is the additional data, and the plaintext ends with
//! the real content type and optional zero padding. We never pad.

use core::ops::Range;

use aws_lc_rs::aead::Aad;

use super::{Error, Keys, HEADER_LEN, MAX_BODY, MAX_PLAINTEXT, SEAL_OVERHEAD, TAG_LEN};

/// The outer type of every protected record, and the legacy version.
const OUTER_TYPE: u8 = 23;
const LEGACY_VERSION: [u8; 2] = [3, 3];
/// The shortest body: a tag and the inner content type.
const MIN_BODY: usize = TAG_LEN + 1;
/// Empty records a peer may send in a row: OpenSSL's limit
/// (`MAX_EMPTY_RECORDS`; Go's is 16). An empty application-data record
/// carries nothing, so an endless run of them is a peer keeping a reader
/// busy for nothing.
pub const MAX_EMPTY_RECORDS: u8 = 32;

/// Counts the empty records opened in a row: a record with content ends
/// the run, the one past [`MAX_EMPTY_RECORDS`] is TooManyEmptyRecords.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmptyRecords {
    run: u8,
}

impl EmptyRecords {
    /// Notes an opened record whose plaintext is `len` bytes.
    pub fn note(&mut self, len: usize) -> Result<(), Error> {
        if len > 0 {
            self.run = 0;
            return Ok(());
        }
        if self.run == MAX_EMPTY_RECORDS {
            return Err(Error::TooManyEmptyRecords);
        }
        self.run += 1;
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    Alert,
    Handshake,
    ApplicationData,
}

impl ContentType {
    fn byte(self) -> u8 {
        match self {
            Self::Alert => 21,
            Self::Handshake => 22,
            Self::ApplicationData => 23,
        }
    }

    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            21 => Some(Self::Alert),
            22 => Some(Self::Handshake),
            23 => Some(Self::ApplicationData),
            _ => None,
        }
    }
}

/// The whole length (header + body) of the record whose 5-byte header this
/// is. Checks the outer type is 23 (application_data; after the handshake
/// nothing else may appear: a 20 change_cipher_spec or 21/22 in the clear
/// is UnexpectedMessage), the legacy version 0x0303 (DecodeError, as
/// OpenSSL answers), and 17 <= body <= MAX_BODY (RecordOverflow beyond,
/// DecodeError below: no room for a tag and a content type).
pub fn record_len(header: &[u8; HEADER_LEN]) -> Result<usize, Error> {
    if header[0] != OUTER_TYPE {
        return Err(Error::UnexpectedMessage);
    }
    if header[1..3] != LEGACY_VERSION {
        return Err(Error::DecodeError);
    }
    let body = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if body > MAX_BODY {
        return Err(Error::RecordOverflow);
    }
    if body < MIN_BODY {
        return Err(Error::DecodeError);
    }
    Ok(HEADER_LEN + body)
}

impl Keys {
    /// Seals one record in place. `buf[HEADER_LEN..HEADER_LEN + len]` holds
    /// the plaintext (len <= MAX_PLAINTEXT, else RecordOverflow; 0 is
    /// sealed as any other); writes the header (type 23, legacy version
    /// 0x0303, length), the inner content type byte and the tag, no
    /// padding, and returns the record's length (len + SEAL_OVERHEAD).
    /// `buf.len() >= len + SEAL_OVERHEAD`, else BufferTooSmall. Increments
    /// seq; SequenceExhausted instead of wrapping at 2^64 - 1.
    pub fn seal(&mut self, kind: ContentType, buf: &mut [u8], len: usize) -> Result<usize, Error> {
        if len > MAX_PLAINTEXT {
            return Err(Error::RecordOverflow);
        }
        let record = buf
            .get_mut(..len + SEAL_OVERHEAD)
            .ok_or(Error::BufferTooSmall)?;
        record[HEADER_LEN + len] = kind.byte();
        self.protect(record)?;
        Ok(record.len())
    }

    /// Protects `record` whatever its inner plaintext: a header's room, the
    /// inner plaintext (content, type, padding), a tag's room. `seal` is
    /// the one caller outside tests, which build malformed plaintexts with
    /// it.
    pub(super) fn protect(&mut self, record: &mut [u8]) -> Result<(), Error> {
        if self.seq == u64::MAX {
            return Err(Error::SequenceExhausted);
        }
        let body_len = (record.len() - HEADER_LEN) as u16;
        let (header, body) = record.split_at_mut(HEADER_LEN);
        header[0] = OUTER_TYPE;
        header[1..3].copy_from_slice(&LEGACY_VERSION);
        header[3..].copy_from_slice(&body_len.to_be_bytes());
        let (inner, tag_out) = body.split_at_mut(body.len() - TAG_LEN);
        // aws-lc-rs refuses only inputs longer than the algorithm allows
        // (gigabytes), never a record.
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(), Aad::from(&*header), inner)
            .map_err(|_| Error::RecordOverflow)?;
        tag_out.copy_from_slice(tag.as_ref());
        self.seq += 1;
        Ok(())
    }

    /// Opens one whole record in place (`record` = header + body, as
    /// `record_len` split it): decrypts, strips the zero padding, reads the
    /// inner content type, increments seq, and returns the content type and
    /// the plaintext's range inside `record`.
    ///
    /// Errors: BadRecordMac (tag fails), UnexpectedMessage (inner type not
    /// 21/22/23, or all zeros), RecordOverflow (plaintext > MAX_PLAINTEXT),
    /// DecodeError (an empty alert or handshake record, or a malformed
    /// header, or a `record` of another length than its header says),
    /// SequenceExhausted (a record after 2^64 - 1 of them). After an error
    /// the contents of `record` are unspecified.
    pub fn open(&mut self, record: &mut [u8]) -> Result<(ContentType, Range<usize>), Error> {
        let header = record.first_chunk().ok_or(Error::DecodeError)?;
        if record_len(header)? != record.len() {
            return Err(Error::DecodeError);
        }
        if self.seq == u64::MAX {
            return Err(Error::SequenceExhausted);
        }
        let (header, body) = record.split_at_mut(HEADER_LEN);
        let plaintext = self
            .key
            .open_in_place(self.nonce(), Aad::from(&*header), body)
            .map_err(|_| Error::BadRecordMac)?;
        self.seq += 1;
        // The content type is the last byte that is not zero (RFC 8446 5.4).
        let type_at = plaintext
            .iter()
            .rposition(|&byte| byte != 0)
            .ok_or(Error::UnexpectedMessage)?;
        if type_at > MAX_PLAINTEXT {
            return Err(Error::RecordOverflow);
        }
        let kind = ContentType::from_byte(plaintext[type_at]).ok_or(Error::UnexpectedMessage)?;
        // Zero-length application data is allowed; an empty alert or
        // handshake fragment is not (RFC 8446 5.1).
        if type_at == 0 && kind != ContentType::ApplicationData {
            return Err(Error::DecodeError);
        }
        Ok((kind, HEADER_LEN..HEADER_LEN + type_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hex;
    use crate::tls13::Suite;

    fn pair(suite: Suite) -> (Keys, Keys) {
        let secret: Vec<u8> = (0..suite.hash_len() as u8).collect();
        (
            Keys::new(suite, &secret, 0).unwrap(),
            Keys::new(suite, &secret, 0).unwrap(),
        )
    }

    const SUITES: [Suite; 3] = [
        Suite::Aes128GcmSha256,
        Suite::Aes256GcmSha384,
        Suite::Chacha20Poly1305Sha256,
    ];

    // RFC 8448 section 3: the server's application data record (its second
    // record under server_application_traffic_secret_0, after the
    // NewSessionTicket) and the client's (its first), both the 50 bytes
    // 00 01 .. 31.
    #[test]
    fn seal_and_open_match_rfc_8448_application_data() {
        let plaintext: Vec<u8> = (0..50).collect();
        for (secret, seq, record) in [
            (
                "a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643",
                1,
                "1703030043 2e937e11ef4ac740e538ad36005fc4a46932fc3225d05f82aa1b36e30efaf97d90e6dffc602dcb
                 501a59a8fcc49c4bf2e5f0a21c0047c2abf332540dd032e167c2955d",
            ),
            (
                "9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5",
                0,
                "1703030043a23f7054b62c94d0affafe8228ba55cbefacea42f914aa66bcab3f2b9819a8a5b46b395bd54a9a
                 20441e2b62974e1f5a6292a2977014bd1e3deae63aeebb21694915e4",
            ),
        ] {
            let secret = hex(secret);
            let record = hex(record);
            let mut sealer = Keys::new(Suite::Aes128GcmSha256, &secret, seq).unwrap();
            let mut buf = vec![0; record.len()];
            buf[HEADER_LEN..HEADER_LEN + 50].copy_from_slice(&plaintext);
            assert_eq!(sealer.seal(ContentType::ApplicationData, &mut buf, 50), Ok(record.len()));
            assert_eq!(buf, record);
            let mut opener = Keys::new(Suite::Aes128GcmSha256, &secret, seq).unwrap();
            let (kind, range) = opener.open(&mut buf).unwrap();
            assert_eq!(kind, ContentType::ApplicationData);
            assert_eq!(buf[range], plaintext[..]);
            assert_eq!(opener.seq(), seq + 1);
        }
    }

    #[test]
    fn every_suite_opens_what_it_sealed_for_every_content_type_and_length() {
        for suite in SUITES {
            let (mut sealer, mut opener) = pair(suite);
            for (kind, len) in [
                (ContentType::ApplicationData, 0),
                (ContentType::ApplicationData, 1),
                (ContentType::Handshake, 5),
                (ContentType::Alert, 2),
                (ContentType::ApplicationData, 1400),
                (ContentType::ApplicationData, MAX_PLAINTEXT),
            ] {
                let mut buf = vec![0; len + SEAL_OVERHEAD + 3];
                for (i, byte) in buf[HEADER_LEN..HEADER_LEN + len].iter_mut().enumerate() {
                    *byte = (i * 7) as u8;
                }
                let expected = buf[HEADER_LEN..HEADER_LEN + len].to_vec();
                let sealed = sealer.seal(kind, &mut buf, len).unwrap();
                assert_eq!(sealed, len + SEAL_OVERHEAD);
                let header: &[u8; HEADER_LEN] = buf.first_chunk().unwrap();
                assert_eq!(record_len(header), Ok(sealed), "{suite:?} {len}");
                assert_eq!(
                    opener.open(&mut buf[..sealed]),
                    Ok((kind, HEADER_LEN..HEADER_LEN + len))
                );
                assert_eq!(buf[HEADER_LEN..HEADER_LEN + len], expected[..]);
            }
            assert_eq!((sealer.seq(), opener.seq()), (6, 6));
        }
    }

    #[test]
    fn a_flipped_bit_or_a_wrong_sequence_number_fails_authentication() {
        for suite in SUITES {
            let (mut sealer, mut opener) = pair(suite);
            let mut buf = [0; 40];
            let len = sealer
                .seal(ContentType::ApplicationData, &mut buf, 10)
                .unwrap();
            let mut flipped = buf;
            flipped[HEADER_LEN + 3] ^= 0x10;
            assert_eq!(opener.open(&mut flipped[..len]), Err(Error::BadRecordMac));
            assert_eq!(opener.seq(), 0);
            opener.seq = 1;
            assert_eq!(opener.open(&mut buf[..len]), Err(Error::BadRecordMac));
        }
    }

    #[test]
    fn the_header_is_authenticated() {
        let (mut sealer, mut opener) = pair(Suite::Aes128GcmSha256);
        let mut buf = [0; 40];
        let len = sealer
            .seal(ContentType::ApplicationData, &mut buf, 10)
            .unwrap();
        // 0x0301 would be refused before decryption; the length is what the
        // AAD alone protects, so grow the record by a byte.
        let mut longer = buf;
        longer[4] += 1;
        assert_eq!(
            opener.open(&mut longer[..len + 1]),
            Err(Error::BadRecordMac)
        );
    }

    #[test]
    fn record_len_refuses_what_cannot_follow_a_handshake() {
        assert_eq!(record_len(&[23, 3, 3, 0, 17]), Ok(22));
        assert_eq!(
            record_len(&[23, 3, 3, 0x40, 0xff]),
            Ok(HEADER_LEN + MAX_BODY - 1)
        );
        assert_eq!(
            record_len(&[23, 3, 3, 0x41, 0x00]),
            Ok(HEADER_LEN + MAX_BODY)
        );
        assert_eq!(
            record_len(&[23, 3, 3, 0x41, 0x01]),
            Err(Error::RecordOverflow)
        );
        assert_eq!(
            record_len(&[23, 3, 3, 0xff, 0xff]),
            Err(Error::RecordOverflow)
        );
        assert_eq!(
            record_len(&[22, 3, 3, 0, 40]),
            Err(Error::UnexpectedMessage)
        );
        assert_eq!(record_len(&[21, 3, 3, 0, 2]), Err(Error::UnexpectedMessage));
        assert_eq!(record_len(&[20, 3, 3, 0, 1]), Err(Error::UnexpectedMessage));
        assert_eq!(record_len(&[23, 3, 1, 0, 40]), Err(Error::DecodeError));
        assert_eq!(record_len(&[23, 3, 3, 0, 16]), Err(Error::DecodeError));
        assert_eq!(record_len(&[23, 3, 3, 0, 0]), Err(Error::DecodeError));
    }

    #[test]
    fn open_refuses_a_record_of_another_length_than_its_header() {
        let (mut sealer, mut opener) = pair(Suite::Aes128GcmSha256);
        let mut buf = [0; 40];
        let len = sealer
            .seal(ContentType::ApplicationData, &mut buf, 10)
            .unwrap();
        assert_eq!(opener.open(&mut buf[..len - 1]), Err(Error::DecodeError));
        assert_eq!(opener.open(&mut buf[..len + 1]), Err(Error::DecodeError));
        assert_eq!(opener.open(&mut buf[..3]), Err(Error::DecodeError));
        assert_eq!(
            opener.open(&mut buf[..len]).map(|(kind, _)| kind),
            Ok(ContentType::ApplicationData)
        );
    }

    /// Seals `inner` (content, type, padding) as it is.
    fn protect_raw(keys: &mut Keys, inner: &[u8]) -> Vec<u8> {
        let mut record = vec![0; HEADER_LEN + inner.len() + TAG_LEN];
        record[HEADER_LEN..HEADER_LEN + inner.len()].copy_from_slice(inner);
        keys.protect(&mut record).unwrap();
        record
    }

    #[test]
    fn open_strips_zero_padding_and_checks_the_inner_type() {
        let (mut sealer, mut opener) = pair(Suite::Chacha20Poly1305Sha256);
        let mut padded = protect_raw(&mut sealer, &[b'h', b'i', 23, 0, 0, 0, 0]);
        assert_eq!(
            opener.open(&mut padded),
            Ok((ContentType::ApplicationData, HEADER_LEN..HEADER_LEN + 2))
        );
        let mut empty_data = protect_raw(&mut sealer, &[23, 0, 0]);
        assert_eq!(
            opener.open(&mut empty_data),
            Ok((ContentType::ApplicationData, HEADER_LEN..HEADER_LEN))
        );
        for (inner, error) in [
            (&[0, 0, 0, 0][..], Error::UnexpectedMessage),
            (&[0][..], Error::UnexpectedMessage),
            (&[1, 2, 20][..], Error::UnexpectedMessage),
            (&[1, 2, 24, 0][..], Error::UnexpectedMessage),
            (&[22, 0][..], Error::DecodeError),
            (&[21][..], Error::DecodeError),
        ] {
            let mut record = protect_raw(&mut sealer, inner);
            assert_eq!(opener.open(&mut record), Err(error), "{inner:?}");
        }
        let mut over = vec![1; MAX_PLAINTEXT + 1];
        over.push(23);
        let mut record = protect_raw(&mut sealer, &over);
        assert_eq!(opener.open(&mut record), Err(Error::RecordOverflow));
        // Padding may take a record to MAX_BODY, with the plaintext in bound.
        let mut padded = vec![1; MAX_PLAINTEXT];
        padded.push(23);
        padded.resize(MAX_BODY - TAG_LEN, 0);
        let mut record = protect_raw(&mut sealer, &padded);
        assert_eq!(
            opener.open(&mut record),
            Ok((
                ContentType::ApplicationData,
                HEADER_LEN..HEADER_LEN + MAX_PLAINTEXT
            ))
        );
    }

    #[test]
    fn seal_refuses_a_short_buffer_or_a_long_plaintext() {
        let (mut sealer, _) = pair(Suite::Aes128GcmSha256);
        let mut buf = [0; 10 + SEAL_OVERHEAD];
        assert_eq!(
            sealer.seal(
                ContentType::ApplicationData,
                &mut buf[..10 + SEAL_OVERHEAD - 1],
                10
            ),
            Err(Error::BufferTooSmall)
        );
        let mut big = vec![0; MAX_PLAINTEXT + 1 + SEAL_OVERHEAD];
        assert_eq!(
            sealer.seal(ContentType::ApplicationData, &mut big, MAX_PLAINTEXT + 1),
            Err(Error::RecordOverflow)
        );
        assert_eq!(sealer.seq(), 0);
        assert_eq!(
            sealer.seal(ContentType::ApplicationData, &mut buf, 10),
            Ok(buf.len())
        );
    }

    #[test]
    fn the_sequence_number_stops_before_it_wraps() {
        let suite = Suite::Aes128GcmSha256;
        let mut sealer = Keys::new(suite, &[5; 32], u64::MAX - 1).unwrap();
        let mut opener = Keys::new(suite, &[5; 32], u64::MAX - 1).unwrap();
        let mut buf = [0; 30];
        let len = sealer
            .seal(ContentType::ApplicationData, &mut buf, 1)
            .unwrap();
        assert_eq!(sealer.seq(), u64::MAX);
        assert_eq!(
            sealer.seal(ContentType::ApplicationData, &mut buf.clone(), 1),
            Err(Error::SequenceExhausted)
        );
        assert!(opener.open(&mut buf[..len]).is_ok());
        let mut again = [0; 30];
        let mut other = Keys::new(suite, &[5; 32], u64::MAX - 1).unwrap();
        let len = other
            .seal(ContentType::ApplicationData, &mut again, 1)
            .unwrap();
        assert_eq!(
            opener.open(&mut again[..len]),
            Err(Error::SequenceExhausted)
        );
    }

    #[test]
    fn thirty_two_empty_records_in_a_row_are_fine_and_the_thirty_third_is_not() {
        let mut empty = EmptyRecords::default();
        for round in 0..3 {
            for n in 0..MAX_EMPTY_RECORDS {
                assert_eq!(empty.note(0), Ok(()), "round {round}, record {n}");
            }
            // A record with content starts the count again.
            assert_eq!(empty.note(1), Ok(()));
        }
        for _ in 0..MAX_EMPTY_RECORDS {
            empty.note(0).unwrap();
        }
        assert_eq!(empty.note(0), Err(Error::TooManyEmptyRecords));
        assert_eq!(Error::TooManyEmptyRecords.alert_to_send(), Some(10));
    }
}
