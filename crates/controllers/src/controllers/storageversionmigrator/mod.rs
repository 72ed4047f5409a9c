//! The storage version migrator (`storage-version-migrator-controller`, alias `svm`; gates
//! StorageVersionMigrator, beta and off in v1.36, and client-go's InformerResourceVersion), after
//! upstream v1.36's `pkg/controller/storageversionmigrator` and `newSVMController`: it rewrites
//! every object of the resource a `storagemigration.k8s.io/v1beta1` StorageVersionMigration
//! names, so that each is stored again in the current storage version.
//!
//! Three loops over the same StorageVersionMigration informer, as upstream's `concurrentRun`:
//! * [`runner`] (`MigrationRunnerController`, queue by group-resource): runs one migration per
//!   resource at a time (condition `Running`), marks the CustomResourceDefinition of a custom
//!   resource `StorageMigrating` meanwhile, and afterwards sets its `storedVersions` to the
//!   storage version;
//! * [`resourceversion`] (`ResourceVersionController`): records in `status.resourceVersion` the
//!   resource's current resourceVersion, from a list of one object;
//! * [`migrator`] (`SVMController`, five workers): once the garbage collector's monitor of the
//!   resource has synced past that resourceVersion, applies an empty patch (UID and
//!   resourceVersion preconditions) to every object it caches, then sets `Succeeded` (or `Failed`).
//!
//! Upstream reads the garbage collector's monitors (`GraphBuilder.GetMonitor`); here they are the
//! shared informers the garbage collector started, found through
//! [`crate::runtime::informer::SharedInformerFactory::started_for_resource`]. Upstream's REST
//! mapper (discovery, reset every 30 s) is a discovery read here, made when a migration needs it.

pub mod migrator;
pub mod resourceversion;
pub mod runner;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::apimachinery::clock::whole_seconds;
use crate::client::discovery::{self, ApiResource, Discovery};
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::informer::Informer;
use crate::runtime::workqueue::WorkQueue;

/// `svmv1beta1.MigrationRunning`.
pub const MIGRATION_RUNNING: &str = "Running";
/// `svmv1beta1.MigrationSucceeded`.
pub const MIGRATION_SUCCEEDED: &str = "Succeeded";
/// `svmv1beta1.MigrationFailed`.
pub const MIGRATION_FAILED: &str = "Failed";
/// `migrationFailedStatusReason`.
pub const MIGRATION_FAILED_REASON: &str = "StorageVersionMigrationFailed";
/// How long after its creation a migration waits for discovery (and the garbage collector) to
/// know its resource before it fails: twice the 30 s discovery resync.
pub const DISCOVERY_GRACE: Duration = Duration::from_secs(60);

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// The migrator's workers; upstream runs five.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 5 }
    }
}

