//! The machinery every controller runs on: shared informers (`informer`), client-go
//! workqueues (`workqueue`, `clock`), the Event recorder (`events`) and the controller
//! abstraction with its worker pools (`controller`). A controller file holds only its own
//! reconcile logic.

pub mod clock;
pub mod controller;
pub mod events;
pub mod informer;
pub mod workqueue;

use std::time::Duration;

use crate::client::Client;
use crate::controllers::{DESCRIPTORS, KNOWN_CONTROLLERS, is_implemented};
use crate::flags::Options;
use controller::ControllerSet;

/// How long running syncs may take to finish after SIGTERM.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the controller manager until SIGINT or SIGTERM, then shuts down cleanly.
pub fn run(options: &Options, client: &Client) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    report_selection(options);
    let mut controllers = ControllerSet::start(client, options, DESCRIPTORS)?;
    let mut signalled = None;
    while signalled.is_none() && !controllers.wait_for_sync(Duration::from_millis(200)) {
        signalled = signals.pending().next();
    }
    if signalled.is_none() {
        controllers.run_workers();
        log::info!("caches synced; workers of {} controllers running", controllers.names().len());
        signalled = signals.forever().next();
    }
    if let Some(signal) = signalled {
        log::info!("received signal {signal}; shutting down");
    }
    controllers.stop(DRAIN_TIMEOUT);
    log::info!("stopped");
    Ok(())
}

/// Logs which selected controllers run and which are not built yet.
fn report_selection(options: &Options) {
    let selected: Vec<&str> =
        KNOWN_CONTROLLERS.iter().map(|c| c.name).filter(|name| options.starts_controller(name)).collect();
    log::info!("{} controllers selected by --controllers: {}", selected.len(), selected.join(", "));
    let (built, not_built): (Vec<&str>, Vec<&str>) = selected.iter().partition(|name| is_implemented(name));
    if !not_built.is_empty() {
        log::warn!("selected but not built yet: {}", not_built.join(", "));
    }
    if built.is_empty() {
        log::warn!("no controllers are implemented yet; the controller manager idles until it is stopped");
    }
}
