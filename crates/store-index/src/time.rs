//! The JSON forms of `meta.v1.Time`/`MicroTime` (RFC 3339, UTC) and `meta.v1.Duration` (Go's
//! duration string), to and from their protobuf numbers. Civil-date arithmetic is a few lines;
//! not worth a date crate.

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

/// `(seconds, nanos)` since the Unix epoch of an RFC 3339 timestamp, `None` if it is not one.
pub fn parse_rfc3339(s: &str) -> Option<(i64, i32)> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| std::str::from_utf8(part).ok()?.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
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
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = |a: u8, b: u8| i64::from(a - b'0') * 10 + i64::from(b - b'0');
            let off = v(digits[0], digits[1]) * 3600 + v(digits[2], digits[3]) * 60;
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
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let mut out = format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if frac_digits == 6 {
        out.push_str(&format!(".{:06}", nanos.clamp(0, 999_999_999) / 1000));
    }
    out.push('Z');
    out
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
    use super::*;

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
