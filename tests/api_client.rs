//! The API client (`kcm::client`) against HTTPS servers scripted by the test, and kubeconfig
//! loading; one module each in `tests/api_client/`.
//!
//! A binary of its own: `https::requests_are_counted_in_the_client_metrics` expects exactly one
//! request in the process-wide client metrics for its server's `host:port`. Its server's port
//! is a fresh one, but a port an earlier test's API server released may be handed out again;
//! the tests here talk only to servers that never release their ports.

mod support;

#[path = "api_client/https.rs"]
mod https;
#[path = "api_client/kubeconfig.rs"]
mod kubeconfig;