/// Why a sync of a migration failed. API errors are kept whole; the loops requeue every
/// failure with the queue's rate limit as upstream does (the migrator honours a `Retry-After`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed: the server's message alone.
    #[error("{}", .0.message())]
    Api(#[from] client::Error),
    /// Marking a migration failed did not work (the resource version loop's text).
    #[error("{0}")]
    MarkFailed(#[source] client::Error),
    /// The resource is not in discovery yet; it may be soon.
    #[error("resource does not exist in our rest mapper, requeuing to attempt again")]
    NotInRestMapper,
    /// The migrator's form of [`Error::NotInRestMapper`] (upstream wraps a nil error).
    #[error("resource does not exist in rest mapper, requeuing to attempt again: %!w(<nil>)")]
    NotInRestMapperNil,
    /// The discovery of the resource's group version failed: that error's text (the error
    /// itself stays with the discovery that holds it).
    #[error("{0}")]
    GroupDiscovery(String),
    /// The resource is in a group version discovery serves, but not listed there.
    #[error("resource \"{gvr}\" not found in discovery")]
    NotInDiscovery {
        /// `GroupVersionResource.String()`.
        gvr: String,
    },
    /// The migration's status could not be written.
    #[error("error updating status for {name}: {}", .source.message())]
    UpdateStatus {
        /// The migration.
        name: String,
        /// The update's error.
        source: client::Error,
    },
    /// The resource's latest resourceVersion could not be listed.
    #[error("error getting latest resourceVersion for {gvr}: {}", .source.message())]
    LatestResourceVersion {
        /// `GroupVersionResource.String()`.
        gvr: String,
        /// The list's error.
        source: client::Error,
    },
    /// The garbage collector has no monitor of the resource.
    #[error("no monitor found for resource {gvr}")]
    NoMonitor {
        /// `GroupVersionResource.String()`.
        gvr: String,
    },
    /// The garbage collector's monitor of the resource has not synced yet.
    #[error("resource does not exist in GC, requeuing to attempt again: %!w(<nil>)")]
    NotInGc,
    /// The garbage collector's cache is older than the migration's resourceVersion.
    #[error(
        "GC cache is not up to date, requeuing to attempt again. gcListResourceVersion: {gc_rv}, listResourceVersion: \
         {list_rv}"
    )]
    GcBehind {
        /// The monitor's resourceVersion.
        gc_rv: String,
        /// The migration's.
        list_rv: String,
    },
}

/// `newSVMController`: the three loops on one informer. Discovery, the migration's patches and
/// the CustomResourceDefinitions go through a client with 20× the QPS and 100× the burst
/// (`config.QPS *= 20; config.Burst *= 100`), status updates through the controller's own.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let fast = context.client.with_rate_limit_factors(20.0, 100);
    let informer = context.informers.informer::<StorageVersionMigration>();
    let migrations = Migrations { client: context.client.clone(), informer: informer.clone() };

    let migrator =
        Arc::new(migrator::Migrator::new(migrations.clone(), fast.clone(), context.informers.clone(), context.name));
    let svm_queue = migrator.queue(context.name);
    migrator::watch(&informer, &svm_queue);

    // Upstream names the runner's queue after the resource version controller, as here.
    let rv_queue = WorkQueue::new(resourceversion::CONTROLLER_NAME);
    let versions = Arc::new(resourceversion::ResourceVersions::new(migrations.clone(), fast.clone()));
    resourceversion::watch(&informer, &rv_queue);

    let runner_queue = WorkQueue::new(resourceversion::CONTROLLER_NAME);
    let runner = Arc::new(runner::Runner::new(migrations, fast));
    runner::watch(&informer, &runner_queue);

    Controller::new()
        .with_queue(&svm_queue, config.workers, move |key: &String| migrator.process_next(key))
        .with_queue(&rv_queue, 1, move |key: &String| versions.process_next(key))
        .with_queue(&runner_queue, 1, move |key: &runner::GroupResource| runner.process_next(key))
}

/// The migrations as the three loops read and write them.
#[derive(Clone)]
pub struct Migrations {
    client: Client,
    informer: Arc<Informer<StorageVersionMigration>>,
}

impl Migrations {
    /// A copy of the cached migration (`svmListers.Get(name).DeepCopy()`).
    fn get(&self, name: &str) -> Option<StorageVersionMigration> {
        self.informer.store().get(name).map(|svm| (*svm).clone())
    }

    fn list(&self) -> Vec<Arc<StorageVersionMigration>> {
        self.informer.store().list()
    }

    /// `UpdateStatus`.
    fn update_status(&self, svm: &StorageVersionMigration) -> Result<StorageVersionMigration, crate::client::Error> {
        let name = svm.metadata.name.as_deref().unwrap_or_default();
        Api::<StorageVersionMigration>::cluster(&self.client).replace_status(name, svm, &PostParams::default())
    }

