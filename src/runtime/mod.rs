//! The machinery every controller runs on. It grows with the controllers; today it starts the
//! enabled ones (none is implemented yet) and runs until SIGINT or SIGTERM.

use crate::client::Client;
use crate::controllers::{KNOWN_CONTROLLERS, is_implemented};
use crate::flags::Options;

/// Runs the controller manager until a termination signal arrives.
pub fn run(options: &Options, _client: &Client) -> Result<(), String> {
    let signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
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
    let mut signals = signals;
    if let Some(signal) = signals.forever().next() {
        log::info!("received signal {signal}; shutting down");
    }
    Ok(())
}
