//! The `kcm-sandbox` command line: `serve` and `demo`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lexopt::prelude::*;

use super::server::{Sandbox, SandboxOptions};
use crate::flags::parse_go_duration;

const USAGE: &str = "\
Usage:
  kcm-sandbox serve [options]   run the development API server until SIGINT/SIGTERM
  kcm-sandbox demo [options]    run the server, simulated nodes and kube-controller-manager, and narrate

serve options:
  --listen ADDR               address to listen on (default 127.0.0.1:6443; port 0 picks a free one)
  --nodes N                   simulated nodes to register (default 0)
  --kubeconfig-out PATH       write the admin kubeconfig here, controller-manager.conf and sa.key beside it
                              (default ./sandbox/admin.conf)
  --plain-http                serve plain HTTP; requests without credentials act as a cluster admin
  --authorization-mode MODE   AlwaysAllow (default) or RBAC (also Node,RBAC): enforce upstream's bootstrap
                              RBAC policy; simulated nodes act as the admin
  --history N                 changes kept for watches; older resourceVersions are Gone (default 10000)
  --bookmark-interval DUR     how often watches get a BOOKMARK (default 1m0s)
  --fail-next N:CODE[:SECS]   answer the next N requests with HTTP CODE (500, 429, 503), Retry-After SECS
  --latency DUR               delay every request by DUR
  --close-watches-every DUR   cut every open watch (and connection) this often
  --compact-every DUR         forget the change history this often (older resourceVersions are Gone)

demo options:
  --controller-manager PATH   the kube-controller-manager binary (default: next to kcm-sandbox)
  --nodes N                   simulated nodes (default 3)
";

