//! `kcm-sandbox`: an in-memory Kubernetes API server with simulated nodes, for trying the
//! controller manager on a machine with no cluster and for our integration tests.

pub mod http;
pub mod resources;
pub mod store;
