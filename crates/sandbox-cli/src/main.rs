//! `kcm-sandbox`: the development API server (see `kcm_sandbox::sandbox`), the narrated demo
//! and the runners of the test bed (`kcm_envtest::envtest`).
//!
//! ```text
//! kcm-sandbox serve [--listen 127.0.0.1:6443] [--nodes N] [--kubeconfig-out PATH] [--plain-http] …
//! kcm-sandbox demo  [--controller-manager PATH] [--nodes N]
//! ```

mod cli;

use std::process::ExitCode;

use kcm_app::app;
use kcm_base::{apimachinery, logging, x509};
use kcm_client::client;
use kcm_envtest::envtest;
use kcm_sandbox::sandbox;

fn main() -> ExitCode {
    let _ = logging::init(0);
    match cli::run(std::env::args_os().skip(1)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("kcm-sandbox: {message}");
            ExitCode::from(2)
        }
    }
}
