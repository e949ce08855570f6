//! Kubernetes `MicroTime` strings (RFC 3339 with microseconds, `2006-01-02T15:04:05.000000Z`)
//! from and to `SystemTime`, without a date-time dependency: the elector only displays them.

use crate::civil::{civil_from_days, days_from_civil};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECONDS_PER_DAY: i64 = 86_400;

/// `t` in UTC with microseconds (`2026-11-23T16:25:51.123456Z`), as a Lease's or a
/// LeaseCandidate's times are written; times before 1970 are written as the epoch.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use controller::leader_election::{format_micro_time, parse_micro_time};
///
/// let t = UNIX_EPOCH + Duration::from_micros(1_795_451_151_123_456);
/// assert_eq!(format_micro_time(t), "2026-11-23T16:25:51.123456Z");
/// assert_eq!(parse_micro_time(&format_micro_time(t)), Some(t));
/// ```
pub fn format(t: SystemTime) -> String {
    let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX / 2);
    let (days, second_of_day) = (
        secs.div_euclid(SECONDS_PER_DAY),
        secs.rem_euclid(SECONDS_PER_DAY),
    );
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
        since_epoch.subsec_micros()
    )
}

/// Parses a Lease's `acquireTime` or `renewTime` (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`);
/// `None` for anything else or before 1970. The elector never decides with these times (they
/// are the holder's clock); tests and tools may read them.
pub fn parse(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        if digits.bytes().all(|b| b.is_ascii_digit()) {
            digits.parse().ok()
        } else {
            None
        }
    };
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // A leap second (:60) is read as the next second, as Go does.
    if second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let value: u32 = fraction[..digits].parse().ok()?;
        nanos = value * 10u32.pow(9 - digits as u32);
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = (number_in(rest, 1..3)?, number_in(rest, 4..6)?);
            sign * (hours * 3600 + minutes * 60)
        }
        _ => return None,
    };
    let secs =
        days_from_civil(year, month, day) * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second
            - offset;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

fn number_in(text: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let digits = text.get(range)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, micros: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, micros * 1000)
    }

    #[test]
    fn formats_utc_with_microseconds() {
        assert_eq!(format(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format(at(951_782_400, 7)),
            "2000-02-29T00:00:00.000007Z",
            "a leap day"
        );
        assert_eq!(
            format(at(1_795_451_151, 123_456)),
            "2026-11-23T16:25:51.123456Z"
        );
        assert_eq!(
            format(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000000Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_other_rfc3339_forms() {
        for t in [UNIX_EPOCH, at(951_782_400, 7), at(1_795_451_151, 123_456)] {
            assert_eq!(parse(&format(t)), Some(t));
        }
        assert_eq!(
            parse("2026-11-23T18:25:51+02:00"),
            Some(at(1_795_451_151, 0))
        );
        assert_eq!(
            parse("2026-11-23T16:25:51.5Z"),
            Some(at(1_795_451_151, 500_000))
        );
    }

    #[test]
    fn refuses_malformed_times_without_panicking() {
        for text in [
            "",
            "2026-11-23",
            "2026-13-01T00:00:00Z",
            "2026-11-23T24:00:00Z",
            "2026-11-23T16:25:51",
            "2026-11-23T16:25:51.Z",
            "2026-11-23T16:25:51.1234567890Z",
            "2026-11-23T16:25:51+0200",
            "1969-12-31T23:59:59Z",
            "2026-11-23T16:25:51Zjunk",
            "20é6-11-23T16:25:51Z",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
