//! Upstream's `SVMController` (`storageversionmigrator.go`): migrates the objects of a running
//! migration's resource once `status.resourceVersion` is recorded and the garbage collector's
//! monitor of the resource has synced past it. Each cached object not newer than that version
//! gets an apply patch of only its `apiVersion`, `kind`, `uid` and `resourceVersion` (so that an
//! object deleted, recreated or updated meanwhile answers with a conflict, which needs no
//! migration); the server rewrites it in the storage version. Then `Succeeded`.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;
use serde_json::json;

use super::Error;
use super::{MIGRATION_SUCCEEDED, Migrations, discover, gvr_string, is_terminal, resource_for, within_discovery_grace};
use crate::apimachinery::clock::RealClock;
use crate::apimachinery::resourceversion::compare_resource_version;
use crate::client::discovery::ApiResource;
use crate::client::metadata::{MetadataApi, PartialObjectMetadata};
use crate::client::{self, Client, Patch, PostParams};
use crate::runtime::controller::{SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, ResourceInformer, SharedInformerFactory};
use crate::runtime::workqueue::{MaxOfRateLimiter, RateLimiter, WorkQueue, default_controller_rate_limiter};

/// `migrationSuccessStatusReason`.
pub const MIGRATION_SUCCESS_REASON: &str = "StorageVersionMigrationSucceeded";
/// How long a sync waits for the monitor to sync (the `monCtx` timeout of `sync`).
pub const MONITOR_SYNC_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the monitor is looked at while waiting for it.
const MONITOR_POLL: Duration = Duration::from_millis(100);

/// Enqueues a migration by name on Add and Update.
pub fn watch(informer: &Informer<StorageVersionMigration>, queue: &WorkQueue<String>) {
    let queue = queue.clone();
    informer.add_handler(move |event: &Event<StorageVersionMigration>| match event {
        Event::Added(svm) | Event::Updated { new: svm, .. } => {
            queue.add(svm.metadata.name.clone().unwrap_or_default());
        }
        Event::Deleted { .. } => {}
    });
}

/// Upstream's `SVMController`.
pub struct Migrator {
    migrations: Migrations,
    /// Discovery and the patches (upstream's dynamic client, on the fast config).
    client: Client,
    informers: SharedInformerFactory,
    /// The queue's own limiter, asked for the delay of a `Retry-After` answer as upstream's
    /// `max(suggestedDelay, rateLimiter.When(key))`.
    rate_limiter: SharedLimiter,
    field_manager: &'static str,
}

impl Migrator {
    /// `NewSVMController`; patches go through `client` with `field_manager`. Its queue is
    /// [`Migrator::queue`].
    pub fn new(
        migrations: Migrations,
        client: Client,
        informers: SharedInformerFactory,
        field_manager: &'static str,
    ) -> Self {
        let rate_limiter = SharedLimiter(Arc::new(default_controller_rate_limiter(Arc::new(RealClock))));
        Migrator { migrations, client, informers, rate_limiter, field_manager }
    }

    /// The migrator's queue, named `name`, on the limiter it also asks for delays.
    pub fn queue(&self, name: &str) -> WorkQueue<String> {
        WorkQueue::with_parts(name, Box::new(self.rate_limiter.clone()), Arc::new(RealClock))
    }

    /// `processNext`: a `Retry-After` answer waits the longer of the server's delay and the
    /// key's backoff; anything else is retried with the queue's rate limit.
    pub fn process_next(&self, name: &str) -> SyncResult {
        let key = name.to_string();
        let Err(e) = self.sync(name) else {
            return Ok(());
        };
        log::debug!("\"Error syncing SVM resource, retrying\" svm=\"{name}\" err=\"{e}\"");
        match e {
            Error::Api(error) if error.retry_after().is_some() => {
                let suggested = error.retry_after().unwrap_or_default();
                let delay = suggested.max(self.rate_limiter.when(&key));
                Err(SyncError::RetryAfter { delay, message: error.to_string() })
            }
            // Upstream's `AddRateLimited`, whatever the error's kind.
            other => Err(SyncError::failed(other.to_string())),
        }
    }

    /// `sync`.
    fn sync(&self, name: &str) -> Result<(), Error> {
        let started = Instant::now();
        let Some(svm) = self.migrations.get(name) else {
            return Ok(());
        };
        if is_terminal(&svm) {
            log::debug!("\"Migration has already succeeded or failed previously, skipping\" svm=\"{name}\"");
            return Ok(());
        }
        let list_rv = svm.status.as_ref().and_then(|s| s.resource_version.clone()).unwrap_or_default();
        if list_rv.is_empty() {
            log::debug!(
                "The latest resource version is empty. We will attempt to migrate once the resource version is available."
            );
            return Ok(());
        }
        let (group, resource) = super::group_resource(&svm);
        let discovered = discover(&self.client)?;
        let Some(gvr) = resource_for(&discovered, &group, &resource) else {
            log::debug!("\"resource does not exist in our rest mapper\" gvr=\"{group}/{resource}\"");
            if within_discovery_grace(&svm, Timestamp::now()) {
                // Upstream wraps a nil error here.
                return Err(Error::NotInRestMapperNil);
            }
            return Ok(self.fail(svm, "unable to obtain GVR from discovery".to_string())?);
        };
        let Some(monitor) = self.informers.started_for_resource(&gvr) else {
            return Err(Error::NoMonitor { gvr: gvr_string(&gvr) });
        };
        if !wait_for_sync(monitor.as_ref(), MONITOR_SYNC_TIMEOUT) {
            log::debug!("\"resource does not exist in GC\" gvr=\"{}\"", gvr_string(&gvr));
            if within_discovery_grace(&svm, Timestamp::now()) {
                return Err(Error::NotInGc);
            }
            return Ok(self.fail(svm, "resource does not exist in GC: %!w(<nil>)".to_string())?);
        }
        let gc_rv = monitor.last_sync_resource_version();
        match compare_resource_version(&gc_rv, &list_rv) {
            Err(e) => {
                let message = format!("error comparing resource versions between GC and SVM resource: {e}");
                return Ok(self.fail(svm, message)?);
            }
            Ok(Ordering::Less) => {
                return Err(Error::GcBehind { gc_rv, list_rv });
            }
            Ok(_) => {}
        }
        let mut svm = match self.run_migration(&gvr, &monitor.list_metadata(), svm, &list_rv)? {
            Outcome::Failed => return Ok(()),
            Outcome::Migrated(svm) => *svm,
        };
        super::set_status_conditions(&mut svm, MIGRATION_SUCCEEDED, MIGRATION_SUCCESS_REASON, "", Timestamp::now());
        self.migrations.update_status(&svm)?;
        log::debug!(
            "\"Finished syncing svm resource\" key=\"{name}\" gr=\"{resource}.{group}\" elapsed=\"{:?}\"",
            started.elapsed()
        );
        Ok(())
    }

