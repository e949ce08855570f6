//! Kubernetes `MicroTime` strings (RFC 3339 with microseconds, `2006-01-02T15:04:05.000000Z`)
//! from and to `SystemTime`, without a date-time dependency: the elector only displays them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECONDS_PER_DAY: i64 = 86_400;

/// `t` in UTC with microseconds; times before 1970 are written as the epoch.
pub(crate) fn format(t: SystemTime) -> String {
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

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `None` for anything else or before 1970.
pub(crate) fn parse(text: &str) -> Option<SystemTime> {
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

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
