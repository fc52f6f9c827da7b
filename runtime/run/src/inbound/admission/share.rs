//! The handshake slots of one inbound, shared fairly only when they are
//! scarce. While at most half are in use any source takes as many as it
//! likes, so a local client's burst (a browser opening a page's
//! connections, every app behind a TUN device, all from one address) is
//! never dropped. Past half, a source already holding its fair share is
//! refused its next connection, and once every slot is taken a newcomer
//! within its share takes the slot of the oldest connection still
//! handshaking from the source furthest over its share: an honest client
//! finishes its handshake in milliseconds, so that one is the likeliest to
//! be silent. A source within its share is never shed.
//!
//! Pure bookkeeping: no clock, no sockets; the runtime keeps in each entry
//! what it needs to end a shed connection.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};

use super::Refusal;

/// The handshaking connections of one inbound, by source, each with the
/// runtime's handle `T` on it.
pub struct Share<T> {
    /// `max_handshakes`.
    capacity: u32,
    /// `max_handshakes_per_source`: a fair share is never smaller.
    floor: u32,
    held: u32,
    /// Per source, its connections by admission order, oldest first.
    sources: HashMap<IpAddr, BTreeMap<u64, T>>,
    next: u64,
}

/// One admitted connection's place in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    key: IpAddr,
    id: u64,
}

/// What counts as one source: an IPv4 address (an IPv4-mapped IPv6 one
/// included), or an IPv6 /64, the least a single host is usually given.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(Ipv6Addr::from(segments))
            }
        },
    }
}

impl<T> Share<T> {
    pub fn new(capacity: u32, floor: u32) -> Share<T> {
        Share {
            capacity,
            floor,
            held: 0,
            sources: HashMap::new(),
            next: 0,
        }
    }

    /// New sizes take effect at the next admission; a shrink below what is
    /// held now sheds nothing, it only admits nobody until enough finish.
    pub fn resize(&mut self, capacity: u32, floor: u32) {
        self.capacity = capacity;
        self.floor = floor;
    }

    /// Connections handshaking now.
    pub fn held(&self) -> u32 {
        self.held
    }

    /// A fair share when `sources` sources hold slots: an even split of the
    /// capacity, never under the floor, never under one.
    fn fair(&self, sources: usize) -> u32 {
        let even = self.capacity / sources.max(1) as u32;
        even.max(self.floor).max(1)
    }

    /// Admits a connection from `source`, holding `handle` for it. On
    /// success, the handle of the connection shed to make room, if one was.
    pub fn admit(&mut self, source: IpAddr, handle: T) -> Result<(Ticket, Option<T>), Refusal> {
        let key = source_key(source);
        let mine = self.sources.get(&key).map_or(0, |held| held.len() as u32);
        let mut shed = None;
        // Past half the slots, shares count.
        if self.held * 2 > self.capacity {
            let sources = self.sources.len() + usize::from(mine == 0);
            let fair = self.fair(sources);
            if mine >= fair {
                // A lone source's share is every slot: then it is simply full.
                return Err(if self.held >= self.capacity {
                    Refusal::HandshakesFull
                } else {
                    Refusal::OverShare
                });
            }
            if self.held >= self.capacity {
                shed = Some(self.shed_over(fair).ok_or(Refusal::HandshakesFull)?);
            }
        }
        if self.held >= self.capacity {
            return Err(Refusal::HandshakesFull);
        }
        let id = self.next;
        self.next += 1;
        self.sources.entry(key).or_default().insert(id, handle);
        self.held += 1;
        Ok((Ticket { key, id }, shed))
    }

    /// Removes the oldest connection of the source holding the most slots,
    /// if it holds more than `fair`.
    fn shed_over(&mut self, fair: u32) -> Option<T> {
        let (&key, held) = self.sources.iter().max_by_key(|(_, held)| held.len())?;
        if held.len() as u32 <= fair {
            return None;
        }
        let id = *held.keys().next()?;
        self.release(Ticket { key, id })
    }

