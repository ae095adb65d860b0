//! Formatting capture timestamps without a calendar dependency.

/// RFC 3339 UTC with nanoseconds, e.g. `2026-11-22T07:27:00.123456789Z`.
pub fn rfc3339(ns: i64) -> String {
    let (y, m, d, h, mi, s, frac) = civil(ns);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:09}Z")
}

/// Nanoseconds since 1970 (UTC) to (year, month, day, hour, minute, second, nanosecond).
pub fn civil(ns: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
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
    }

    #[test]
    fn ms_rounds_to_microseconds() {
        assert_eq!(ms(20_000_000), 20.0);
        assert_eq!(ms(1_234_567), 1.235);
    }
}
