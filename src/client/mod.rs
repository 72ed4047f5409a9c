//! A blocking Kubernetes API client over ureq + rustls.

pub mod config;