    /// Frees `ticket`'s slot; its handle, or `None` when it was shed
    /// already.
    pub fn release(&mut self, ticket: Ticket) -> Option<T> {
        let held = self.sources.get_mut(&ticket.key)?;
        let handle = held.remove(&ticket.id)?;
        if held.is_empty() {
            self.sources.remove(&ticket.key);
        }
        self.held -= 1;
        Some(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn fill(share: &mut Share<u32>, source: &str, n: u32) -> Vec<Ticket> {
        (0..n)
            .map(|i| share.admit(ip(source), i).expect("admitted").0)
            .collect()
    }

    #[test]
    fn one_source_takes_every_slot_while_no_other_wants_one() {
        let mut share = Share::new(2048, 64);
        let tickets = fill(&mut share, "127.0.0.1", 2048);
        assert_eq!(share.held(), 2048);
        assert_eq!(
            share.admit(ip("127.0.0.1"), 0).err(),
            Some(Refusal::HandshakesFull)
        );
        for ticket in tickets {
            assert!(share.release(ticket).is_some());
        }
        assert_eq!(share.held(), 0);
        assert!(share.sources.is_empty());
    }

    #[test]
    fn a_newcomer_within_its_share_takes_the_oldest_slot_of_the_source_over_its_share() {
        let mut share = Share::new(8, 2);
        let flood = fill(&mut share, "192.0.2.3", 8);
        let (ticket, shed) = share.admit(ip("192.0.2.1"), 100).unwrap();
        // The flood's first connection, the oldest, is the one shed.
        assert_eq!(shed, Some(0));
        assert_eq!(share.release(flood[0]), None, "shed already");
        assert_eq!(share.held(), 8);
        assert_eq!(share.release(ticket), Some(100));
        // Then, as sources come, the flood alone sheds: two sources share
        // eight slots four each (seven held, one free), three or four
        // sources two each.
        let sheds: Vec<_> = ["192.0.2.4", "192.0.2.5", "192.0.2.6"]
            .iter()
            .map(|source| share.admit(ip(source), 200).unwrap().1)
            .collect();
        assert_eq!(sheds, [None, Some(1), Some(2)]);
    }

    #[test]
    fn past_half_a_source_at_its_share_is_refused_and_others_are_not() {
        let mut share = Share::new(8, 2);
        let _flood = fill(&mut share, "192.0.2.3", 5);
        let (_, shed) = share.admit(ip("192.0.2.1"), 0).unwrap();
        assert_eq!(shed, None, "slots were free: nobody shed");
        // Two sources split eight slots four each: the flood holds five.
        assert_eq!(
            share.admit(ip("192.0.2.3"), 0).err(),
            Some(Refusal::OverShare)
        );
        assert!(share.admit(ip("192.0.2.1"), 0).is_ok());
    }

    #[test]
    fn a_source_within_its_share_is_never_shed() {
        let mut share = Share::new(8, 1);
        // Eight sources with one each: every one at its share.
        for i in 1..=8 {
            fill(&mut share, &format!("192.0.2.{i}"), 1);
        }
        assert_eq!(
            share.admit(ip("192.0.2.9"), 0).err(),
            Some(Refusal::HandshakesFull)
        );
        assert_eq!(share.held(), 8);
    }

    #[test]
    fn the_floor_protects_a_source_with_fewer_slots_than_it() {
        let mut share = Share::new(8, 8);
        let _flood = fill(&mut share, "192.0.2.3", 8);
        // Its share would be 4 among two sources, but never under 8.
        assert_eq!(
            share.admit(ip("192.0.2.1"), 0).err(),
            Some(Refusal::HandshakesFull)
        );
    }

    #[test]
    fn an_ipv6_slash_64_and_an_ipv4_mapped_address_count_as_one_source() {
        let mut share = Share::new(4, 1);
        fill(&mut share, "2001:db8::1", 2);
        fill(&mut share, "2001:db8::ffff:2", 1);
        assert_eq!(share.sources.len(), 1);
        let (_, shed) = share.admit(ip("::ffff:192.0.2.1"), 7).unwrap();
        assert_eq!(shed, None);
        // Full: the same IPv4 source, within its share of two, sheds the
        // /64's oldest.
        let (_, shed) = share.admit(ip("192.0.2.1"), 8).unwrap();
        assert_eq!(shed, Some(0));
        assert_eq!(share.sources.len(), 2);
    }

    #[test]
    fn a_shrink_admits_nobody_until_enough_finish() {
        let mut share = Share::new(4, 1);
        let tickets = fill(&mut share, "192.0.2.1", 4);
        share.resize(2, 1);
        assert!(share.admit(ip("192.0.2.1"), 0).is_err());
        for ticket in &tickets[..3] {
            share.release(*ticket);
        }
        assert!(share.admit(ip("192.0.2.1"), 0).is_ok());
    }
}
