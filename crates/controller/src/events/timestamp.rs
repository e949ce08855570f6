//! RFC 3339 timestamps with second precision (`metav1.Time`), and the recorder's wall clock.
//!
//! The wall clock is the system time when the broadcaster was made plus the tokio time elapsed
//! since, so that under `tokio::time::pause()` event timestamps advance with the paused clock and
//! tests can see `lastTimestamp` move without sleeping.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio::time::Instant;

use crate::civil::{civil_from_days, days_from_civil};

/// A point in time with second precision, written as RFC 3339 in UTC: `2024-05-01T12:00:00Z`.
///
/// ```
/// use controller::events::Timestamp;
///
/// let t: Timestamp = "2024-02-29T23:59:59Z".parse().unwrap();
/// assert_eq!(t.to_string(), "2024-02-29T23:59:59Z");
/// assert_eq!(Timestamp::from_unix_seconds(86_400).to_string(), "1970-01-02T00:00:00Z");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `seconds` after the Unix epoch (negative: before it).
    pub fn from_unix_seconds(seconds: i64) -> Self {
        Self(seconds)
    }

    /// Seconds since the Unix epoch.
    pub fn unix_seconds(self) -> i64 {
        self.0
    }

    /// `time`, truncated to the second.
    pub fn from_system_time(time: SystemTime) -> Self {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Self(i64::try_from(after.as_secs()).unwrap_or(i64::MAX)),
            Err(before) => {
                let d = before.duration();
                let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                // Truncation towards the past, like Go's Time.Truncate for pre-epoch times.
                Self(-secs - i64::from(d.subsec_nanos() > 0))
            }
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

/// A string that is not an RFC 3339 date-time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp: {0:?}")]
pub struct TimestampParseError(String);

impl FromStr for Timestamp {
    type Err = TimestampParseError;

    /// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`; a fraction is dropped.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || TimestampParseError(s.chars().take(64).collect());
        let b = s.as_bytes();
        let num = |range: std::ops::Range<usize>| -> Result<i64, TimestampParseError> {
            let part = s.get(range).ok_or_else(bad)?;
            if part.bytes().all(|c| c.is_ascii_digit()) {
                part.parse().map_err(|_| bad())
            } else {
                Err(bad())
            }
        };
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b't')
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err(bad());
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
            return Err(bad());
        }
        // A leap second is read as the last second of its minute.
        let second = second.min(59);
        let mut rest = &s[19..];
        if let Some(fraction) = rest.strip_prefix('.') {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad());
            }
            rest = &fraction[digits..];
        }
        let offset = match rest.as_bytes() {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let hours: i64 = rest[1..3].parse().map_err(|_| bad())?;
                let minutes: i64 = rest[4..6].parse().map_err(|_| bad())?;
                let offset = hours * 3600 + minutes * 60;
                if *sign == b'+' {
                    offset
                } else {
                    -offset
                }
            }
            _ => return Err(bad()),
        };
        let days = days_from_civil(year, month, day);
        Ok(Self(
            days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        ))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The system time at a fixed tokio instant, advanced by tokio's clock (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    system: SystemTime,
    instant: Instant,
}

impl WallClock {
    pub(crate) fn new() -> Self {
        Self {
            system: SystemTime::now(),
            instant: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> SystemTime {
        self.system + self.instant.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn formats_known_dates_and_parses_offsets_and_fractions() {
        let t = Timestamp::from_unix_seconds(1_700_000_000);
        assert_eq!(t.to_string(), "2023-11-14T22:13:20Z");
        assert_eq!("2023-11-14T22:13:20.123456Z".parse::<Timestamp>(), Ok(t));
        assert_eq!("2023-11-15T00:13:20+02:00".parse::<Timestamp>(), Ok(t));
        assert_eq!(
            Timestamp::from_unix_seconds(-1).to_string(),
            "1969-12-31T23:59:59Z"
        );
        for bad in [
            "",
            "2023-11-14",
            "2023-13-14T22:13:20Z",
            "2023-11-14T22:13:20",
            "x023-11-14T22:13:20Z",
        ] {
            assert!(bad.parse::<Timestamp>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_is_the_identity(secs in -62_135_596_800i64..253_402_300_799) {
            let t = Timestamp::from_unix_seconds(secs);
            prop_assert_eq!(t.to_string().parse::<Timestamp>(), Ok(t));
        }
    }
}
