//! apimachinery's `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration) and the
//! printers' `translateTimestampSince`: how tables show ages and durations.

use jiff::Timestamp;

const SECOND: i128 = 1_000_000_000;
const MINUTE: i128 = 60 * SECOND;
const HOUR: i128 = 60 * MINUTE;

/// `duration.HumanDuration`: a concise, rounded-down duration ("5m3s", "90m", "25h", "3d5h",
/// "2y10d"); a duration up to 2 s in the negative reads as "0s" (clock skew), less as `<invalid>`.
pub fn human_duration(nanos: i128) -> String {
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{days}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// Parses an RFC 3339 `Time`/`MicroTime`; absent, empty or malformed reads as the zero time.
pub fn timestamp(value: Option<&serde_json::Value>) -> Option<Timestamp> {
    value?.as_str()?.parse().ok()
}

/// The nanoseconds from `from` to `to`.
pub fn between(from: Timestamp, to: Timestamp) -> i128 {
    to.as_nanosecond() - from.as_nanosecond()
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` for the zero time.
pub fn since(value: Option<&serde_json::Value>, now: Timestamp) -> String {
    match timestamp(value) {
        Some(at) => human_duration(between(at, now)),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(seconds: i128) -> String {
        human_duration(seconds * SECOND)
    }

    #[test]
    fn human_duration_matches_apimachinery() {
        // The cases of apimachinery's duration_test.go TestHumanDuration.
        let cases: &[(i128, &str)] = &[
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (70 * 60, "70m"),
            (47 * 60 * 60, "47h"),
            (49 * 60 * 60, "2d1h"),
            ((8 * 24 + 2) * 60 * 60, "8d"),
            (367 * 24 * 60 * 60, "367d"),
            ((365 * 2 * 24 + 25) * 60 * 60, "2y1d"),
            ((365 * 8 * 24 + 2) * 60 * 60, "8y"),
            (0, "0s"),
            (-1, "0s"),
            (-2, "<invalid>"),
            (5 * 60 + 3, "5m3s"),
            (5 * 60, "5m"),
            (90 * 60, "90m"),
            (3 * 60 * 60, "3h"),
            (3 * 60 * 60 + 20 * 60 + 59, "3h20m"),
            (25 * 60 * 60, "25h"),
            ((3 * 24 + 5) * 60 * 60, "3d5h"),
            (3 * 24 * 60 * 60, "3d"),
            (2 * 365 * 24 * 60 * 60, "2y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(d(*seconds), *want, "{seconds}s");
        }
        // Sub-second parts are dropped, not rounded.
        assert_eq!(human_duration(119 * SECOND + SECOND - 1), "119s");
        assert_eq!(human_duration(-SECOND - SECOND / 2), "0s");
    }

    #[test]
    fn ages_of_timestamps() {
        let now: Timestamp = "2025-01-01T12:00:00Z".parse().unwrap();
        let at = serde_json::json!("2025-01-01T11:54:57Z");
        assert_eq!(since(Some(&at), now), "5m3s");
        assert_eq!(since(Some(&serde_json::json!("2025-01-01T11:59:59.500000Z")), now), "0s");
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(since(Some(&serde_json::Value::Null), now), "<unknown>");
    }
}
