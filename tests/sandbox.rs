//! kcm-sandbox: its API against kube-apiserver's semantics (and against a real kube-apiserver,
//! `conformance`), its simulated nodes, RBAC, validation, protobuf and tables, `kubectl` against
//! it, and `kcm-sandbox` as a process. One module per topic in `tests/sandbox/`.

// Clusters (`rbac`, `nodes`, `table`) and the polling helpers; the rest goes unused here.
#[macro_use]
#[allow(dead_code)]
mod harness;
mod kubectl;
// The PKI and raw HTTP; the scripted server is the client's.
#[allow(dead_code)]
mod support;

#[path = "sandbox/api.rs"]
mod api;
#[path = "sandbox/cli.rs"]
mod cli;
#[path = "sandbox/conformance.rs"]
mod conformance;
#[path = "sandbox/demo.rs"]
mod demo;
#[path = "sandbox/kubectl_commands.rs"]
mod kubectl_commands;
#[path = "sandbox/metrics.rs"]
mod metrics;
#[path = "sandbox/nodes.rs"]
mod nodes;
#[path = "sandbox/protobuf.rs"]
mod protobuf;
#[path = "sandbox/rbac.rs"]
mod rbac;
#[path = "sandbox/table.rs"]
mod table;
#[path = "sandbox/validation.rs"]
mod validation;

use kcm_envtest::envtest::{Backend, TestServer};
use kcm_sandbox::sandbox::server::{AuthorizationMode, Sandbox, SandboxOptions};

/// The server as kubeadm's kube-apiserver: the sandbox with RBAC on, or a real control plane.
fn rbac_server(backend: Backend) -> TestServer {
    match backend {
        Backend::Sandbox => TestServer::Sandbox(
            Sandbox::start(SandboxOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                authorization_mode: AuthorizationMode::Rbac,
                ..SandboxOptions::default()
            })
            .expect("the sandbox starts"),
        ),
        Backend::Real => TestServer::start(Backend::Real).expect("the control plane starts"),
    }
}
