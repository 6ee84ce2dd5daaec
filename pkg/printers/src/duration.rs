//! `k8s.io/apimachinery/pkg/util/duration.HumanDuration`, and the time since a moment.

use std::time::SystemTime;

use jiff::{SignedDuration, Timestamp};

/// `duration.HumanDuration`: a duration with ~2-3 significant figures ("5m7s", "2d3h"), a
/// slightly negative one (clock skew under 2 s) as "0s", a more negative one as `<invalid>`.
pub fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    } else if seconds < 0 {
        return "0s".to_owned();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// `HumanDuration(now - since)`, the text of `translateTimestampSince` for a set time.
pub(crate) fn since(since: Timestamp, now: SystemTime) -> String {
    human_duration(elapsed(since, now))
}

/// `now - since` as Go's `time.Sub` computes it: saturated, never an overflow.
fn elapsed(since: Timestamp, now: SystemTime) -> SignedDuration {
    let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX),
        Err(before) => {
            SignedDuration::try_from(before.duration()).map_or(SignedDuration::MIN, |d| -d)
        }
    };
    now.saturating_sub(since.as_duration())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn human(seconds: i64) -> String {
        human_duration(SignedDuration::from_secs(seconds))
    }

    #[test]
    fn human_duration_follows_apimachinery() {
        // The cases of apimachinery's duration_test.go.
        let cases = [
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (70 * 60, "70m"),
            (47 * 60, "47m"),
            (8 * 3600, "8h"),
            (4 * 3600 + 30 * 60, "4h30m"),
            (47 * 3600, "47h"),
            (49 * 3600, "2d1h"),
            (8 * 24 * 3600, "8d"),
            (367 * 24 * 3600, "367d"),
            (365 * 2 * 24 * 3600 + 25 * 24 * 3600, "2y25d"),
            (365 * 8 * 24 * 3600, "8y"),
            (0, "0s"),
            (-1, "0s"),
            (-2, "<invalid>"),
            (5 * 60, "5m"),
            (3 * 3600, "3h"),
            (2 * 24 * 3600, "2d"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human(seconds), text, "{seconds}s");
        }
    }

    #[test]
    fn since_counts_from_the_moment_to_now() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now = SystemTime::from(t) + std::time::Duration::from_millis(90_500);
        assert_eq!(since(t, now), "90s");
        let before = SystemTime::from(t) - std::time::Duration::from_secs(10);
        assert_eq!(since(t, before), "<invalid>");
    }
}
