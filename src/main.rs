//! `kube-controller-manager`: parses upstream's flags, connects to the API server and runs the
//! enabled controllers. Everything but process wiring lives in the `kcm` library.

use std::process::ExitCode;

use kcm::client::{Client, ClientOptions, config};
use kcm::flags::{Command, Options};

fn main() -> ExitCode {
    let options = match kcm::flags::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version(text)) => {
            println!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(options)) => options,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = kcm::logging::init(options.logs.verbosity) {
        eprintln!("Error: cannot start logging: {e}");
        return ExitCode::FAILURE;
    }
    match run(&options) {
        Ok(kcm::runtime::Exit::Signalled) => ExitCode::SUCCESS,
        Ok(kcm::runtime::Exit::LeaderElectionLost) => ExitCode::FAILURE,
        Err(message) => {
            log::error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<kcm::runtime::Exit, String> {
    log::info!("{}", kcm::flags::version_string());
    for warning in options.warnings() {
        log::warn!("{warning}");
    }
    let connection = &options.generic.client_connection;
    let kubeconfig = Some(connection.kubeconfig.as_str()).filter(|k| !k.is_empty()).map(std::path::Path::new);
    let master = Some(connection.master.as_str()).filter(|m| !m.is_empty());
    let rest = config::load(kubeconfig, master).map_err(|e| format!("invalid API server configuration: {e}"))?;
    log::info!("using {}", rest.source);
    let client_options = ClientOptions {
        qps: connection.qps,
        burst: u32::try_from(connection.burst).unwrap_or(0),
        ..ClientOptions::default()
    };
    let client = Client::new(rest, client_options).map_err(|e| format!("cannot set up the API client: {e}"))?;
    let version = wait_for_api_server(&client)?;
    log::info!("connected to {} (Kubernetes {})", client.server(), version["gitVersion"].as_str().unwrap_or("unknown"));
    kcm::runtime::run(options, &client)
}

/// How long start-up waits for the API server (it may be starting alongside us, as static Pods do).
const API_SERVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Asks the server for its version until it answers or [`API_SERVER_WAIT`] has passed.
fn wait_for_api_server(client: &Client) -> Result<serde_json::Value, String> {
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
            Err(e) => return Err(format!("cannot reach the API server at {}: {e}", client.server())),
        }
    }
}
