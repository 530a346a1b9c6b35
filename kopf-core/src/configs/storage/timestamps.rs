//! Timestamps as Kopf stores them: Python's `datetime.isoformat(timespec='microseconds')`,
//! e.g. `2026-03-01T12:34:56.123456+00:00`, read back with the rules of the `iso8601` package
//! that Kopf parses them with.
//!
//! Kopf: `format_iso8601`/`parse_iso8601` in `kopf/_core/actions/progression.py`; the grammar
//! is `ISO8601_REGEX` of `iso8601` 2.1 (`iso8601/iso8601.py`).
//!
//! The one difference: a timestamp without an offset (as Kopf wrote before it became
//! timezone-aware) is read as UTC, where Kopf keeps a naive datetime.

use time::{Date, Month, OffsetDateTime, Time, UtcOffset};

/// The current time in UTC, at the microsecond precision of the stored format.
#[allow(
    dead_code,
    reason = "the engine's clock for progress records; unused until it lands"
)]
pub(crate) fn now() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff±HH:MM` in the timestamp's own offset; sub-microsecond digits
/// are dropped, as Python has none.
pub(crate) fn format_iso8601(timestamp: OffsetDateTime) -> String {
    let offset = timestamp.offset().whole_seconds();
    let sign = if offset < 0 { '-' } else { '+' };
    let offset = offset.unsigned_abs();
    let mut text = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}{sign}{:02}:{:02}",
        timestamp.year(),
        u8::from(timestamp.month()),
        timestamp.day(),
        timestamp.hour(),
        timestamp.minute(),
        timestamp.second(),
        timestamp.microsecond(),
        offset / 3600,
        offset % 3600 / 60,
    );
    if !offset.is_multiple_of(60) {
        text.push_str(&format!(":{:02}", offset % 60));
    }
    text
}

/// Parses an ISO-8601 timestamp the way Kopf does: `YYYY[-MM[-DD[(T| )HH[:MM[:SS[.f]]][tz]]]]`
/// and the basic forms without separators, fractions with `.` or `,` (truncated to
/// microseconds), `Z` or `±HH[:MM]`. Without an offset it is UTC. `None` when Kopf would fail.
pub(crate) fn parse_iso8601(text: &str) -> Option<OffsetDateTime> {
    let parts = Matcher::new(text.as_bytes()).first_full_match()?;
    if parts.year == 0 {
        return None; // Python's datetime starts at year 1.
    }
    let date = Date::from_calendar_date(
        i32::from(parts.year),
        Month::try_from(parts.month.unwrap_or(1)).ok()?,
        parts.day.unwrap_or(1),
    )
    .ok()?;
    // Python: int(Decimal('0.<digits>') * 1000000), i.e. truncated to microseconds.
    let microsecond = parts.fraction.map_or(0, |digits| {
        let padded = digits
            .iter()
            .copied()
            .chain(std::iter::repeat(b'0'))
            .take(6);
        padded.fold(0, |acc, digit| acc * 10 + u32::from(digit - b'0'))
    });
    let time = Time::from_hms_micro(
        parts.hour.unwrap_or(0),
        parts.minute.unwrap_or(0),
        parts.second.unwrap_or(0),
        microsecond,
    )
    .ok()?;
    let offset = match parts.zone {
        None | Some(Zone::Utc) => UtcOffset::UTC,
        Some(Zone::Offset {
            negative,
            hours,
            minutes,
        }) => {
            let seconds = i32::from(hours) * 3600 + i32::from(minutes) * 60;
            if seconds >= 24 * 3600 {
                return None; // Python's timezone() requires less than a day.
            }
            UtcOffset::from_whole_seconds(if negative { -seconds } else { seconds }).ok()?
        }
    };
    Some(date.with_time(time).assume_offset(offset))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zone {
    Utc,
    Offset {
        negative: bool,
        hours: u8,
        minutes: u8,
    },
}

/// The groups of one way to read the text, and how far that way got.
#[derive(Debug, Clone, Copy)]
struct Parts<'a> {
    pos: usize,
    year: u16,
    month: Option<u8>,
    day: Option<u8>,
    hour: Option<u8>,
    minute: Option<u8>,
    second: Option<u8>,
    fraction: Option<&'a [u8]>,
    zone: Option<Zone>,
}

/// A backtracking reading of `ISO8601_REGEX`: every step lists its alternatives in the
/// regex's order of preference, so the first reading that consumes the whole text is the one
/// Python's `re` would find.
struct Matcher<'a> {
    text: &'a [u8],
}

impl<'a> Matcher<'a> {
    fn new(text: &'a [u8]) -> Self {
        Self { text }
    }

    fn first_full_match(&self) -> Option<Parts<'a>> {
        let year = self.digits(0, 4)?;
        let start = Parts {
            pos: 4,
            year: year as u16,
            month: None,
            day: None,
            hour: None,
            minute: None,
            second: None,
            fraction: None,
            zone: None,
        };
        self.after_year(start)
            .into_iter()
            .find(|parts| self.at_end(parts.pos))
    }

    /// Python's `$`: the end, or just before a final newline.
    fn at_end(&self, pos: usize) -> bool {
        pos == self.text.len() || (pos + 1 == self.text.len() && self.text[pos] == b'\n')
    }

    fn byte(&self, pos: usize) -> Option<u8> {
        self.text.get(pos).copied()
    }

    /// Exactly `count` ASCII digits at `pos`, as a number.
    fn digits(&self, pos: usize, count: usize) -> Option<u32> {
        let digits = self.text.get(pos..pos + count)?;
        digits.iter().all(u8::is_ascii_digit).then(|| {
            digits
                .iter()
                .fold(0, |acc, d| acc * 10 + u32::from(d - b'0'))
        })
    }

    /// `(month part (day part (time part)?)?)?`
    fn after_year(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        let mut months = Vec::new();
        if self.byte(parts.pos) == Some(b'-') {
            for width in [2, 1] {
                if let Some(month) = self.digits(parts.pos + 1, width) {
                    months.push(Parts {
                        pos: parts.pos + 1 + width,
                        month: Some(month as u8),
                        ..parts
                    });
                }
            }
        }
        if let Some(month) = self.digits(parts.pos, 2)
            && !self.at_end(parts.pos + 2)
        {
            months.push(Parts {
                pos: parts.pos + 2,
                month: Some(month as u8),
                ..parts
            });
        }
        for with_month in months {
            out.extend(self.after_month(with_month));
        }
        out.push(parts);
        out
    }

    /// `(day part (time part)?)?`
    fn after_month(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        let mut days = Vec::new();
        if self.byte(parts.pos) == Some(b'-') {
            for width in [2, 1] {
                if let Some(day) = self.digits(parts.pos + 1, width) {
                    days.push(Parts {
                        pos: parts.pos + 1 + width,
                        day: Some(day as u8),
                        ..parts
                    });
                }
            }
        }
        if let Some(day) = self.digits(parts.pos, 2) {
            days.push(Parts {
                pos: parts.pos + 2,
                day: Some(day as u8),
                ..parts
            });
        }
        for with_day in days {
            out.extend(self.after_day(with_day));
            out.push(with_day);
        }
        out.push(parts);
        out
    }

    /// `[ T]HH(:?MM)?(:?S{1,2}([.,]f+)?)?(Z|[-+]HH:?(MM)?)?` (the caller adds "none of it").
    fn after_day(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        if !matches!(self.byte(parts.pos), Some(b' ' | b'T')) {
            return out;
        }
        let Some(hour) = self.digits(parts.pos + 1, 2) else {
            return out;
        };
        let with_hour = Parts {
            pos: parts.pos + 3,
            hour: Some(hour as u8),
            ..parts
        };
        for with_minute in self.optional_minute(with_hour) {
            for with_second in self.optional_second(with_minute) {
                out.extend(self.optional_zone(with_second));
            }
        }
        out
    }

    /// `(:?MM)?`
    fn optional_minute(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        for colon in [1, 0] {
            if colon == 1 && self.byte(parts.pos) != Some(b':') {
                continue;
            }
            if let Some(minute) = self.digits(parts.pos + colon, 2) {
                out.push(Parts {
                    pos: parts.pos + colon + 2,
                    minute: Some(minute as u8),
                    ..parts
                });
            }
        }
        out.push(parts);
        out
    }

    /// `(:?S{1,2}([.,]f+)?)?`
    fn optional_second(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        for colon in [1, 0] {
            if colon == 1 && self.byte(parts.pos) != Some(b':') {
                continue;
            }
            for width in [2, 1] {
                let Some(second) = self.digits(parts.pos + colon, width) else {
                    continue;
                };
                let with_second = Parts {
                    pos: parts.pos + colon + width,
                    second: Some(second as u8),
                    ..parts
                };
                if matches!(self.byte(with_second.pos), Some(b'.' | b',')) {
                    let start = with_second.pos + 1;
                    let count = self.text[start..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    for length in (1..=count).rev() {
                        out.push(Parts {
                            pos: start + length,
                            fraction: Some(&self.text[start..start + length]),
                            ..with_second
                        });
                    }
                }
                out.push(with_second);
            }
        }
        out.push(parts);
        out
    }

    /// `(Z|[-+]HH:?(MM)?)?`
    fn optional_zone(&self, parts: Parts<'a>) -> Vec<Parts<'a>> {
        let mut out = Vec::new();
        match self.byte(parts.pos) {
            Some(b'Z') => out.push(Parts {
                pos: parts.pos + 1,
                zone: Some(Zone::Utc),
                ..parts
            }),
            Some(sign @ (b'+' | b'-')) => {
                if let Some(hours) = self.digits(parts.pos + 1, 2) {
                    let after_hours = parts.pos + 3;
                    let zone = |minutes: u32| {
                        Some(Zone::Offset {
                            negative: sign == b'-',
                            hours: hours as u8,
                            minutes: minutes as u8,
                        })
                    };
                    for colon in [1, 0] {
                        if colon == 1 && self.byte(after_hours) != Some(b':') {
                            continue;
                        }
                        if let Some(minutes) = self.digits(after_hours + colon, 2) {
                            out.push(Parts {
                                pos: after_hours + colon + 2,
                                zone: zone(minutes),
                                ..parts
                            });
                        }
                        out.push(Parts {
                            pos: after_hours + colon,
                            zone: zone(0),
                            ..parts
                        });
                    }
                }
            }
            _ => {}
        }
        out.push(parts);
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use time::macros::datetime;

    use super::*;

    /// Kopf's `tests/persistence/test_iso8601_times.py`, formatting of aware datetimes.
    #[test]
    fn formatting_as_kopf() {
        let cases = [
            (
                datetime!(2000-01-01 0:00 UTC),
                "2000-01-01T00:00:00.000000+00:00",
            ),
            (
                datetime!(2000-01-01 9:08:07.654321 UTC),
                "2000-01-01T09:08:07.654321+00:00",
            ),
            (
                datetime!(2000-01-01 0:00 -11),
                "2000-01-01T00:00:00.000000-11:00",
            ),
            (
                datetime!(2000-01-01 9:08:07.654321 -11),
                "2000-01-01T09:08:07.654321-11:00",
            ),
            (
                datetime!(2000-01-01 0:00 +11),
                "2000-01-01T00:00:00.000000+11:00",
            ),
            (
                datetime!(2000-01-01 9:08:07.654321 +11),
                "2000-01-01T09:08:07.654321+11:00",
            ),
            (
                datetime!(2000-01-01 9:08:07.654321 +5:30:15),
                "2000-01-01T09:08:07.654321+05:30:15",
            ),
            (
                datetime!(2026-03-01 12:34:56.123456789 UTC),
                "2026-03-01T12:34:56.123456+00:00",
            ),
        ];
        for (timestamp, expected) in cases {
            assert_eq!(format_iso8601(timestamp), expected);
        }
    }

    /// Kopf's `tests/persistence/test_iso8601_times.py`, parsing (naive read as UTC here).
    #[test]
    fn parsing_as_kopf() {
        let cases = [
            ("2000-01-01T00:00:00.000000", datetime!(2000-01-01 0:00 UTC)),
            (
                "2000-01-01T09:08:07.654321",
                datetime!(2000-01-01 9:08:07.654321 UTC),
            ),
            (
                "2000-01-01T00:00:00.000000Z",
                datetime!(2000-01-01 0:00 UTC),
            ),
            (
                "2000-01-01T09:08:07.654321Z",
                datetime!(2000-01-01 9:08:07.654321 UTC),
            ),
            (
                "2000-01-01T00:00:00.000000+00:00",
                datetime!(2000-01-01 0:00 UTC),
            ),
            (
                "2000-01-01T09:08:07.654321+00:00",
                datetime!(2000-01-01 9:08:07.654321 UTC),
            ),
            (
                "2000-01-01T00:00:00.000000-11:00",
                datetime!(2000-01-01 0:00 -11),
            ),
            (
                "2000-01-01T09:08:07.654321-11:00",
                datetime!(2000-01-01 9:08:07.654321 -11),
            ),
            (
                "2000-01-01T00:00:00.000000+11:00",
                datetime!(2000-01-01 0:00 +11),
            ),
            (
                "2000-01-01T09:08:07.654321+11:00",
                datetime!(2000-01-01 9:08:07.654321 +11),
            ),
        ];
        for (text, expected) in cases {
            let parsed = parse_iso8601(text).unwrap_or_else(|| panic!("{text:?} unparsed"));
            assert_eq!(parsed, expected, "{text:?}");
            assert_eq!(parsed.offset(), expected.offset(), "{text:?}");
        }
    }

    /// What `iso8601.parse_date` 2.1.0 made of these texts, re-formatted by `isoformat`
    /// (naive results shown with `+00:00`, the UTC this parser assumes); `None` = ParseError.
    #[test]
    fn parsing_the_grammar_as_python() {
        let cases = [
            ("2000-01-01", Some("2000-01-01T00:00:00.000000+00:00")),
            ("2000", Some("2000-01-01T00:00:00.000000+00:00")),
            ("2000-1-5", Some("2000-01-05T00:00:00.000000+00:00")),
            ("2000-115", Some("2000-01-15T00:00:00.000000+00:00")),
            ("20000115", Some("2000-01-15T00:00:00.000000+00:00")),
            ("20000115T091011", Some("2000-01-15T09:10:11.000000+00:00")),
            ("2000-01-01 09:08", Some("2000-01-01T09:08:00.000000+00:00")),
            ("2000-01-01T09", Some("2000-01-01T09:00:00.000000+00:00")),
            (
                "2000-01-01T09:08:07,5+0530",
                Some("2000-01-01T09:08:07.500000+05:30"),
            ),
            (
                "2000-01-01T09:08:07.1234567891+05",
                Some("2000-01-01T09:08:07.123456+05:00"),
            ),
            (
                "2000-01-01T09:08:07Z\n",
                Some("2000-01-01T09:08:07.000000+00:00"),
            ),
            (
                "2026-03-01T12:34:56.123456+00:00",
                Some("2026-03-01T12:34:56.123456+00:00"),
            ),
            ("2000-01-01T0908", Some("2000-01-01T09:08:00.000000+00:00")),
            (
                "2000-01-01T090807.5Z",
                Some("2000-01-01T09:08:07.500000+00:00"),
            ),
            (
                "2000-01-01T09:08:7",
                Some("2000-01-01T09:08:07.000000+00:00"),
            ),
            ("2000-01-01T9:08:07", None),
            ("200001", None),
            ("2000-01-01T09:08:07+24:00", None),
            ("2000-13-01", None),
            ("2000-01-01T24:00:00", None),
            ("2000-01-01T09:08:60", None),
            ("2000-01-01t09:08:07", None),
            ("2000-01-01T09:08:07z", None),
            ("2000-01-01T09:8:07", None),
            ("0000-01-01", None),
            ("", None),
            ("garbage", None),
            ("2000-01-01T09:08:07.", None),
            ("2000-01-01T09:08:07+", None),
        ];
        for (text, expected) in cases {
            let parsed = parse_iso8601(text).map(format_iso8601);
            assert_eq!(parsed.as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn now_is_utc_in_microseconds() {
        let now = now();
        assert_eq!(now.offset(), UtcOffset::UTC);
        assert_eq!(now.nanosecond() % 1_000, 0);
    }

    fn timestamps() -> impl Strategy<Value = OffsetDateTime> {
        (0i64..253_402_300_799, 0u32..1_000_000, -86_399i32..86_400)
            .prop_map(|(seconds, micros, offset)| {
                let offset = UtcOffset::from_whole_seconds(offset / 60 * 60).unwrap();
                OffsetDateTime::from_unix_timestamp(seconds)
                    .unwrap()
                    .replace_microsecond(micros)
                    .unwrap()
                    .to_offset(offset)
            })
            .prop_filter("python's years 1..=9999", |t| {
                (1..=9999).contains(&t.year())
            })
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(timestamp in timestamps()) {
            let text = format_iso8601(timestamp);
            let parsed = parse_iso8601(&text).expect("own format parses");
            prop_assert_eq!(parsed, timestamp);
            prop_assert_eq!(parsed.offset(), timestamp.offset());
            prop_assert_eq!(format_iso8601(parsed), text);
        }

        #[test]
        fn parsing_never_panics(text in "[0-9T:.,+Z -]{0,40}") {
            let _ = parse_iso8601(&text);
        }
    }
}