/// Runs the command line; `Err` is a usage error (exit status 2).
pub fn run(args: impl IntoIterator<Item = OsString>) -> Result<ExitCode, String> {
    let mut parser = lexopt::Parser::from_iter(std::iter::once(OsString::from("kcm-sandbox")).chain(args));
    let command = match parser.next().map_err(|e| e.to_string())? {
        Some(Value(command)) => command.string().map_err(|e| e.to_string())?,
        Some(Long("help") | Short('h')) | None => {
            print!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(other) => return Err(format!("{}\n{USAGE}", other.unexpected())),
    };
    match command.as_str() {
        "serve" => serve(parse_serve(&mut parser)?),
        "demo" => super::demo::run(super::demo::parse(&mut parser)?),
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}

/// Options of `serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub sandbox: SandboxOptions,
    pub nodes: usize,
    pub kubeconfig_out: PathBuf,
    pub fail_next: Option<(usize, u16, Option<u64>)>,
    pub latency: Option<Duration>,
    pub close_watches_every: Option<Duration>,
    pub compact_every: Option<Duration>,
}

fn parse_serve(parser: &mut lexopt::Parser) -> Result<ServeOptions, String> {
    let mut options = ServeOptions {
        sandbox: SandboxOptions::default(),
        nodes: 0,
        kubeconfig_out: PathBuf::from("sandbox/admin.conf"),
        fail_next: None,
        latency: None,
        close_watches_every: None,
        compact_every: None,
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let flag = match &arg {
            Long(name) => format!("--{name}"),
            other => return Err(format!("{}\n{USAGE}", other.clone().unexpected())),
        };
        match arg {
            Long("plain-http") => options.sandbox.plain_http = true,
            Long("authorization-mode") => options.sandbox.authorization_mode = value(parser, &flag)?,
            Long("listen") => options.sandbox.listen = value(parser, &flag)?,
            Long("nodes") => options.nodes = value(parser, &flag)?,
            Long("kubeconfig-out") => options.kubeconfig_out = PathBuf::from(text(parser, &flag)?),
            Long("history") => options.sandbox.history = value(parser, &flag)?,
            Long("bookmark-interval") => options.sandbox.bookmark_interval = duration(parser, &flag)?,
            Long("latency") => options.latency = Some(duration(parser, &flag)?),
            Long("fail-next") => options.fail_next = Some(parse_fail_next(&text(parser, &flag)?)?),
            Long("close-watches-every") => options.close_watches_every = Some(duration(parser, &flag)?),
            Long("compact-every") => options.compact_every = Some(duration(parser, &flag)?),
            Long("help") => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown flag: {flag}")),
        }
    }
    Ok(options)
}

fn text(parser: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    parser.value().map_err(|e| format!("{flag}: {e}"))?.string().map_err(|_| format!("{flag}: not valid UTF-8"))
}

fn value<T: std::str::FromStr>(parser: &mut lexopt::Parser, flag: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let raw = text(parser, flag)?;
    raw.parse().map_err(|e| format!("invalid argument {raw:?} for {flag}: {e}"))
}

fn duration(parser: &mut lexopt::Parser, flag: &str) -> Result<Duration, String> {
    let raw = text(parser, flag)?;
    parse_go_duration(&raw).map_err(|e| format!("invalid argument {raw:?} for {flag}: {e}"))
}

fn parse_fail_next(raw: &str) -> Result<(usize, u16, Option<u64>), String> {
    let bad = || format!("invalid argument {raw:?} for --fail-next: want COUNT:CODE or COUNT:CODE:RETRY_AFTER_SECONDS");
    let parts: Vec<&str> = raw.split(':').collect();
    let (count, code, retry) = match parts.as_slice() {
        [count, code] => (count, code, None),
        [count, code, retry] => (count, code, Some(retry.parse::<u64>().map_err(|_| bad())?)),
        _ => return Err(bad()),
    };
    Ok((count.parse().map_err(|_| bad())?, code.parse().map_err(|_| bad())?, retry))
}

/// Starts the sandbox with its nodes, writes the kubeconfigs and serves until a signal.
pub fn start(options: &ServeOptions) -> Result<(Arc<Sandbox>, Option<super::nodes::SimulatedNodes>), String> {
    let sandbox = Arc::new(Sandbox::start(options.sandbox.clone())?);
    if let Some(every) = options.close_watches_every {
        repeat(&sandbox, every, Sandbox::close_watches);
    }
    if let Some(every) = options.compact_every {
        repeat(&sandbox, every, Sandbox::compact);
    }
    if let Some((count, code, retry)) = options.fail_next {
        sandbox.faults().fail_next(count, code, retry)?;
    }
    sandbox.faults().set_latency(options.latency);
    sandbox.write_kubeconfigs(&options.kubeconfig_out)?;
    let nodes = (options.nodes > 0).then(|| {
        let names = (1..=options.nodes).map(|i| format!("node-{i}")).collect();
        super::nodes::SimulatedNodes::start(sandbox.admin_config(), names, super::nodes::NodeOptions::default())
    });
    Ok((sandbox, nodes.transpose()?))
}

/// Runs a fault every `period` for as long as the sandbox lives.
fn repeat(sandbox: &Arc<Sandbox>, period: Duration, fault: fn(&Sandbox)) {
    let weak = Arc::downgrade(sandbox);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(period);
            match weak.upgrade() {
                Some(sandbox) => fault(&sandbox),
                None => return,
            }
        }
    });
}

fn serve(options: ServeOptions) -> Result<ExitCode, String> {
    let signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let (sandbox, nodes) = match start(&options) {
        Ok(started) => started,
        Err(e) => {
            eprintln!("kcm-sandbox: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!(
        "kcm-sandbox: serving {} with {} simulated node(s); admin kubeconfig {} (controller-manager.conf and sa.key beside it)",
        sandbox.url(),
        options.nodes,
        options.kubeconfig_out.display()
    );
    let mut signals = signals;
    if let Some(signal) = signals.forever().next() {
        log::info!("received signal {signal}; shutting down");
    }
    if let Some(nodes) = nodes {
        nodes.stop();
    }
    sandbox.stop();
    Ok(ExitCode::SUCCESS)
}
