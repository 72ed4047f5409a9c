//! The HPA controller's errors. None reaches the queue (every HPA is looked at again after a
//! sync period, failed or not); their texts are the Events', the conditions' and the logs', as
//! upstream's `err.Error()` reads: the metrics clients', the replica calculator's, and each
//! layer's context before the error it wraps (Go's `fmt.Errorf("…: %w")`), kept as a source.

use crate::apimachinery::errors::BoxError;
use crate::client;

/// Why a reconciliation, or a step of it, failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server (or an aggregated metrics API) failed: Go's `err.Error()`.
    #[error("{}", super::go_error(.0))]
    Api(#[from] client::Error),
    /// A selector or group version did not parse.
    #[error("{0}")]
    Parse(#[source] BoxError),
    /// Go's `fmt.Errorf("<context>: %w", err)`: what was being done, and why it failed.
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: Box<Error>,
    },
    /// An object's metric could not be read (upstream's `%s/%w` joins the object and the error
    /// without a separator of its own).
    #[error("unable to get metric {metric}: {kind} on {namespace} {name}/{source}")]
    ObjectMetric {
        /// The metric.
        metric: String,
        /// The object's kind.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        source: Box<Error>,
    },
    /// The target's scale has no selector.
    #[error("selector is required")]
    SelectorRequired,
    /// The target's scale selector does not parse.
    #[error("couldn't convert selector into a corresponding internal selector object: {0}")]
    InvalidSelector(#[source] BoxError),
    /// The pods the selector selects are also another HPA's.
    #[error("pods by selector {selector} are controlled by multiple HPAs: [{hpas}]")]
    AmbiguousSelector {
        /// The selector, as the scale gives it.
        selector: String,
        /// The HPAs, space-separated.
        hpas: String,
    },
    /// A metric of an unknown type.
    #[error("unknown metric source type {0:?}")]
    UnknownMetricSourceType(String),
    /// A resource metric without a target.
    #[error(
        "invalid resource metric source: neither an average utilization target nor an average value (usage) target \
         was set"
    )]
    NoResourceTarget,
    /// An object metric without a target.
    #[error("invalid object metric source: neither a value target nor an average value target was set")]
    NoObjectTarget,
    /// An external metric without a target.
    #[error("invalid external metric source: neither a value target nor an average value target was set")]
    NoExternalTarget,
    /// The target's kind maps to no resource.
    #[error("unrecognized resource")]
    UnrecognizedResource,
    /// Some metrics failed: how many, and the first one's error.
    #[error("invalid metrics ({invalid} invalid out of {total}), first error is: {first}")]
    InvalidMetrics {
        /// The failed metrics.
        invalid: usize,
        /// All metrics.
        total: usize,
        /// The first failure.
        #[source]
        first: Box<Error>,
    },
    /// Discovery lists no custom metrics API.
    #[error("no custom metrics API (custom.metrics.k8s.io) registered")]
    NoCustomMetricsApi,
    /// The custom metrics API serves no version this client reads.
    #[error("no known available metric versions found")]
    NoKnownMetricVersions,
    /// A metrics API answered with no sample (`resource`, `custom` or `external`).
    #[error("no metrics returned from {0} metrics API")]
    NoMetricsReturned(&'static str),
    /// The custom metrics API answered an object metric with other than one value.
    #[error("the custom metrics API server returned {0} results when we asked for exactly one")]
    NotExactlyOneResult(usize),
    /// The selector selects no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// No ready pod has a sample.
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoPodMetrics,
    /// No pod to count the ready ones of.
    #[error("unable to calculate ready pods: no pods returned by selector while calculating replica count")]
    NoReadyPods,
    /// A pod with pod-level resources lacks a request of the resource.
    #[error("missing pod-level request for {resource} in Pod {pod}")]
    MissingPodLevelRequest {
        /// The resource.
        resource: String,
        /// The pod.
        pod: String,
    },
    /// The metric's container is not in a pod.
    #[error("container {container} not found in Pod {pod}")]
    ContainerNotFound {
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// A container lacks a request of the resource.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource.
        resource: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// No sample is of a pod with a request.
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
}

impl Error {
    /// Go's `fmt.Errorf("<context>: %w", self)`.
    pub(super) fn context(self, context: impl Into<String>) -> Error {
        Error::Context { context: context.into(), source: Box::new(self) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_errors_read_as_upstreams() {
        let fetch = Error::NotExactlyOneResult(2).context("unable to fetch metrics from custom metrics API");
        let error = Error::ObjectMetric {
            metric: "requests".into(),
            kind: "Service".into(),
            namespace: "ns".into(),
            name: "web".into(),
            source: Box::new(fetch),
        };
        let outer = error.context("failed to get object metric value");
        assert_eq!(
            outer.to_string(),
            "failed to get object metric value: unable to get metric requests: Service on ns web/unable to fetch \
             metrics from custom metrics API: the custom metrics API server returned 2 results when we asked for \
             exactly one"
        );
        let first = Box::new(Error::NoPods.context("failed to get cpu utilization"));
        let invalid = Error::InvalidMetrics { invalid: 1, total: 2, first };
        assert_eq!(
            invalid.to_string(),
            "invalid metrics (1 invalid out of 2), first error is: failed to get cpu utilization: no pods returned by \
             selector while calculating replica count"
        );
    }
}
