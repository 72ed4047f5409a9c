//! kcm-sandbox: its API against kube-apiserver's semantics (and against a real kube-apiserver,
//! `conformance`), its simulated nodes, RBAC, validation, protobuf and tables, `kubectl` against
//! it, and `kcm-sandbox` as a process. One module per topic in `tests/sandbox/`.

// Only `rbac` (simulated nodes) and `table` (a cluster of controllers) use the harness.
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
