//! Upstream's `MigrationRunnerController` (`migrationrunner.go`): one migration at a time per
//! resource. Of a resource's migrations that are neither running nor finished, the oldest
//! (creation time, then name) gets `Running`, unless one is running already; a running one that
//! has finished gets `Running=False` (`MigrationCompleted`). For a custom resource it also keeps
//! the CustomResourceDefinition's `StorageMigrating` condition (server-side apply of the status,
//! field manager `migration-runner-controller`) and, after a successful migration of an
//! unchanged definition, cuts its `status.storedVersions` to the storage version. One worker.

use std::cmp::Ordering;

use jiff::Timestamp;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use super::{MIGRATION_RUNNING, MIGRATION_SUCCEEDED, Migrations, find_condition, is_running, is_terminal};
use crate::apimachinery::clock::whole_seconds;
use crate::client::{Api, Client, Error, Patch, PostParams, retry};
use crate::runtime::controller::{SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `MigrationRunnerControllerName`: its field manager.
pub const CONTROLLER_NAME: &str = "migration-runner-controller";
/// `apiextensionsv1.StorageMigrating`.
pub const STORAGE_MIGRATING: &str = "StorageMigrating";

/// The queue's key: a migration's `spec.resource` (group, resource).
pub type GroupResource = (String, String);

/// Enqueues a migration's resource on Add, Update and Delete (a tombstone too).
pub fn watch(informer: &Informer<StorageVersionMigration>, queue: &WorkQueue<GroupResource>) {
    let queue = queue.clone();
    informer.add_handler(move |event: &Event<StorageVersionMigration>| {
        let svm = match event {
            Event::Added(svm) | Event::Updated { new: svm, .. } | Event::Deleted { object: svm, .. } => svm,
        };
        queue.add(super::group_resource(svm));
    });
}

/// Upstream's `MigrationRunnerController`.
pub struct Runner {
    migrations: Migrations,
    /// For CustomResourceDefinitions (upstream's apiextensions client, on the fast config).
    client: Client,
}

impl Runner {
    /// `NewCustomResourceController`; definitions are read and applied through `client`.
    pub fn new(migrations: Migrations, client: Client) -> Self {
        Runner { migrations, client }
    }

    /// `processNext`: every error is retried with the queue's rate limit.
    pub fn process_next(&self, resource: &GroupResource) -> SyncResult {
        self.sync(resource).map_err(|e| {
            log::error!("\"Error syncing SVM resource, retrying\" err=\"{e}\" svm=\"{resource:?}\"");
            SyncError::failed(e.message())
        })
    }

    /// `sync`: finishes the running migrations that have ended, then promotes the next one.
    fn sync(&self, resource: &GroupResource) -> Result<(), Error> {
        let migrations: Vec<StorageVersionMigration> =
            self.migrations.list().iter().map(|svm| (**svm).clone()).collect();
        let (to_clean_up, to_promote) = svms_for_resource(&migrations, resource);
        for svm in to_clean_up {
            self.cleanup_admission(svm.clone())?;
        }
        if let Some(svm) = to_promote {
            self.mark_as_active(svm.clone())?;
        }
        Ok(())
    }

    /// `cleanupAdmission`: `Running=False` on a finished migration, after the definition's
    /// `StorageMigrating` condition is finished.
    fn cleanup_admission(&self, mut svm: StorageVersionMigration) -> Result<(), Error> {
        let running = find_condition(super::conditions(&svm), MIGRATION_RUNNING).is_some_and(|c| c.status == "True");
        if !running {
            return Ok(());
        }
        let completed = Condition {
            type_: MIGRATION_RUNNING.to_string(),
            status: "False".to_string(),
            reason: "MigrationCompleted".to_string(),
            message: "Migration completed".to_string(),
            observed_generation: svm.metadata.generation,
            // Set by `set_status_condition` when the status changes, as a zero time is upstream.
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        let conditions = svm.status.get_or_insert_default().conditions.get_or_insert_default();
        super::set_status_condition(conditions, completed, Timestamp::now());
        self.cleanup_crd(&svm)?;
        self.migrations.update_status(&svm).map(|_| ())
    }

    /// `markAsActive`: `StorageMigrating=True` on the definition, then `Running` on the migration.
    fn mark_as_active(&self, mut svm: StorageVersionMigration) -> Result<(), Error> {
        let (group, resource) = super::group_resource(&svm);
        if let Some(crd) = self.crd_for_group_resource(&group, &resource)? {
            let svm_name = svm.metadata.name.clone().unwrap_or_default();
            let name = crd.metadata.name.clone().unwrap_or_default();
            retry::on_conflict(|| {
                let crd = self.crds().get(&name)?;
                let condition = StorageMigratingCondition {
                    status: "True",
                    reason: "MigrationRunning",
                    message: format!("Migration {svm_name} is running"),
                };
                self.apply_status(&crd, &condition, None)
            })?;
        }
        super::set_status_conditions(
            &mut svm,
            MIGRATION_RUNNING,
            "MigrationRunning",
            "The migration is running",
            Timestamp::now(),
        );
        self.migrations.update_status(&svm).map(|_| ())
    }

    /// `cleanupCRD`: finishes the definition's migration, if the resource is a custom one.
    fn cleanup_crd(&self, svm: &StorageVersionMigration) -> Result<(), Error> {
        let success = find_condition(super::conditions(svm), MIGRATION_SUCCEEDED).is_some_and(|c| c.status == "True");
        let (group, resource) = super::group_resource(svm);
        match self.crd_for_group_resource(&group, &resource)? {
            Some(crd) => self.finish_crd_migration(&crd.metadata.name.unwrap_or_default(), success),
            None => Ok(()),
        }
    }

    /// `finishCRDMigration`: `StorageMigrating=False`, and the stored versions cut to the storage
    /// version if the definition has not changed since the migration started.
    fn finish_crd_migration(&self, name: &str, success: bool) -> Result<(), Error> {
        retry::on_conflict(|| {
            let crd = self.crds().get(name)?;
            let generation = crd.metadata.generation.unwrap_or_default();
            let migrating = crd.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
            let can_update_stored_versions = migrating
                .iter()
                .find(|c| c.type_ == STORAGE_MIGRATING)
                .is_some_and(|c| c.observed_generation.unwrap_or_default() == generation);
            let (reason, message) = finish_reason(success, can_update_stored_versions);
            let condition = StorageMigratingCondition { status: "False", reason, message };
            let stored = can_update_stored_versions
                .then(|| crd.spec.versions.iter().find(|v| v.storage).map(|v| v.name.clone()))
                .flatten();
            self.apply_status(&crd, &condition, stored)
        })
    }

    /// The server-side apply of the definition's status: the condition (and the stored
    /// versions), with the resourceVersion read so that a changed definition conflicts.
    fn apply_status(
        &self,
        crd: &CustomResourceDefinition,
        condition: &StorageMigratingCondition,
        stored_version: Option<String>,
    ) -> Result<(), Error> {
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        let body = status_apply(crd, condition, stored_version, Timestamp::now());
        let params =
            PostParams { field_manager: Some(CONTROLLER_NAME.to_string()), force: true, ..PostParams::default() };
        self.crds().patch_status(name, &Patch::Apply(body), &params).map(|_| ())
    }

    /// `crdForGroupResource`: the definition `<resource>.<group>`, if there is one.
    fn crd_for_group_resource(&self, group: &str, resource: &str) -> Result<Option<CustomResourceDefinition>, Error> {
        self.crds().get_opt(&format!("{resource}.{group}"))
    }

    fn crds(&self) -> Api<CustomResourceDefinition> {
        Api::cluster(&self.client)
    }
}

/// The `StorageMigrating` condition to apply.
pub struct StorageMigratingCondition {
    /// `True` while the migration runs, `False` after.
    pub status: &'static str,
    /// `MigrationRunning`, `MigrationSucceeded`, `MigrationFailed`.
    pub reason: &'static str,
    /// What it says.
    pub message: String,
}

/// The reason and message of a finished `StorageMigrating` condition.
pub fn finish_reason(success: bool, can_update_stored_versions: bool) -> (&'static str, String) {
    if !success {
        return ("MigrationFailed", "The migration has failed".to_string());
    }
    let message = if can_update_stored_versions {
        "The migration has succeeded and the stored versions have been updated"
    } else {
        "The migration has succeeded but the stored versions have not been updated due to a generation mismatch"
    };
    ("MigrationSucceeded", message.to_string())
}

/// The apply configuration of the definition's status (`applyconfigurationapiextensionsv1`).
pub fn status_apply(
    crd: &CustomResourceDefinition,
    condition: &StorageMigratingCondition,
    stored_version: Option<String>,
    now: Timestamp,
) -> Value {
    let mut status = json!({
        "conditions": [{
            "type": STORAGE_MIGRATING,
            "status": condition.status,
            "lastTransitionTime": whole_seconds(now).to_string(),
            "reason": condition.reason,
            "message": condition.message,
            "observedGeneration": crd.metadata.generation.unwrap_or_default(),
        }]
    });
    if let Some(version) = stored_version {
        status["storedVersions"] = json!([version]);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": crd.metadata.name.as_deref().unwrap_or_default(),
            "resourceVersion": crd.metadata.resource_version.as_deref().unwrap_or_default(),
        },
        "status": status,
    })
}

/// `compareSVM`: by creation time, then name.
fn compare_svm(a: &StorageVersionMigration, b: &StorageVersionMigration) -> Ordering {
    let created = |svm: &StorageVersionMigration| svm.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a).cmp(&created(b)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `getSVMsForResource`: the resource's running migrations that have finished, and the oldest
/// one to start if none is running.
pub fn svms_for_resource<'a>(
    migrations: &'a [StorageVersionMigration],
    resource: &GroupResource,
) -> (Vec<&'a StorageVersionMigration>, Option<&'a StorageVersionMigration>) {
    let mut to_clean_up = Vec::new();
    let mut to_promote: Option<&StorageVersionMigration> = None;
    let mut in_progress = false;
    for svm in migrations.iter().filter(|svm| super::group_resource(svm) == *resource) {
        let (running, terminal) = (is_running(svm), is_terminal(svm));
        let promotable = !running && !terminal && !in_progress;
        if running && terminal {
            to_clean_up.push(svm);
        } else if running {
            in_progress = true;
            to_promote = None;
        } else if promotable && to_promote.is_none_or(|p| compare_svm(svm, p) == Ordering::Less) {
            to_promote = Some(svm);
        }
    }
    (to_clean_up, to_promote)
}
