//! Formatting capture timestamps without a calendar dependency.

/// RFC 3339 UTC with nanoseconds, e.g. `2026-11-22T07:27:00.123456789Z`.
pub fn rfc3339(ns: i64) -> String {
    let mut b = Vec::with_capacity(30);
    write_rfc3339(&mut b, ns);
    String::from_utf8(b).unwrap_or_default()
}

/// Where digits and times are written: a `Vec`, or a string on the stack
/// (`output::record::Short`).
pub trait Bytes {
    fn push(&mut self, c: u8);
    fn extend_from_slice(&mut self, s: &[u8]);
}

impl Bytes for Vec<u8> {
    fn push(&mut self, c: u8) {
        Vec::push(self, c);
    }
    fn extend_from_slice(&mut self, s: &[u8]) {
        Vec::extend_from_slice(self, s);
    }
}

/// `rfc3339(ns)` written at the end of `b`.
pub fn write_rfc3339(b: &mut impl Bytes, ns: i64) {
    let (y, mo, d, h, mi, s, frac) = civil(ns);
    // Nanoseconds in an i64 span the years 1677 to 2262: four digits, never negative.
    digits(b, y.unsigned_abs(), 4);
    for (sep, v, width) in [
        (b'-', mo, 2),
        (b'-', d, 2),
        (b'T', h, 2),
        (b':', mi, 2),
        (b':', s, 2),
        (b'.', frac, 9),
    ] {
        b.push(sep);
        digits(b, u64::from(v), width);
    }
    b.push(b'Z');
}

/// `v` in decimal, zero-padded to at least `width` digits, at the end of `b`.
pub fn digits(b: &mut impl Bytes, mut v: u64, width: usize) {
    let mut d = [b'0'; 20];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    b.extend_from_slice(&d[i.min(d.len().saturating_sub(width))..]);
}

/// Nanoseconds since 1970 (UTC) to (year, month, day, hour, minute, second, nanosecond).
fn civil(ns: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    (y, m, d, sod / 3600, sod % 3600 / 60, sod % 60, frac)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds with microsecond precision, as a JSON-friendly float.
pub fn ms(ns: i64) -> f64 {
    (ns as f64 / 1_000.0).round() / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        // date -u -d @1700000000 -> Tue Nov 14 22:13:20 UTC 2023
        assert_eq!(
            rfc3339(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        // 2024-02-29 (leap day): date -u -d 2024-02-29T12:00:00Z +%s -> 1709208000
        assert_eq!(
            rfc3339(1_709_208_000 * 1_000_000_000),
            "2024-02-29T12:00:00.000000000Z"
        );
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999999999Z");
        // The ends of i64 nanoseconds: date -u -d @-9223372037 and @9223372036, with the
        // fractions -2^63 mod 10^9 and (2^63 - 1) mod 10^9.
        assert_eq!(rfc3339(i64::MIN), "1677-09-21T00:12:43.145224192Z");
        assert_eq!(rfc3339(i64::MAX), "2262-04-11T23:47:16.854775807Z");
    }

    // The hand-written digits against `format!`, and the whole time against `format!` of its
    // calendar fields (the ends of their ranges: the tests around).
    proptest! {
        #[test]
        fn digits_are_spelled_as_format_spells_them(v in any::<u64>(), w in 0usize..21) {
            let mut b = Vec::new();
            digits(&mut b, v, w);
            prop_assert_eq!(b, format!("{v:0w$}").into_bytes());
        }

        #[test]
        fn times_are_spelled_as_format_spells_them(t in any::<i64>()) {
            let (y, m, d, h, mi, s, frac) = civil(t);
            let want = format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:09}Z");
            prop_assert_eq!(rfc3339(t), want);
        }
    }

    #[test]
    fn digits_at_the_edges_of_u64() {
        for v in [0, 1, 9, 10, 99, 100, 65535, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            digits(&mut b, v, 4);
            assert_eq!(b, format!("{v:04}").as_bytes());
        }
    }

    #[test]
    fn ms_rounds_to_microseconds() {
        assert_eq!(ms(20_000_000), 20.0);
        assert_eq!(ms(1_234_567), 1.235);
    }
}
