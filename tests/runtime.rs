//! The controller runtime and the process around the controllers, one module per topic in
//! `tests/runtime/`: informers, the controller harness, events, the metadata client, leader
//! election, and the real binary (its flags and kubeconfig, secure serving, systemd notification, a
//! standby, high availability, the chaos suite).
//!
//! `informers::shutdown_stops_the_threads_promptly` counts this process's `informer-priori…`
//! threads: no other test here starts a PriorityClass informer (the garbage collector's
//! metadata informers would, which is one reason the controllers are another binary).

// The runtime's tests run on the harness's backends but start no `Cluster` of controllers.
#[macro_use]
#[allow(dead_code)]
mod harness;
// `binary` and `secure_serving` need the PKI and a scripted server that answers in one piece.
#[allow(dead_code)]
mod support;

#[path = "runtime/binary.rs"]
mod binary;
#[path = "runtime/chaos.rs"]
mod chaos;
#[path = "runtime/cli_flags.rs"]
mod cli_flags;
#[path = "runtime/client_metadata.rs"]
mod client_metadata;
#[path = "runtime/controller.rs"]
mod controller;
#[path = "runtime/debug_endpoints.rs"]
mod debug_endpoints;
#[path = "runtime/events.rs"]
mod events;
#[path = "runtime/faults.rs"]
mod faults;
#[path = "runtime/ha.rs"]
mod ha;
#[path = "runtime/informers.rs"]
mod informers;
#[path = "runtime/leader_election.rs"]
mod leader_election;
#[path = "runtime/limits.rs"]
mod limits;
#[path = "runtime/metrics_parity.rs"]
mod metrics_parity;
#[path = "runtime/mixed_ha.rs"]
mod mixed_ha;
#[path = "runtime/scale.rs"]
mod scale;
#[path = "runtime/secure_port_access.rs"]
mod secure_port_access;
#[path = "runtime/secure_serving.rs"]
mod secure_serving;
#[path = "runtime/standby.rs"]
mod standby;
#[path = "runtime/systemd_notify.rs"]
mod systemd_notify;
