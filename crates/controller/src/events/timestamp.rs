//! RFC 3339 timestamps with second precision (`metav1.Time`), and the recorder's wall clock.
//!
//! The wall clock is the system time when the broadcaster was made plus the tokio time elapsed
//! since, so that under `tokio::time::pause()` event timestamps advance with the paused clock and
//! tests can see `lastTimestamp` move without sleeping.

use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio::time::Instant;

use workqueue::shared_informer::reflector::store_index::time;

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

    /// `time`, truncated to the second (towards the past, like Go's `Time.Truncate`).
    pub fn from_system_time(time: SystemTime) -> Self {
        Self(time::unix_parts(time).0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&time::format_rfc3339(self.0, 0, 0))
    }
}

/// A string that is not an RFC 3339 date-time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp: {0:?}")]
pub struct TimestampParseError(String);

impl FromStr for Timestamp {
    type Err = TimestampParseError;

    /// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` as the workspace's codec does
    /// (`store_index::time`); a fraction is dropped.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        time::parse_rfc3339(s)
            .map(|(seconds, _)| Self(seconds))
            .ok_or_else(|| TimestampParseError(s.chars().take(64).collect()))
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
