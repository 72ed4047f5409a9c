//! `kcm-sandbox`: an in-memory Kubernetes API server with simulated nodes, for trying the
//! controller manager on a machine with no cluster and for our integration tests.

pub mod admission;
pub mod api;
pub mod audit;
pub mod auth;
pub mod bootstrap_policy;
pub mod cli;
pub mod convert;
pub mod defaults;
pub mod demo;
pub mod discovery;
pub mod faults;
pub mod metadata;
pub mod nodes;
pub mod objects;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod selectors;
pub mod server;
pub mod services;
pub mod status;
pub mod store;
pub mod subresources;
pub mod table;
pub mod typed;
pub mod watch;
