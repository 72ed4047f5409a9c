use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().expect("a timestamp")
}

/// The next activations of `spec` after `from`.
fn nexts(spec: &str, from: &str, count: usize) -> Vec<String> {
    let schedule = parse_standard(spec).expect("a schedule");
    let mut t = at(from);
    (0..count)
        .map(|_| {
            t = schedule.next(t).expect("a next time");
            t.to_string()
        })
        .collect()
}

#[test]
fn schedules_parse_as_robfig_cron_does() {
    for good in
        ["*/5 * * * *", "0 0 1 jan-dec MON-fri", "@hourly", "@every 1h30m", "TZ=UTC 0 * * * *", "5,10 1-3/2 ? * 0"]
    {
        assert!(parse_standard(good).is_ok(), "{good}");
    }
    let cases = [
        ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
        ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("x * * * *", "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"),
        ("-1 * * * *", "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every x", "failed to parse duration @every x: time: invalid duration \"x\""),
        ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
        ("@every -1x", "failed to parse duration @every -1x: time: unknown unit \"x\" in duration \"-1x\""),
        ("TZ=Mars/Olympus 0 * * * *", "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"),
        ("", "empty spec string"),
    ];
    for (spec, message) in cases {
        assert_eq!(parse_standard(spec).map(drop).map_err(|e| e.to_string()), Err(message.to_string()), "{spec}");
    }
}

#[test]
fn a_bad_duration_or_zone_is_kept_as_the_source() {
    let error = parse_standard("@every 5").expect_err("no unit");
    let source = std::error::Error::source(&error).and_then(|e| e.downcast_ref::<ParseDurationError>());
    assert_eq!(source, Some(&ParseDurationError::MissingUnit { text: "5".into() }));
    let error = parse_standard("TZ=Mars/Olympus 0 * * * *").expect_err("no such zone");
    let source = std::error::Error::source(&error).and_then(|e| e.downcast_ref::<LocationError>());
    assert_eq!(source, Some(&LocationError::Unknown { name: "Mars/Olympus".into() }));
}

#[test]
fn locations_load_as_go_loads_them() {
    assert_eq!(load_location("").expect("utc"), TimeZone::UTC);
    assert_eq!(load_location("UTC").expect("utc"), TimeZone::UTC);
    assert!(load_location("Europe/Berlin").is_ok());
    // Links are zones of their own name (Go opens the file the name names).
    for link in ["Asia/Calcutta", "Etc/UTC", "US/Eastern"] {
        if std::path::Path::new("/usr/share/zoneinfo").join(link).exists() {
            assert!(load_location(link).is_ok(), "{link}");
        }
    }
    assert_eq!(load_location("Foo/Bar").unwrap_err().to_string(), "unknown time zone Foo/Bar");
    assert_eq!(load_location("europe/berlin").unwrap_err().to_string(), "unknown time zone europe/berlin");
    assert_eq!(load_location("../etc/passwd").unwrap_err().to_string(), "time: invalid location name");
}

#[test]
fn fields_select_minutes_hours_and_months() {
    assert_eq!(
        nexts("TZ=UTC */20 * * * *", "2026-11-26T10:02:30.5Z", 3),
        ["2026-11-26T10:20:00Z", "2026-11-26T10:40:00Z", "2026-11-26T11:00:00Z"]
    );
    assert_eq!(nexts("TZ=UTC * * * * *", "2026-11-26T10:00:00Z", 2), ["2026-11-26T10:01:00Z", "2026-11-26T10:02:00Z"]);
    assert_eq!(
        nexts("TZ=UTC 0 0 1 feb,aug *", "2026-11-26T10:00:00Z", 2),
        ["2027-02-01T00:00:00Z", "2027-08-01T00:00:00Z"]
    );
    assert_eq!(
        nexts("TZ=UTC 15 3-5/2 * * *", "2026-11-26T03:15:00Z", 2),
        ["2026-11-26T05:15:00Z", "2026-11-27T03:15:00Z"]
    );
    assert_eq!(nexts("TZ=UTC @monthly", "2026-12-15T00:00:00Z", 1), ["2027-01-01T00:00:00Z"]);
    assert_eq!(nexts("TZ=UTC @yearly", "2026-12-15T00:00:00Z", 1), ["2027-01-01T00:00:00Z"]);
    // 2026-11-26 is a Thursday; @weekly is Sunday midnight.
    assert_eq!(nexts("TZ=UTC @weekly", "2026-11-26T10:00:00Z", 1), ["2026-11-29T00:00:00Z"]);
    assert_eq!(nexts("TZ=UTC @hourly", "2026-11-26T10:00:00Z", 1), ["2026-11-26T11:00:00Z"]);
    assert_eq!(nexts("TZ=UTC @daily", "2026-11-26T10:00:00Z", 1), ["2026-11-27T00:00:00Z"]);
}

