//! Ports of the Kubernetes helper packages that several layers need: name and label rules,
//! field errors, aggregated errors, Go quoting, JSON and durations, label selectors, CIDRs, clocks, token buckets and pod
//! helpers.
//!
//! Each file follows one upstream package, with its semantics and its wording, so that the
//! controllers, the client, the runtime and the sandbox agree with each other and with
//! Kubernetes. Nothing here imports another module of this crate but `apimachinery` itself: it
//! sits below everything else.

pub mod clock;
pub mod cron;
pub mod duration;
pub mod errors;
pub mod field;
pub mod flowcontrol;
pub mod gojson;
pub mod intstr;
pub mod json;
pub mod labels;
pub mod net;
pub mod nodeaffinity;
pub mod pod;
pub mod resourceversion;
pub mod schema;
pub mod strconv;
pub mod validation;
pub mod version;
