//! A server's wall clock read from a file through libfaketime (Debian's `faketime`), frozen at
//! the time the file names until the file changes; the monotonic clock is left alone.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// libfaketime, as Debian's `faketime` package installs it.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The arguments of `env` that run a program reading its wall clock from `file`: given to
/// `env` itself rather than set on a command that starts it as another user, so that
/// libfaketime starts in the program alone (started in a process of another user, it makes
/// shared memory the program may not open).
pub(super) fn env_args(file: &Path) -> Vec<String> {
    assert!(
        Path::new(FAKETIME).is_file(),
        "{FAKETIME} is missing: install Debian's faketime"
    );
    vec![
        format!("LD_PRELOAD={FAKETIME}"),
        format!("FAKETIME_TIMESTAMP_FILE={}", file.display()),
        "FAKETIME_NO_CACHE=1".to_owned(),
        "FAKETIME_DONT_FAKE_MONOTONIC=1".to_owned(),
        "FAKETIME_DISABLE_SHM=1".to_owned(),
        // The file's time is read as local time: UTC, as it is written.
        "TZ=UTC".to_owned(),
    ]
}

/// Writes `at` to `file` as libfaketime reads a frozen time, `YYYY-MM-DD hh:mm:ss.uuuuuu5`:
/// half a microsecond past `at`, so that libfaketime, which holds the time as a double (a
/// quarter of a microsecond apart these years), reads `at`'s microsecond and not the one
/// before it.
pub(super) fn set(file: &Path, at: SystemTime) {
    let since = at.duration_since(UNIX_EPOCH).expect("a time after 1970");
    let seconds = since.as_secs();
    let (year, month, day) = civil(i64::try_from(seconds / 86_400).expect("a near date"));
    let of_day = seconds % 86_400;
    let text = format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}5\n",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_micros()
    );
    // Written whole under another name, then renamed: a reader never sees half of it.
    let next = file.with_extension("next");
    std::fs::write(&next, text).expect("write the clock file");
    std::fs::rename(&next, file).expect("replace the clock file");
}

/// The proleptic Gregorian date of `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).expect("a day of the month");
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).expect("a month");
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_written_as_libfaketime_reads_them() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(civil(-1), (1969, 12, 31));
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("clock");
        set(
            &file,
            UNIX_EPOCH + Duration::from_micros(1_709_164_800_000_001),
        );
        let text = std::fs::read_to_string(&file).expect("written");
        assert_eq!(text, "2024-02-29 00:00:00.0000015\n");
    }
}