#[test]
fn day_of_month_and_day_of_week_match_either_unless_one_is_a_star() {
    // Neither is a star: the 1st of the month or any Monday (2026-11-30 is a Monday).
    assert_eq!(
        nexts("TZ=UTC 0 0 1 * mon", "2026-11-26T10:00:00Z", 2),
        ["2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"]
    );
    // The day of month is a star: Mondays only.
    assert_eq!(nexts("TZ=UTC 0 0 * * 1", "2026-11-26T10:00:00Z", 2), ["2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"]);
    // A step over all days is not a star ("*/1" keeps it, "*/2" drops it).
    assert_eq!(nexts("TZ=UTC 0 0 */2 * mon", "2026-11-26T10:00:00Z", 1), ["2026-11-27T00:00:00Z"]);
    assert_eq!(nexts("TZ=UTC 0 0 */1 * mon", "2026-11-26T10:00:00Z", 1), ["2026-11-30T00:00:00Z"]);
}

#[test]
fn a_day_that_never_comes_gives_no_time() {
    let schedule = parse_standard("TZ=UTC 0 0 30 2 *").expect("it parses");
    assert_eq!(schedule.next(at("2026-11-26T10:00:00Z")), None);
    // February 29th within five years.
    assert_eq!(nexts("TZ=UTC 0 0 29 2 *", "2026-11-26T10:00:00Z", 1), ["2028-02-29T00:00:00Z"]);
}

#[test]
fn every_adds_whole_seconds_to_the_second() {
    assert_eq!(nexts("@every 90s", "2026-11-26T10:00:00.75Z", 2), ["2026-11-26T10:01:30Z", "2026-11-26T10:03:00Z"]);
    assert_eq!(nexts("@every 1500ms", "2026-11-26T10:00:00Z", 1), ["2026-11-26T10:00:01Z"]);
    assert_eq!(nexts("@every 10ms", "2026-11-26T10:00:00Z", 1), ["2026-11-26T10:00:01Z"]);
    assert_eq!(nexts("@every -5m", "2026-11-26T10:00:00Z", 1), ["2026-11-26T10:00:01Z"]);
}

#[test]
fn time_zones_place_the_fields() {
    // 09:00 in New York is 14:00 UTC in winter, 13:00 in summer.
    assert_eq!(nexts("TZ=America/New_York 0 9 * * *", "2026-11-26T15:00:00Z", 1), ["2026-11-27T14:00:00Z"]);
    assert_eq!(nexts("CRON_TZ=America/New_York 0 9 * * *", "2026-07-01T00:00:00Z", 1), ["2026-07-01T13:00:00Z"]);
    assert_eq!(nexts("TZ=Asia/Tokyo @daily", "2026-11-26T15:30:00Z", 1), ["2026-11-27T15:00:00Z"]);
}

#[test]
fn a_time_skipped_by_daylight_saving_is_skipped_that_day() {
    // 2026-03-08: New York's clocks go from 02:00 EST to 03:00 EDT; 02:30 never happens.
    assert_eq!(
        nexts("TZ=America/New_York 30 2 * * *", "2026-03-07T00:00:00Z", 2),
        ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"]
    );
    // Every hour's minute 30 goes from 01:30 EST to 03:30 EDT.
    assert_eq!(
        nexts("TZ=America/New_York 30 * * * *", "2026-03-08T06:00:00Z", 2),
        ["2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"]
    );
}

#[test]
fn a_time_repeated_by_daylight_saving_runs_twice() {
    // 2026-11-01: New York's clocks go back from 02:00 EDT to 01:00 EST; 01:30 happens twice.
    assert_eq!(
        nexts("TZ=America/New_York 30 1 * * *", "2026-11-01T04:00:00Z", 3),
        ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"]
    );
}

#[test]
fn a_missing_midnight_moves_to_the_next_hour_that_exists() {
    // Go's time.Date reads a wall time in a gap with the offset after the change when the zone
    // is west of UTC...
    let new_york = load_location("America/New_York").expect("a zone");
    assert_eq!(go_date(2026, 3, 8, 2 * 3600 + 1800, &new_york).expect("a time"), at("2026-03-08T06:30:00Z"));
    // ... and with the offset before it when east of UTC: 02:30 is 03:30 CEST either way.
    let berlin = load_location("Europe/Berlin").expect("a zone");
    assert_eq!(go_date(2026, 3, 29, 2 * 3600 + 1800, &berlin).expect("a time"), at("2026-03-29T01:30:00Z"));
    // A repeated wall time is the first of the two.
    assert_eq!(go_date(2026, 11, 1, 3600 + 1800, &new_york).expect("a time"), at("2026-11-01T05:30:00Z"));
    // Months and days out of range roll over.
    assert_eq!(go_date(2026, 13, 32, 0, &TimeZone::UTC).expect("a time"), at("2027-02-01T00:00:00Z"));
    // Havana's clocks went from 00:00 to 01:00 on 2024-03-10: the day's first run is at 01:00.
    assert_eq!(nexts("TZ=America/Havana 0 * 10 3 *", "2024-03-01T00:00:00Z", 1), ["2024-03-10T05:00:00Z"]);
}
