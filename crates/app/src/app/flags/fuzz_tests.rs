//! Generated command lines (docs/reliability.md, "Fuzzing"): every flag of the table with values of every
//! shape, unknown flags, all dash syntaxes, empty, huge and non-UTF-8 arguments, repeats. The
//! parser must answer each with a command or one clear line naming the problem, never panic.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use proptest::prelude::*;

use super::{Command, FLAGS, FlagError, parse};
use crate::fuzz::{assert_clear, config};

/// Values that sit on the edges of the flag types: numbers out of range, odd durations, CSV
/// quoting, CIDRs, quantities, maps, booleans.
const EDGE_VALUES: &[&str] = &[
    "",
    "0",
    "-1",
    "1",
    "+1",
    "0x1f",
    "1e309",
    "-1e309",
    "NaN",
    "Inf",
    "99999999999999999999",
    "2147483648",
    "-9223372036854775809",
    "true",
    "false",
    "T",
    "maybe",
    "1h",
    "-5s",
    "1h2m3.5s",
    "1.5",
    "5",
    "9999999h",
    "a,b,,c",
    "\"a,b\",c",
    "\"",
    "\"unterminated",
    "k=v",
    "k=v,k2",
    "=",
    "a:b,c",
    "10.0.0.0/8",
    "1.2.3.4/33",
    "::1",
    "fd00::/200",
    "1Gi",
    "1.5Ki",
    "-1Mi",
    "1e3",
    "*",
    "-*",
    "*,-foo",
    "nope",
    "foo*=3",
    "x=1,=2",
    "v1.33",
    "1.32",
    "raw",
    "0.0.0",
    "Bar=true",
    "AllAlpha=false",
    "AllBeta=maybe",
    "cert,key:a.com",
];

/// One value: an edge value, random text (any Unicode, controls included) or a huge one.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(EDGE_VALUES).prop_map(str::to_string),
        3 => any::<String>(),
        1 => "[0-9a-z,=:/.-]{0,40}",
        1 => (proptest::sample::select(EDGE_VALUES), 1usize..4096).prop_map(|(v, n)| v.repeat(n)),
    ]
}

/// A name of the table, as written (`-` or `_`), or a name that is no flag.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(FLAGS).prop_map(|f| f.name.to_string()),
        1 => proptest::sample::select(FLAGS).prop_map(|f| f.name.replace('-', "_")),
        1 => "[a-z_-]{0,20}",
        1 => any::<String>(),
    ]
}

/// One flag occurrence as one or two arguments, or an argument that is not a well-formed flag.
fn occurrence() -> impl Strategy<Value = Vec<OsString>> {
    let os = |s: String| OsString::from(s);
    prop_oneof![
        4 => (name(), value()).prop_map(move |(n, v)| vec![os(format!("--{n}={v}"))]),
        3 => (name(), value()).prop_map(move |(n, v)| vec![os(format!("--{n}")), os(v)]),
        1 => name().prop_map(move |n| vec![os(format!("--{n}"))]),
        1 => value().prop_map(move |v| vec![os(format!("-v{v}"))]),
        1 => value().prop_map(move |v| vec![os("-v".into()), os(v)]),
        1 => "-[a-zA-Z=]{0,4}".prop_map(move |s| vec![os(s)]),
        1 => proptest::sample::select(&["--", "-", "---x", "--=x", "", "-h", "--help=maybe", "--version=raw"][..])
            .prop_map(move |s| vec![os(s.to_string())]),
        1 => any::<String>().prop_map(move |s| vec![os(s)]),
        1 => proptest::collection::vec(any::<u8>(), 0..16).prop_map(|b| vec![OsString::from_vec(b)]),
        1 => (name(), proptest::collection::vec(any::<u8>(), 0..16)).prop_map(|(n, mut b)| {
            let mut arg = format!("--{n}=").into_bytes();
            arg.append(&mut b);
            vec![OsString::from_vec(arg)]
        }),
    ]
}

fn command_line() -> impl Strategy<Value = Vec<OsString>> {
    proptest::collection::vec(occurrence(), 0..8).prop_map(|args| args.concat())
}

/// What every answer must satisfy; a refusal names the flag whose value it refuses.
fn check(args: &[OsString]) {
    match parse(args.to_vec()) {
        Ok(Command::Help(text) | Command::Version(text)) => assert!(!text.is_empty()),
        Ok(Command::Run(_)) => {}
        Err(error) => {
            assert_clear(&error.to_string());
            if let FlagError::InvalidValue { flag, reason, .. } = &error {
                assert!(error.to_string().contains(flag.as_str()), "{error}");
                assert!(!reason.to_string().is_empty(), "{error}");
            }
        }
    }
}

fn with_defaults() -> Vec<&'static super::FlagSpec> {
    FLAGS.iter().filter(|f| !f.default.is_empty()).collect()
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn generated_command_lines_parse_or_give_one_clear_line(args in command_line()) {
        check(&args);
    }

    /// Every flag set to its own default, in either syntax, is a valid command line (an empty
    /// default is the zero value, not text in the flag's syntax).
    #[test]
    fn flags_set_to_their_defaults_parse(
        flags in proptest::collection::vec((proptest::sample::select(with_defaults()), any::<bool>()), 0..12)
    ) {
        let mut args = Vec::new();
        for (flag, attached) in &flags {
            if flag.kind.no_value_default.is_some() || *attached {
                args.push(OsString::from(format!("--{}={}", flag.name, flag.default)));
            } else {
                args.extend([OsString::from(format!("--{}", flag.name)), OsString::from(flag.default)]);
            }
        }
        if let Err(error) = parse(args.clone()) {
            panic!("{args:?}: {error}");
        }
    }
}
