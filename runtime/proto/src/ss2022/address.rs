//! The SOCKS5 address (ATYP, address, port) of SIP022's headers: the SOCKS
//! codec every protocol with SOCKS-style addresses uses, written into a
//! slice so a packet's header can be built in place in front of its
//! payload, with SIP022's errors.

use super::Ss2022Error;
use crate::socks::{address_len, put_address};
use crate::Address;

/// The most bytes an address takes: type, length, a 255-byte name, port.
pub const MAX_LEN: usize = 1 + 1 + 255 + 2;

pub fn encoded_len(addr: &Address) -> usize {
    address_len(addr)
}

/// Writes `addr` at the start of `out`, which holds at least
/// `encoded_len(addr)` bytes; returns that length.
pub fn write(addr: &Address, out: &mut [u8]) -> usize {
    let len = address_len(addr);
    put_address(addr, &mut out[..len]);
    len
}

/// Reads the address at the start of `buf`, which must hold all of it.
pub fn read(buf: &[u8]) -> Result<(Address, usize), Ss2022Error> {
    match crate::socks::read_address(buf) {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(Ss2022Error::Short),
        Err(_) => Err(Ss2022Error::Address),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_type_round_trips_at_its_encoded_length() {
        for addr in [
            Address::Ip("192.0.2.1:53".parse().unwrap()),
            Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
            Address::Domain("dns.example".into(), 853),
        ] {
            let mut buf = [0xaa; MAX_LEN];
            let len = write(&addr, &mut buf);
            assert_eq!(len, encoded_len(&addr));
            assert_eq!(read(&buf[..len]), Ok((addr, len)));
            assert_eq!(read(&buf[..len - 1]), Err(Ss2022Error::Short));
        }
        assert_eq!(read(&[0x09, 0, 0]), Err(Ss2022Error::Address));
    }
}
