//! `namespace-controller`, after upstream v1.33's `pkg/controller/namespace/namespace_controller.go`
//! and `startNamespaceController` (`cmd/kube-controller-manager/app/core.go`).
//!
//! Namespaces being deleted are queued (5 s after each event, so that every API server sees the
//! deletion before content is purged) and handed to the [`deletion::Deleter`]. When content
//! remains, the namespace is looked at again after half the estimate plus one second; on errors,
//! with the controller's own backoff (5 ms doubling up to a minute). Every
//! `--namespace-sync-period` all namespaces being deleted are queued again.

pub mod conditions;
pub mod deletion;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

use crate::apimachinery::clock::RealClock;
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::{BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, WorkQueue};

use deletion::{Deleter, Outcome};

pub use deletion::Error;

/// `namespaceDeletionGracePeriod`: lets HA API servers' lifecycle admission see the deletion
/// and last-minute creations land before the namespace is purged.
pub const DELETION_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// `startNamespaceController` raises the controller's QPS ×20 and burst ×100: it is chatty
/// (discovery, then many deletes).
const QPS_FACTOR: f32 = 20.0;
const BURST_FACTOR: u32 = 100;
/// The controller's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-namespace-syncs`.
    pub workers: usize,
    /// `--namespace-sync-period`: how often every namespace is looked at again.
    pub resync_period: Duration,
    /// The OrderedNamespaceDeletion gate: pods go first.
    pub ordered_deletion: bool,
}

/// `NewNamespaceController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let client = context.client.with_rate_limit_factors(QPS_FACTOR, BURST_FACTOR);
    let queue = WorkQueue::with_parts("namespace", Box::new(rate_limiter()), Arc::new(RealClock));
    let namespaces = context.informers.informer::<Namespace>();
    let on_event = queue.clone();
    namespaces.add_handler(move |event: &Event<Namespace>| match event {
        Event::Added(ns) | Event::Updated { new: ns, .. } => enqueue_namespace(&on_event, ns),
        Event::Deleted { .. } => {}
    });
    let deleter = Deleter::new(context.name, client, config.ordered_deletion);
    let name = context.name;
    let controller =
        Arc::new(NamespaceController { name, deleter, queue: queue.clone(), namespaces: namespaces.clone() });
    let (worker, starter, resync) = (controller.clone(), controller, queue.clone());
    Controller::new()
        .with_queue(&queue, config.workers, move |name: &String| worker.sync(name).map_err(SyncError::of))
        .on_start(move || {
            // The deleter's discovery, which upstream's constructor reads, once this process leads.
            starter.deleter.init_op_cache();
            Ok(())
        })
        // The handler's resync (`AddEventHandlerWithResyncPeriod(…, --namespace-sync-period)`):
        // each cached namespace goes through `enqueue_namespace` again.
        .resync_every("resync", config.resync_period, move || {
            namespaces.store().list().iter().for_each(|ns| enqueue_namespace(&resync, ns));
        })
}

/// `nsControllerRateLimiter`: retries at least every minute, and overall at 10 qps (burst 100).
fn rate_limiter() -> MaxOfRateLimiter<String> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(60))),
        Box::new(BucketRateLimiter::new(10.0, 100, Arc::new(RealClock))),
    ])
}

/// `enqueueNamespace`: only namespaces being deleted, after the grace period.
fn enqueue_namespace(queue: &WorkQueue<String>, namespace: &Namespace) {
    if namespace.metadata.deletion_timestamp.is_none() {
        return;
    }
    queue.add_after(namespace.metadata.name.clone().unwrap_or_default(), DELETION_GRACE_PERIOD);
}

/// `NamespaceController`.
struct NamespaceController {
    name: &'static str,
    deleter: Deleter,
    queue: WorkQueue<String>,
    namespaces: Arc<Informer<Namespace>>,
}

impl NamespaceController {
    /// `syncNamespaceFromKey` and the worker's handling of `ResourcesRemainingError`.
    fn sync(&self, key: &str) -> Result<(), Error> {
        if self.namespaces.store().get_by_name("", key).is_none() {
            log::info!("{}: namespace has been deleted: {key}", self.name);
            return Ok(());
        }
        match self.deleter.delete(key)? {
            Outcome::Done => Ok(()),
            Outcome::ResourcesRemaining(estimate) => {
                let wait = requeue_delay(estimate);
                log::debug!("{}: content remaining in namespace {key}, waiting {wait:?}", self.name);
                self.queue.add_after(key.to_string(), wait);
                // Upstream keeps the key's failure count here; returning Ok resets it (the
                // runtime forgets the key), which only shortens a later error backoff.
                Ok(())
            }
        }
    }
}

/// The worker waits half the estimate plus a second before looking again.
fn requeue_delay(estimate_seconds: i64) -> Duration {
    Duration::from_secs(u64::try_from(estimate_seconds / 2 + 1).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    #[test]
    fn a_conflict_reaches_the_queue_as_a_conflict() {
        let server = crate::controllers::podutil::testing::ErrorServer::conflict();
        let deleter = Deleter::new("namespace-controller", server.client.clone(), true);
        let error = deleter.delete("team").expect_err("the server refuses");
        assert_eq!(SyncError::of(error), SyncError::Conflict("the test server answers 409 Conflict".into()));
    }

    #[test]
    fn requeue_waits_half_the_estimate_plus_one_second() {
        assert_eq!(requeue_delay(30), Duration::from_secs(16));
        assert_eq!(requeue_delay(15), Duration::from_secs(8));
        assert_eq!(requeue_delay(0), Duration::from_secs(1));
    }

    #[test]
    fn only_namespaces_being_deleted_are_queued() {
        let clock = Arc::new(FakeClock::new());
        let queue = WorkQueue::with_parts("", Box::new(rate_limiter()), clock.clone());
        let mut namespace = Namespace {
            metadata: ObjectMeta { name: Some("team".into()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        enqueue_namespace(&queue, &namespace);
        namespace.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        enqueue_namespace(&queue, &namespace);
        assert_eq!(queue.len(), 0, "the grace period delays it");
        clock.advance(DELETION_GRACE_PERIOD);
        assert_eq!(queue.get_timeout(Duration::from_secs(30)), Ok(Some("team".to_string())));
        assert_eq!(queue.len(), 0, "a namespace not being deleted was never queued");
        queue.shut_down();
    }
}
