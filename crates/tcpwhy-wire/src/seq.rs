//! Wraparound-safe TCP sequence numbers (RFC 9293 section 3.4: "all arithmetic dealing with
//! sequence numbers must be performed modulo 2^32").

use std::cmp::Ordering;
use std::fmt;

/// A TCP sequence or acknowledgment number.
///
/// Comparison is modular: `a < b` when `b` lies less than 2^31 ahead of `a`. This is not a total
/// order (that is why only `PartialOrd` is implemented), but it is the order TCP itself uses, and
/// it stays right across the 2^32 wrap.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// Signed distance from `other` to `self` (`self - other`), modulo 2^32.
    #[inline]
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// The later of two sequence numbers in modular order.
    #[inline]
    #[must_use]
    pub fn max(self, other: Seq) -> Seq {
        if self.diff(other) >= 0 {
            self
        } else {
            other
        }
    }

    /// The earlier of two sequence numbers in modular order.
    #[inline]
    #[must_use]
    pub fn min(self, other: Seq) -> Seq {
        if self.diff(other) <= 0 {
            self
        } else {
            other
        }
    }
}

/// `seq + n` modulo 2^32.
impl std::ops::Add<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

/// `seq - n` modulo 2^32.
impl std::ops::Sub<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

impl PartialOrd for Seq {
    #[inline]
    fn partial_cmp(&self, other: &Seq) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seq({})", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_crosses_the_wrap() {
        let before = Seq(0xFFFF_FF00);
        let after = before + 0x200; // 0x0000_0100
        assert_eq!(after.0, 0x100);
        assert!(before < after);
        assert!(after > before);
        assert_eq!(after.diff(before), 0x200);
        assert_eq!(before.diff(after), -0x200);
        assert_eq!(before.max(after), after);
        assert_eq!(after.max(before), after);
    }

    #[test]
    fn ordering_without_wrap_matches_integers() {
        for (a, b) in [(0u32, 1u32), (100, 5000), (0x7FFF_0000, 0x7FFF_FFFF)] {
            assert!(Seq(a) < Seq(b), "{a} < {b}");
            assert!(Seq(b) > Seq(a));
            assert_eq!(Seq(a).partial_cmp(&Seq(a)), Some(Ordering::Equal));
        }
    }

    #[test]
    fn sub_and_add_are_inverse_across_zero() {
        let s = Seq(10);
        assert_eq!((s - 20).0, u32::MAX - 9);
        assert_eq!(s - 20 + 20, s);
    }

    #[test]
    fn half_space_boundary() {
        // 2^31 - 1 ahead is "after"; 2^31 + 1 ahead is "before" (it is closer going backwards).
        let a = Seq(5);
        assert!(a + 0x7FFF_FFFF > a);
        assert!(a + 0x8000_0001 < a);
    }
}
