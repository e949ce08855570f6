//! The workspace's one date codec: the JSON forms of `meta.v1.Time`/`MicroTime` (RFC 3339, UTC)
//! and `meta.v1.Duration` (Go's duration string), to and from their protobuf numbers and
//! `SystemTime`. Every layer above (the transcoder, the exec plugin's expiry, events, conditions,
//! Leases) and the simulator read and write times through it.
//!
//! Formatting is on the decode path (each protobuf object's `creationTimestamp` is written out as
//! text). `cargo bench -p store-index --bench time` measures this codec against `jiff`
//! (docs/benchmarks.md): on par formatting, about 3× faster parsing, so the bottom crate keeps
//! these few lines of civil-date arithmetic rather than a date dependency.
//!
//! Two invariants, property-tested below:
//! - **TC1**: an instant formatted with 0 or 6 fractional digits parses back to that instant
//!   truncated to the second or the microsecond, for every year from 1 to 9999.
//! - **TC2**: a duration formatted as Go writes it parses back to the same nanoseconds.
//!
//! Parsing is Go's `time.RFC3339` parse (the one `metav1.Time` uses), a little more lenient:
//! `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, a lower-case `t` or `z` accepted, any number of
//! fractional digits (nanoseconds kept, the rest dropped), a leap second `:60` read as the next
//! second.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The number written by the ASCII digits of `b[range]`, `None` if any is not a digit.
fn digits(b: &[u8], range: std::ops::Range<usize>) -> Option<i64> {
    b.get(range)?.iter().try_fold(0i64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

/// `(seconds, nanos)` since the Unix epoch of an RFC 3339 timestamp, `None` if it is not one.
pub fn parse_rfc3339(s: &str) -> Option<(i64, i32)> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (digits(b, 0..4)?, digits(b, 5..7)?, digits(b, 8..10)?);
    let (h, mi, sec) = (digits(b, 11..13)?, digits(b, 14..16)?, digits(b, 17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let count = i - start;
        if count == 0 {
            return None;
        }
        for _ in count..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let off = digits(b, i + 1..i + 3)? * 3600 + digits(b, i + 4..i + 6)? * 60;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    Some((secs, nanos as i32))
}

/// RFC 3339 in UTC with `frac_digits` (0 or 6) fractional digits, as Go writes `metav1.Time`
/// (0: kube-apiserver's JSON keeps whole seconds) and `MicroTime` (6).
pub fn format_rfc3339(seconds: i64, nanos: i32, frac_digits: usize) -> String {
    let (days, rem) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(27);
    match u16::try_from(y) {
        Ok(y) if y <= 9999 => push_digits(&mut out, u32::from(y), 4),
        // Outside RFC 3339's four-digit years: zero-padded to four places, sign and all.
        _ => out.push_str(&format!("{y:04}")),
    }
    // Each part is below 100: the casts cannot truncate.
    for (sep, part) in [
        ('-', m),
        ('-', d),
        ('T', rem / 3600),
        (':', rem % 3600 / 60),
        (':', rem % 60),
    ] {
        out.push(sep);
        push_digits(&mut out, part as u32, 2);
    }
    if frac_digits == 6 {
        out.push('.');
        push_digits(&mut out, nanos.clamp(0, 999_999_999) as u32 / 1000, 6);
    }
    out.push('Z');
    out
}

/// `n`'s last `width` decimal digits, zero-padded, onto `out`.
fn push_digits(out: &mut String, n: u32, width: u32) {
    for place in (0..width).rev() {
        out.push(char::from(b'0' + (n / 10u32.pow(place) % 10) as u8));
    }
}

/// `t` as `(seconds, nanos)` since the Unix epoch: seconds negative before it, nanos always in
/// `0..1_000_000_000` (so the seconds are the instant truncated towards the past).
pub fn unix_parts(t: SystemTime) -> (i64, i32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => (
            i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            after.subsec_nanos() as i32,
        ),
        Err(before) => {
            let d = before.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => (-secs, 0),
                n => (-secs - 1, (1_000_000_000 - n) as i32),
            }
        }
    }
}

/// The `SystemTime` `seconds` and `nanos` after the Unix epoch (before it for negative seconds),
/// `None` where `SystemTime` cannot hold it or `nanos` is out of `0..1_000_000_000`.
pub fn system_time(seconds: i64, nanos: i32) -> Option<SystemTime> {
    let nanos = u32::try_from(nanos).ok().filter(|n| *n < 1_000_000_000)?;
    if seconds >= 0 {
        UNIX_EPOCH.checked_add(Duration::new(seconds.unsigned_abs(), nanos))
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(seconds.unsigned_abs()))?
            .checked_add(Duration::from_nanos(u64::from(nanos)))
    }
}

