//! A set of values as sorted, disjoint, inclusive intervals: a membership
//! test is one binary search however many ranges or networks a rule lists.

#[derive(Clone, Debug, Default)]
pub(super) struct Intervals<T> {
    /// Sorted by start, disjoint and not adjacent.
    spans: Box<[(T, T)]>,
}

/// The next value up, or `None` at the type's maximum.
pub(super) trait Successor: Copy + Ord {
    fn successor(self) -> Option<Self>;
}

impl Successor for u16 {
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
}

impl Successor for u32 {
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
}

impl Successor for u128 {
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
}

impl<T: Successor> Intervals<T> {
    /// Builds the set from inclusive `(start, end)` spans in any order,
    /// merging overlapping and adjacent ones.
    pub(super) fn new(mut spans: Vec<(T, T)>) -> Self {
        spans.sort_unstable();
        let mut merged: Vec<(T, T)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match merged.last_mut() {
                Some(last) if last.1.successor().is_none_or(|next| start <= next) => {
                    last.1 = last.1.max(end);
                }
                _ => merged.push((start, end)),
            }
        }
        Intervals {
            spans: merged.into_boxed_slice(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub(super) fn contains(&self, value: T) -> bool {
        let after = self.spans.partition_point(|span| span.0 <= value);
        after > 0 && value <= self.spans[after - 1].1
    }

    /// Whether every value from `start` to `end` is in the set.
    pub(super) fn covers(&self, start: T, end: T) -> bool {
        let after = self.spans.partition_point(|span| span.0 <= start);
        after > 0 && end <= self.spans[after - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_adjacent_spans_merge() {
        let set = Intervals::new(vec![(10u16, 20), (21, 30), (5, 12), (40, 40)]);
        assert_eq!(&*set.spans, &[(5, 30), (40, 40)]);
        for (value, inside) in [
            (4, false),
            (5, true),
            (30, true),
            (31, false),
            (40, true),
            (41, false),
        ] {
            assert_eq!(set.contains(value), inside, "{value}");
        }
    }

    #[test]
    fn a_span_ending_at_the_maximum_does_not_overflow() {
        let set = Intervals::new(vec![(u16::MAX, u16::MAX), (0, 0), (100, u16::MAX)]);
        assert_eq!(&*set.spans, &[(0, 0), (100, u16::MAX)]);
        assert!(set.contains(u16::MAX));
        assert!(!set.contains(1));
    }
}
