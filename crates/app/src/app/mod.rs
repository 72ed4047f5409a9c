//! The composition root, as upstream's `cmd/kube-controller-manager/app`: the command line
//! (`flags`), the one table of controllers (`controllers`), and the process's life (`run`:
//! clients, the secure port, leader election, signals, systemd notification). Everything below
//! (`runtime`, `client`, `server`, `leader`, the controllers) is handed plain values from here
//! and imports nothing from it.

pub mod controllers;
mod debug_pages;
pub mod flags;
pub mod limits;
mod malloc;
mod metrics;
mod run;
pub mod sd_notify;

use std::process::ExitCode;

use crate::client::{Client, ClientOptions, config};
use crate::runtime::controller::{ControllerContext, ControllerSet, ControllerSpec, StartError};
use crate::runtime::informer::InformerOptions;
use crate::server::{HealthChecks, SecureServer, ServeError};
use controllers::{ControllerDescriptor, in_start_order};
use flags::{Command, Options};
use std::sync::Arc;

pub use run::{Exit, RunError, run};

/// The `kube-controller-manager` binary: parses `args` (without the program name), then runs
/// until a signal or the loss of the Lease.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    malloc::configure();
    let options = match flags::parse(args) {
        Ok(Command::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version(text)) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(options)) => options,
        // Exit 1, as upstream's `cli.Run` does for any refused command line.
        Err(e) => {
            match flags::refusal(&e) {
                flags::Refusal::Printed(text) => eprint!("{text}"),
                flags::Refusal::Logged(message) => match crate::logging::init(0) {
                    Ok(()) => log::error!("{message}"),
                    Err(_) => eprintln!("{message}"),
                },
            }
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = crate::logging::init(options.logs.verbosity) {
        eprintln!("Error: cannot start logging: {e}");
        return ExitCode::FAILURE;
    }
    match connect_and_run(&options) {
        Ok(Exit::Signalled) => ExitCode::SUCCESS,
        Ok(Exit::LeaderElectionLost | Exit::OutOfFileDescriptors) => ExitCode::FAILURE,
        // The CLI's final message: the error's own line, its sources included in it.
        Err(error) => {
            log::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn connect_and_run(options: &Options) -> Result<Exit, RunError> {
    // Upstream's first line, then which build of this implementation it is.
    log::info!("\"Starting\" version=\"{}\"", flags::KUBERNETES_RELEASE.git_version());
    log::info!("kube-controller-manager v{} (Rust)", env!("CARGO_PKG_VERSION"));
    for warning in options.warnings() {
        log::warn!("{warning}");
    }
    let connection = &options.generic.client_connection;
    let kubeconfig = Some(connection.kubeconfig.as_str()).filter(|k| !k.is_empty()).map(std::path::Path::new);
    let master = Some(connection.master.as_str()).filter(|m| !m.is_empty());
    let rest = config::load(kubeconfig, master).map_err(RunError::Config)?;
    log::info!("using {}", rest.source);
    let client_options = ClientOptions {
        qps: connection.qps,
        burst: u32::try_from(connection.burst).unwrap_or(0),
        ..ClientOptions::default()
    };
    let client = Client::new(rest, client_options).map_err(RunError::Client)?;
    let version = wait_for_api_server(&client)?;
    log::info!("connected to {} (Kubernetes {})", client.server(), version["gitVersion"].as_str().unwrap_or("unknown"));
    run(options, &client)
}

/// How long start-up waits for the API server (it may be starting alongside us, as static Pods do).
const API_SERVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Asks the server for its version until it answers or [`API_SERVER_WAIT`] has passed.
fn wait_for_api_server(client: &Client) -> Result<serde_json::Value, RunError> {
    let deadline = std::time::Instant::now() + API_SERVER_WAIT;
    let probe = client.with_request_timeout(std::time::Duration::from_secs(5));
    loop {
        match probe.get_json::<serde_json::Value>("/version") {
            Ok(version) => return Ok(version),
            Err(e)
                if (e.is_transport() || e.code().is_some_and(|c| c >= 500)) && std::time::Instant::now() < deadline =>
            {
                log::info!("waiting for the API server at {}: {e}", client.server());
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(source) => return Err(RunError::ApiServer { server: client.server().to_string(), source }),
        }
    }
}

/// Starts the secure port (`/healthz`, `/metrics`, …) from the flags; `None` when
/// `--secure-port` is 0.
pub fn serve_securely(options: &Options, checks: Arc<HealthChecks>) -> Result<Option<SecureServer>, ServeError> {
    let pages = debug_pages::debug_pages(options);
    SecureServer::start_with_pages(
        &options.secure_serving,
        &options.authentication,
        &options.authorization,
        checks,
        pages,
    )
}

/// Builds the controllers of `descriptors` that `options` starts (in upstream's start order),
/// each with its own client and Event recorder, and starts the informers they asked for.
/// Workers do not run yet: see [`ControllerSet::run_workers`].
pub fn start_controllers(
    client: &Client,
    options: &Options,
    descriptors: &[ControllerDescriptor],
) -> Result<ControllerSet, StartError> {
    let use_accounts = options.generic.use_service_account_credentials;
    if use_accounts && options.service_account.private_key_file.is_empty() {
        // Another controller manager may be minting the tokens; if none is, TokenRequest still works.
        log::info!(
            "Warning: --use-service-account-credentials was specified without providing a --service-account-private-key-file"
        );
    }
    let specs = in_start_order(descriptors)
        .filter(|d| options.starts_controller(d.name))
        .filter_map(|d| {
            let start = d.start?;
            let build = Box::new(move |context: &ControllerContext<'_>| start(context, options));
            Some(ControllerSpec { identity: d.identity(use_accounts), build })
        })
        .collect();
    // client-go's gates, which kcm's `--feature-gates` also sets: the informers' watch-list and
    // the store's resourceVersion tracking; and the informers' name in their metrics.
    let informers = InformerOptions {
        resync: options.generic.min_resync_period,
        watch_list: options.generic.feature_gates.is_enabled("WatchListClient"),
        atomic_fifo: options.generic.feature_gates.is_enabled("AtomicFIFO"),
        // `CreateControllerContext`'s `cache.NewInformerName("kube-controller-manager")`.
        name: Some("kube-controller-manager"),
    };
    ControllerSet::start_with(client, informers, specs)
}
