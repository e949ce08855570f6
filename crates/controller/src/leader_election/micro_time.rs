//! Kubernetes `MicroTime` strings (RFC 3339 with microseconds, `2006-01-02T15:04:05.000000Z`)
//! from and to `SystemTime`, through the workspace's one date codec (`store_index::time`): the
//! elector only displays them.

use std::time::{SystemTime, UNIX_EPOCH};

use workqueue::shared_informer::reflector::store_index::time;

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
    time::format_system_time(t.max(UNIX_EPOCH), 6)
}

/// Parses a Lease's `acquireTime` or `renewTime` (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`);
/// `None` for anything else, for more than nine fractional digits (a `MicroTime` has six) and
/// before 1970. The elector never decides with these times (they are the holder's clock); tests
/// and tools may read them.
pub fn parse(text: &str) -> Option<SystemTime> {
    let fraction = text.get(19..)?.strip_prefix('.').unwrap_or("");
    if fraction.bytes().take_while(u8::is_ascii_digit).count() > 9 {
        return None;
    }
    time::parse_system_time(text).filter(|t| *t >= UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