    /// `failMigration`: sets `Failed` (reason `StorageVersionMigrationFailed`) with `message`.
    fn fail(&self, mut svm: StorageVersionMigration, message: String) -> Result<(), crate::client::Error> {
        set_status_conditions(&mut svm, MIGRATION_FAILED, MIGRATION_FAILED_REASON, &message, Timestamp::now());
        self.update_status(&svm).map(|_| ())
    }
}

/// The migration's `spec.resource` as (group, resource).
pub fn group_resource(svm: &StorageVersionMigration) -> (String, String) {
    svm.spec.as_ref().map(|s| (s.resource.group.clone(), s.resource.resource.clone())).unwrap_or_default()
}

/// The migration's conditions.
pub fn conditions(svm: &StorageVersionMigration) -> &[Condition] {
    svm.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default()
}

/// `meta.FindStatusCondition`.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// `meta.IsStatusConditionTrue`.
pub fn is_condition_true(svm: &StorageVersionMigration, type_: &str) -> bool {
    find_condition(conditions(svm), type_).is_some_and(|c| c.status == "True")
}

/// `isTerminal`: it has succeeded or failed.
pub fn is_terminal(svm: &StorageVersionMigration) -> bool {
    is_condition_true(svm, MIGRATION_SUCCEEDED) || is_condition_true(svm, MIGRATION_FAILED)
}

/// `isRunning`.
pub fn is_running(svm: &StorageVersionMigration) -> bool {
    is_condition_true(svm, MIGRATION_RUNNING)
}

/// `setStatusConditions`: appends a `True` condition of `type_`, unless the migration already
/// has one of that type that is `True` or `False` (a condition is set only once).
pub fn set_status_conditions(
    svm: &mut StorageVersionMigration,
    type_: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let existing = find_condition(conditions(svm), type_);
    if existing.is_some_and(|c| c.status == "True" || c.status == "False") {
        return;
    }
    let condition = Condition {
        type_: type_.to_string(),
        status: "True".to_string(),
        last_transition_time: Time(whole_seconds(now)),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: None,
    };
    svm.status.get_or_insert_default().conditions.get_or_insert_default().push(condition);
}

/// `meta.SetStatusCondition`: adds the condition or updates the one of its type; the
/// transition time moves (to `now`) only when the status changes.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition, now: Timestamp) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => conditions.push(Condition { last_transition_time: Time(whole_seconds(now)), ..new }),
        Some(existing) => {
            if existing.status != new.status {
                existing.status = new.status;
                existing.last_transition_time = Time(whole_seconds(now));
            }
            existing.reason = new.reason;
            existing.message = new.message;
            existing.observed_generation = new.observed_generation;
        }
    }
}

/// `schema.GroupVersionResource.String()`: `apps/v1, Resource=deployments`, `/v1, Resource=pods`.
pub fn gvr_string(resource: &ApiResource) -> String {
    format!("{}/{}, Resource={}", resource.group, resource.version, resource.plural)
}

/// Discovery as upstream's REST mapper sees it (read now).
pub fn discover(client: &Client) -> Result<Discovery, crate::client::Error> {
    discovery::server_resources(client)
}

/// `resourceFor`: the resource of `group`/`resource` in the group's preferred version serving
/// it, if discovery knows it.
pub fn resource_for(discovered: &Discovery, group: &str, resource: &str) -> Option<ApiResource> {
    discovered.preferred().into_iter().find(|r| r.group == group && r.plural == resource)
}

/// Whether the migration was created less than [`DISCOVERY_GRACE`] ago (`CreationTimestamp.Add(time.Minute).After(now)`).
pub fn within_discovery_grace(svm: &StorageVersionMigration, now: Timestamp) -> bool {
    let Some(created) = svm.metadata.creation_timestamp.as_ref() else {
        // Go's zero time plus a minute is long past.
        return false;
    };
    let grace = jiff::SignedDuration::try_from(DISCOVERY_GRACE).unwrap_or(jiff::SignedDuration::ZERO);
    created.0.checked_add(grace).is_ok_and(|deadline| deadline > now)
}

#[cfg(test)]
mod tests;
