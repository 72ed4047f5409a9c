//! `kcm-sandbox`: an in-memory Kubernetes API server with simulated nodes, for trying the
//! controller manager on a machine with no cluster and for our integration tests.
//!
//! - [`server`] — the sandbox as one running thing ([`server::Sandbox`]): store, PKI, API
//!   server, HTTP(S) listener, start-up objects, and the handles tests use (faults, restarts).
//! - [`apiserver`] — what kube-apiserver does with a request: authentication and authorization
//!   hooks, discovery, routing to the verb handlers (`apiserver/handlers/`: get, list, create,
//!   update, patch, delete, watch) and subresources, defaulting, validation, conversion,
//!   protobuf, patches, server-side tables, audit and fault injection.
//! - [`storage`] — the store (objects, revisions, history), the served kinds, object metadata
//!   rules, the Service IP and port allocators.
//! - [`admission`] — the admission plugins kube-apiserver enables by default.
//! - [`auth`] — PKI, tokens and kubeconfigs; RBAC with upstream's bootstrap policy.
//! - [`nodes`] — simulated kubelets and a scheduler, clients of the server over HTTP like the
//!   real ones.
//!
//! Ports of Kubernetes helper packages the sandbox shares with the controllers (label
//! selectors, name rules, field errors, Go quoting) are in [`crate::apimachinery`].

pub mod admission;
pub mod apiserver;
pub mod auth;
pub mod metrics_api;
pub mod nodes;
pub mod server;
pub mod storage;
