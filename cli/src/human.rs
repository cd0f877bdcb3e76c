//! Durations as the tool's messages show them to people: `1s`, `0.33s`, `29.3s`, `1m30s`,
//! `2h5m`, never `Debug`'s `999.875004ms`.

use std::time::Duration;

/// `duration` rounded to what a person reads at a glance: whole milliseconds under a tenth of
/// a second (`40ms`), hundredths under ten seconds (`0.33s`, `1s`), tenths under a minute
/// (`29.3s`), whole seconds under an hour (`1m30s`, `5m`), and hours, minutes and seconds
/// beyond (`2h`, `1h0m5s`).
pub fn duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    if millis < 100 {
        return format!("{millis}ms");
    }
    let seconds = duration.as_secs_f64();
    // Rounded first, so that what rounds up to the next unit is shown in it (59.96s is 1m).
    let hundredths = (seconds * 100.0).round();
    if hundredths < 1000.0 {
        return format!("{}s", trimmed(hundredths / 100.0));
    }
    let tenths = (seconds * 10.0).round();
    if tenths < 600.0 {
        return format!("{}s", trimmed(tenths / 10.0));
    }
    let whole = duration.as_secs() + u64::from(duration.subsec_millis() >= 500);
    let (hours, minutes, seconds) = (whole / 3600, whole % 3600 / 60, whole % 60);
    match (hours, minutes, seconds) {
        (0, minutes, 0) => format!("{minutes}m"),
        (0, minutes, seconds) => format!("{minutes}m{seconds}s"),
        (hours, 0, 0) => format!("{hours}h"),
        (hours, minutes, 0) => format!("{hours}h{minutes}m"),
        (hours, minutes, seconds) => format!("{hours}h{minutes}m{seconds}s"),
    }
}

/// A number of seconds already rounded, without trailing zeros: `1`, `0.33`, `29.3`.
fn trimmed(seconds: f64) -> String {
    let text = format!("{seconds:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_read_as_people_write_them() {
        let table = [
            (Duration::ZERO, "0s"),
            (Duration::from_micros(400), "0s"),
            (Duration::from_millis(5), "5ms"),
            (Duration::from_millis(99), "99ms"),
            (Duration::from_millis(100), "0.1s"),
            (Duration::from_millis(333), "0.33s"),
            (Duration::from_nanos(999_875_004), "1s"),
            (Duration::from_millis(2500), "2.5s"),
            (Duration::from_millis(9_994), "9.99s"),
            (Duration::from_millis(9_996), "10s"),
            (Duration::from_millis(29_270), "29.3s"),
            (Duration::from_millis(59_960), "1m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(299_600), "5m"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(3600 + 5), "1h0m5s"),
            (Duration::from_secs(2 * 3600 + 5 * 60), "2h5m"),
            (Duration::from_secs(365 * 24 * 3600), "8760h"),
        ];
        for (given, shown) in table {
            assert_eq!(duration(given), shown, "{given:?}");
        }
    }
}