    /// `runMigration`: patches every cached object not newer than `list_rv`. A conflict means
    /// the object needs no migration; a retriable error retries the whole migration; any other
    /// error fails it.
    fn run_migration(
        &self,
        gvr: &ApiResource,
        objects: &[Arc<PartialObjectMetadata>],
        svm: StorageVersionMigration,
        list_rv: &str,
    ) -> Result<Outcome, Error> {
        let gvr_name = gvr_string(gvr);
        for object in objects {
            let meta = &object.metadata;
            let (namespace, name) =
                (meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default());
            let object_rv = meta.resource_version.as_deref().unwrap_or_default();
            match compare_resource_version(object_rv, list_rv) {
                Err(e) => {
                    log::error!(
                        "\"Unable to compare the resource version of the resource\" namespace=\"{namespace}\" name=\"{name}\" gvr=\"{gvr_name}\" accessorRV=\"{object_rv}\" listResourceVersion=\"{list_rv}\" error=\"{e}\""
                    );
                    self.fail(svm, e.to_string())?;
                    return Ok(Outcome::Failed);
                }
                Ok(Ordering::Greater) => continue,
                Ok(_) => {}
            }
            let api = MetadataApi::new(&self.client, gvr, Some(namespace));
            let params = PostParams { field_manager: Some(self.field_manager.to_string()), ..PostParams::default() };
            let patched = api.patch(name, &Patch::Apply(migration_patch(gvr, object)), &params);
            match patched {
                Ok(_) => {
                    log::debug!(
                        "\"Successfully migrated the resource\" namespace=\"{namespace}\" name=\"{name}\" gvr=\"{gvr_name}\""
                    );
                }
                Err(e) if e.is_conflict() => {
                    log::trace!(
                        "\"Resource ignored due to conflict\" namespace=\"{namespace}\" name=\"{name}\" gvr=\"{gvr_name}\" err=\"{e}\""
                    );
                }
                Err(e) if is_retriable(&e) => return Err(Error::Api(e)),
                Err(e) => {
                    log::error!(
                        "\"Failed to migrate the resource\" err=\"{e}\" namespace=\"{namespace}\" name=\"{name}\" gvr=\"{gvr_name}\""
                    );
                    self.fail(svm, e.message())?;
                    return Ok(Outcome::Failed);
                }
            }
        }
        Ok(Outcome::Migrated(Box::new(svm)))
    }

    /// `failMigration`: `Failed` with "migration encountered unhandled error: <err>".
    fn fail(&self, svm: StorageVersionMigration, error: String) -> Result<(), client::Error> {
        self.migrations.fail(svm, format!("migration encountered unhandled error: {error}"))
    }
}

/// The default controller rate limiter, shared by the queue and the migrator.
#[derive(Clone)]
struct SharedLimiter(Arc<MaxOfRateLimiter<String>>);

impl RateLimiter<String> for SharedLimiter {
    fn when(&self, item: &String) -> Duration {
        self.0.when(item)
    }

    fn forget(&self, item: &String) {
        self.0.forget(item)
    }

    fn num_requeues(&self, item: &String) -> u32 {
        self.0.num_requeues(item)
    }
}

/// What `runMigration` ended with.
enum Outcome {
    /// Every object was migrated (or needed no migration).
    Migrated(Box<StorageVersionMigration>),
    /// The migration was marked `Failed`.
    Failed,
}

/// The apply patch of one object (`typeMetaUIDRV`): its type, UID and resourceVersion only.
pub fn migration_patch(gvr: &ApiResource, object: &PartialObjectMetadata) -> serde_json::Value {
    let mut metadata = serde_json::Map::new();
    if let Some(uid) = object.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        metadata.insert("uid".into(), json!(uid));
    }
    if let Some(rv) = object.metadata.resource_version.as_deref().filter(|r| !r.is_empty()) {
        metadata.insert("resourceVersion".into(), json!(rv));
    }
    json!({"kind": gvr.kind, "apiVersion": gvr.api_version(), "metadata": metadata})
}

/// `isRetriableError`: connection trouble, a timeout, throttling, an unavailable or failing
/// server.
pub fn is_retriable(error: &client::Error) -> bool {
    error.is_transport()
        || error.is_server_timeout()
        || error.is_too_many_requests()
        || error.is_service_unavailable()
        || error.is_internal_error()
}

/// `GetMonitor`'s wait for the monitor's cache, up to `timeout`.
fn wait_for_sync(monitor: &dyn ResourceInformer, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if monitor.has_synced() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(MONITOR_POLL.min(deadline - now));
    }
}
