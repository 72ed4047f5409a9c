//! `kcm-sandbox`: the development API server (see `kcm::sandbox`).
//!
//! ```text
//! kcm-sandbox serve [--listen 127.0.0.1:6443] [--nodes N] [--kubeconfig-out PATH] [--plain-http] …
//! kcm-sandbox demo  [--controller-manager PATH] [--nodes N]
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let _ = kcm::logging::init(0);
    match kcm::sandbox::cli::run(std::env::args_os().skip(1)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("kcm-sandbox: {message}");
            ExitCode::from(2)
        }
    }
}