/// `t` in RFC 3339, UTC, with `frac_digits` (0 or 6) fractional digits: [`format_rfc3339`] of
/// its [`unix_parts`].
pub fn format_system_time(t: SystemTime, frac_digits: usize) -> String {
    let (seconds, nanos) = unix_parts(t);
    format_rfc3339(seconds, nanos, frac_digits)
}

/// The `SystemTime` of an RFC 3339 timestamp ([`parse_rfc3339`]), `None` if it is not one.
pub fn parse_system_time(s: &str) -> Option<SystemTime> {
    let (seconds, nanos) = parse_rfc3339(s)?;
    system_time(seconds, nanos)
}

/// Nanoseconds of a Go duration string (`1h2m3.5s`, `300ms`, `-1.5h`), `None` if it is not one.
pub fn parse_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&e| e > 0)?;
        let value: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: f64 = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += (value * unit).round() as i128;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).ok()
}

/// Go's `time.Duration.String()` of `nanos`.
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = match n {
            0..=999 => ("ns", 1u64),
            1_000..=999_999 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", trim_frac(n / div, n % div, div));
    }
    let (h, rem) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rem) = (rem / 60_000_000_000, rem % 60_000_000_000);
    let secs = trim_frac(rem / 1_000_000_000, rem % 1_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

fn trim_frac(whole: u64, frac: u64, div: u64) -> String {
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.ilog10() as usize;
    let f = format!("{frac:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Seconds from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, the years RFC 3339 writes.
    const YEARS_1_TO_9999: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

    proptest! {
        /// TC1, to the second and to the microsecond.
        #[test]
        fn formatted_instants_parse_back_truncated_to_their_precision(
            seconds in YEARS_1_TO_9999,
            nanos in 0i32..1_000_000_000,
        ) {
            prop_assert_eq!(parse_rfc3339(&format_rfc3339(seconds, nanos, 0)), Some((seconds, 0)));
            prop_assert_eq!(
                parse_rfc3339(&format_rfc3339(seconds, nanos, 6)),
                Some((seconds, nanos / 1000 * 1000))
            );
        }

        /// TC1 through `SystemTime`, before the epoch too.
        #[test]
        fn system_times_round_trip_through_their_unix_parts_and_text(
            seconds in YEARS_1_TO_9999,
            micros in 0i32..1_000_000,
        ) {
            let t = system_time(seconds, micros * 1000).expect("SystemTime holds years 1-9999 here");
            prop_assert_eq!(unix_parts(t), (seconds, micros * 1000));
            prop_assert_eq!(parse_system_time(&format_system_time(t, 6)), Some(t));
        }

        /// TC2.
        #[test]
        fn formatted_durations_parse_back_to_their_nanoseconds(nanos in any::<i64>()) {
            prop_assert_eq!(parse_duration(&format_duration(nanos)), Some(nanos));
        }
    }

    #[test]
    fn unix_parts_truncate_towards_the_past() {
        let before = UNIX_EPOCH - Duration::from_millis(1_500);
        assert_eq!(unix_parts(before), (-2, 500_000_000));
        assert_eq!(unix_parts(UNIX_EPOCH - Duration::from_secs(1)), (-1, 0));
        assert_eq!(format_system_time(before, 0), "1969-12-31T23:59:58Z");
        assert_eq!(system_time(0, 1_000_000_000), None);
        assert_eq!(system_time(0, -1), None);
    }

    #[test]
    fn rfc3339_round_trips_and_honours_offsets() {
        for (s, secs) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-11-01T10:00:05Z", 1_793_527_205),
            ("1969-12-31T23:59:59Z", -1),
            ("2000-02-29T12:00:00Z", 951_825_600),
        ] {
            assert_eq!(parse_rfc3339(s), Some((secs, 0)), "{s}");
            assert_eq!(format_rfc3339(secs, 0, 0), s);
        }
        assert_eq!(
            parse_rfc3339("2026-11-01T12:00:05+02:00"),
            parse_rfc3339("2026-11-01T10:00:05Z")
        );
        assert_eq!(
            parse_rfc3339("2026-11-01T10:00:05.123456Z"),
            Some((1_793_527_205, 123_456_000))
        );
        assert_eq!(
            format_rfc3339(1_793_527_205, 123_456_000, 6),
            "2026-11-01T10:00:05.123456Z"
        );
        for bad in [
            "",
            "2026-11-01",
            "2026-13-01T00:00:00Z",
            "2026-11-01T10:00:05",
            "x026-11-01T10:00:05Z",
            "2026-11-01T10:00:05.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn go_durations_round_trip() {
        for (s, n) in [
            ("0s", 0),
            ("1h2m3s", 3_723_000_000_000),
            ("1.5s", 1_500_000_000),
            ("300ms", 300_000_000),
            ("-2m0s", -120_000_000_000),
            ("1µs", 1000),
        ] {
            assert_eq!(parse_duration(s), Some(n), "{s}");
            assert_eq!(format_duration(n), s);
        }
        assert_eq!(parse_duration("90m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("5x"), None);
    }
}
