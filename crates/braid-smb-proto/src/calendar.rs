//! Civil dates from Unix time, for the places the protocol spells a time
//! out (NetrRemoteTOD) and for RFC 3339 in the admin API.

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar: Howard Hinnant's `civil_from_days`.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Day of the week of a day since 1970-01-01, 0 = Sunday (1970-01-01 was
/// a Thursday).
pub fn weekday(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(weekday(0), 4);
        // 2000-02-29 (a leap day of a year divisible by 400).
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(weekday(11_016), 2);
        // 2026-11-25, a Wednesday.
        assert_eq!(civil_from_days(20_782), (2026, 11, 25));
        assert_eq!(weekday(20_782), 3);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
