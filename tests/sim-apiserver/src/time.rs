//! The server's clock as kube-apiserver writes it: RFC 3339 in UTC, to the second
//! (`creationTimestamp`, `deletionTimestamp`, a review's and a managed field's time), through the
//! workspace's one date codec.

use std::time::SystemTime;

use crate::protobuf::time;

/// Current time in RFC 3339 (`2024-01-02T03:04:05Z`).
pub fn rfc3339_now() -> String {
    time::format_system_time(SystemTime::now(), 0)
}

/// Go's layout of a `metav1.MicroTime` (RFC 3339 with exactly six fractional digits).
pub const MICRO_TIME_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Checks `value` as kube-apiserver decodes a `MicroTime` (Go's `time.Parse` with
/// [`MICRO_TIME_LAYOUT`]): `Err` carries Go's words, as in `parsing time "2026-01-01T00:00:00Z" as
/// "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"`.
pub fn check_micro_time(value: &str) -> Result<(), String> {
    let fail = |rest: &str, element: &str| {
        Err(format!(
            "parsing time {value:?} as {MICRO_TIME_LAYOUT:?}: cannot parse {rest:?} as {element:?}"
        ))
    };
    let out_of_range = |what: &str| Err(format!("parsing time {value:?}: {what} out of range"));
    // Each step: (width of digits or the literal, the layout element Go names on failure).
    let fields: [(&str, usize, &str); 6] = [
        ("", 4, "2006"),
        ("-", 2, "01"),
        ("-", 2, "02"),
        ("T", 2, "15"),
        (":", 2, "04"),
        (":", 2, "05"),
    ];
    let mut rest = value;
    let mut numbers = [0u32; 6];
    for (i, (separator, width, element)) in fields.into_iter().enumerate() {
        let Some(after) = rest.strip_prefix(separator) else {
            return fail(rest, separator);
        };
        let digits = after
            .get(..width)
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
        let Some(digits) = digits else {
            return fail(after, element);
        };
        numbers[i] = digits.parse().unwrap_or(0);
        rest = &after[width..];
    }
    let [_, month, day, hour, minute, second] = numbers;
    if !(1..=12).contains(&month) {
        return out_of_range("month");
    }
    if !(1..=31).contains(&day) {
        return out_of_range("day");
    }
    if hour > 23 {
        return out_of_range("hour");
    }
    if minute > 59 {
        return out_of_range("minute");
    }
    if second > 59 {
        return out_of_range("second");
    }
    let fraction = rest
        .strip_prefix('.')
        .and_then(|f| f.get(..6))
        .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
    if fraction.is_none() {
        return fail(rest, ".000000");
    }
    rest = &rest[7..];
    let zone_ok = rest == "Z"
        || (rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && rest.as_bytes()[3] == b':'
            && rest[1..3]
                .bytes()
                .chain(rest[4..].bytes())
                .all(|b| b.is_ascii_digit()));
    if !zone_ok {
        return fail(rest, "Z07:00");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_micro_time_has_six_fractional_digits_and_a_zone() {
        for good in [
            "2026-01-01T00:00:00.000000Z",
            "2026-12-31T23:59:59.123456+02:00",
        ] {
            assert_eq!(check_micro_time(good), Ok(()), "{good}");
        }
        // kube-apiserver 1.36.3's words for the python client's whole-second time.
        assert_eq!(
            check_micro_time("2026-01-01T00:00:00+00:00").unwrap_err(),
            r#"parsing time "2026-01-01T00:00:00+00:00" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "+00:00" as ".000000""#
        );
        for (bad, tail) in [
            ("2026-01-01T00:00:00Z", r#"cannot parse "Z" as ".000000""#),
            (
                "2026-01-01T00:00:00.123Z",
                r#"cannot parse ".123Z" as ".000000""#,
            ),
            (
                "2026-01-01T00:00:00.123456",
                r#"cannot parse "" as "Z07:00""#,
            ),
            (
                "2026-01-01 00:00:00.123456Z",
                r#"cannot parse " 00:00:00.123456Z" as "T""#,
            ),
            (
                "26-01-01T00:00:00.123456Z",
                r#"cannot parse "26-01-01T00:00:00.123456Z" as "2006""#,
            ),
        ] {
            let error = check_micro_time(bad).unwrap_err();
            assert!(error.ends_with(tail), "{bad}: {error}");
        }
        assert!(check_micro_time("2026-13-01T00:00:00.000000Z")
            .unwrap_err()
            .ends_with("month out of range"));
    }
}
