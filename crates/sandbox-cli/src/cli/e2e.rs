//! `kcm-sandbox e2e`: upstream's e2e suite against one controller manager or both in turn
//! (see `kcm_envtest::envtest::e2e`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lexopt::prelude::*;

use super::{duration, text, value};
use crate::envtest::AssetsError;
use crate::envtest::e2e::{self, Report, RunOptions, Selection, Suite};
use crate::envtest::sidebyside::Side;

/// Why `e2e`'s command line is refused, or the suite could not be run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line cannot be read.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// A flag's value is refused (boxed: the command's error holds this one).
    #[error(transparent)]
    Flag(Box<super::Error>),
    /// An argument `e2e` does not take.
    #[error("e2e: {source}")]
    Unexpected {
        /// lexopt's account of it.
        #[source]
        source: lexopt::Error,
    },
    /// `--procs` or `--nodes` is 0.
    #[error("e2e: --procs and --nodes must be at least 1")]
    ZeroCount,
    /// `--ci` with `--focus` or `--skip`.
    #[error("e2e: --ci runs a fixed list; it takes no --focus or --skip")]
    CiSelection,
    /// Upstream's binary is not among the assets.
    #[error(transparent)]
    Upstream(#[from] AssetsError),
    /// The suite could not be found, run or read.
    #[error(transparent)]
    Suite(#[from] e2e::Error),
    /// A summary could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What `e2e` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The binaries to run, in order.
    pub sides: Vec<(Side, PathBuf)>,
    /// `--ci`, `--focus`/`--skip`, or the full selection.
    pub selection: Selection,
    /// `--procs`.
    pub procs: usize,
    /// `--nodes`.
    pub nodes: usize,
    /// `--timeout`.
    pub timeout: Duration,
    /// `--out`: one folder per binary inside.
    pub out: PathBuf,
    /// Print the outcome of every spec, not only of those that did not pass.
    pub verbose: bool,
    /// `--list`: print the selected specs (a dry run) and run nothing.
    pub list: bool,
}

impl From<super::Error> for Error {
    fn from(e: super::Error) -> Error {
        Error::Flag(Box::new(e))
    }
}

/// Parses `e2e`'s options. `upstream_default` gives upstream's binary when `--upstream` or
/// `--both` names none.
pub fn parse(
    parser: &mut lexopt::Parser,
    upstream_default: impl Fn() -> Result<PathBuf, AssetsError>,
) -> Result<Options, Error> {
    let mut ours = crate::cli::demo::default_controller_manager();
    let mut upstream: Option<PathBuf> = None;
    let (mut run_ours, mut run_upstream) = (true, false);
    let (mut focus, mut skip, mut ci) = (None, None, false);
    let mut options = Options {
        sides: Vec::new(),
        selection: Selection::Full,
        procs: 2,
        nodes: 3,
        timeout: Duration::from_secs(75 * 60),
        out: std::env::temp_dir().join(format!("kcm-e2e-{}", std::process::id())),
        verbose: false,
        list: false,
    };
    while let Some(arg) = parser.next()? {
        match arg {
            Long("ours") => ours = PathBuf::from(text(parser, "--ours")?),
            Long("upstream") => {
                (run_ours, run_upstream) = (false, true);
                if let Some(path) = parser.optional_value() {
                    upstream = Some(PathBuf::from(path));
                }
            }
            Long("both") => (run_ours, run_upstream) = (true, true),
            Long("ci") => ci = true,
            Long("focus") => focus = Some(text(parser, "--focus")?),
            Long("skip") => skip = Some(text(parser, "--skip")?),
            Long("procs") => options.procs = value(parser, "--procs")?,
            Long("nodes") => options.nodes = value(parser, "--nodes")?,
            Long("timeout") => options.timeout = duration(parser, "--timeout")?,
            Long("out") => options.out = PathBuf::from(text(parser, "--out")?),
            Long("verbose") | Short('v') => options.verbose = true,
            Long("list") => options.list = true,
            other => return Err(Error::Unexpected { source: other.unexpected() }),
        }
    }
    if options.procs == 0 || options.nodes == 0 {
        return Err(Error::ZeroCount);
    }
    options.selection = match (ci, focus, skip) {
        (true, None, None) => Selection::Ci,
        (true, _, _) => return Err(Error::CiSelection),
        (false, None, None) => Selection::Full,
        (false, focus, skip) => Selection::Custom {
            focus: focus.unwrap_or_else(|| e2e::FOCUS.to_string()),
            skip: skip.unwrap_or_else(e2e::skip_regex),
        },
    };
    if run_upstream {
        options.sides.push((Side::Upstream, upstream.map_or_else(upstream_default, Ok)?));
    }
    if run_ours {
        options.sides.push((Side::Ours, ours));
    }
    Ok(options)
}

/// Runs the suite for each binary in turn (each alone on the machine), prints each report and,
/// with both, the specs whose outcome differs. Fails when a spec failed (one binary) or when a
/// spec that passed with upstream's binary did not pass with ours (both).
pub fn run(options: Options) -> Result<ExitCode, Error> {
    let suite = Suite::locate()?;
    if options.list {
        let specs = e2e::list(&suite, &options.selection)?;
        specs.iter().for_each(|spec| println!("{spec}"));
        println!("{} specs", specs.len());
        return Ok(ExitCode::SUCCESS);
    }
    let mut reports: Vec<Report> = Vec::new();
    for (side, binary) in &options.sides {
        let out = options.out.join(side.name());
        println!("--- {}: {} (output in {})", side.name(), binary.display(), out.display());
        let run = RunOptions {
            side: *side,
            binary: binary.clone(),
            selection: options.selection.clone(),
            procs: options.procs,
            nodes: options.nodes,
            timeout: options.timeout,
            out: out.clone(),
        };
        let report = e2e::run(&suite, &run)?;
        print!("{report}");
        if options.verbose {
            report.specs.iter().for_each(|(spec, outcome)| println!("  {:<8} {spec}", outcome.label()));
        }
        let summary = serde_json::to_string_pretty(&e2e::summary(&report)).unwrap_or_default();
        let path = out.join("summary.json");
        if let Err(source) = std::fs::write(&path, summary) {
            return Err(Error::Write { path, source });
        }
        reports.push(report);
    }
    let clean = match reports.as_slice() {
        [upstream, ours] => {
            let differences = e2e::compare(upstream, ours);
            println!("--- specs whose outcome differs: {}", differences.len());
            for difference in &differences {
                let label = |o: &Option<e2e::Outcome>| o.as_ref().map_or("not run", |o| o.label()).to_string();
                let mark = if difference.is_regression() { "!" } else { " " };
                println!(
                    "{mark} upstream {:<8} ours {:<8} {}",
                    label(&difference.upstream),
                    label(&difference.ours),
                    difference.spec
                );
            }
            !differences.iter().any(e2e::Difference::is_regression)
        }
        reports => reports.iter().all(|r| r.failed().next().is_none() && r.suite_failure.is_none()),
    };
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Options, Error> {
        let mut parser = lexopt::Parser::from_iter(std::iter::once("kcm-sandbox").chain(args.iter().copied()));
        parse(&mut parser, || Ok(PathBuf::from("/upstream/kcm")))
    }

    #[test]
    fn ours_alone_on_the_full_selection_by_default() {
        let options = parse_args(&[]).unwrap();
        assert_eq!(options.sides.len(), 1);
        assert_eq!(options.sides[0].0, Side::Ours);
        assert_eq!(options.selection, Selection::Full);
        assert_eq!((options.procs, options.nodes), (2, 3));
    }

    #[test]
    fn upstream_both_and_selections() {
        let upstream = parse_args(&["--upstream"]).unwrap();
        assert_eq!(upstream.sides, vec![(Side::Upstream, PathBuf::from("/upstream/kcm"))]);
        let named = parse_args(&["--upstream=/x/kcm", "--ci"]).unwrap();
        assert_eq!(named.sides[0].1, PathBuf::from("/x/kcm"));
        assert_eq!(named.selection, Selection::Ci);
        let both = parse_args(&["--both", "--ours", "/o", "--focus", "Job"]).unwrap();
        assert_eq!(both.sides.iter().map(|s| s.0).collect::<Vec<_>>(), vec![Side::Upstream, Side::Ours]);
        assert!(matches!(&both.selection, Selection::Custom { focus, skip } if focus == "Job" && !skip.is_empty()));
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        assert!(parse_args(&["--ci", "--focus", "x"]).unwrap_err().to_string().contains("--ci"));
        assert!(parse_args(&["--procs", "0"]).unwrap_err().to_string().contains("--procs"));
        assert!(parse_args(&["--procs", "two"]).unwrap_err().to_string().contains("--procs"));
        assert!(parse_args(&["--bogus"]).unwrap_err().to_string().contains("--bogus"));
    }
}
