//! Upstream's `ResourceVersionController` (`resourceversion.go`): before a running migration
//! starts, it records in `status.resourceVersion` the resource's current resourceVersion (the
//! one of a list of at most one object, in a namespace that cannot exist), against which the
//! migrator checks that the garbage collector's cache is fresh enough. One worker.

use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;

use super::{Error, MIGRATION_RUNNING};
use super::{Migrations, discover, gvr_string, is_condition_true, is_terminal, resource_for, within_discovery_grace};
use crate::apimachinery::resourceversion::compare_resource_version;
use crate::client::discovery::{ApiResource, Discovery};
use crate::client::metadata::MetadataApi;
use crate::client::{Client, ListParams};
use crate::runtime::controller::{SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `ResourceVersionControllerName`.
pub const CONTROLLER_NAME: &str = "resource-version-controller";
/// `fakeSVMNamespaceName`: not a valid namespace name, so it never exists.
pub const FAKE_NAMESPACE: &str = "@fake:svm_ns!";
/// `verbsRequiredForMigration`.
pub const VERBS_REQUIRED_FOR_MIGRATION: [&str; 3] = ["update", "patch", "list"];

/// Enqueues a migration by name on Add and Update.
pub fn watch(informer: &Informer<StorageVersionMigration>, queue: &WorkQueue<String>) {
    let queue = queue.clone();
    informer.add_handler(move |event: &Event<StorageVersionMigration>| match event {
        Event::Added(svm) | Event::Updated { new: svm, .. } => {
            log::debug!("Adding svm=\"{}\"", svm.metadata.name.as_deref().unwrap_or_default());
            queue.add(svm.metadata.name.clone().unwrap_or_default());
        }
        Event::Deleted { .. } => {}
    });
}

/// Upstream's `ResourceVersionController`.
pub struct ResourceVersions {
    migrations: Migrations,
    /// Discovery and the list (upstream's discovery and metadata clients, on the fast config).
    client: Client,
}

impl ResourceVersions {
    /// `NewResourceVersionController`; discovery and the list go through `client`.
    pub fn new(migrations: Migrations, client: Client) -> Self {
        ResourceVersions { migrations, client }
    }

    /// `processNext`: every error is retried with the queue's rate limit (upstream's
    /// `AddRateLimited`, whatever the error's kind).
    pub fn process_next(&self, name: &str) -> SyncResult {
        self.sync(name).map_err(|e| {
            log::debug!("\"Error syncing SVM resource, retrying\" svm=\"{name}\" err=\"{e}\"");
            SyncError::failed(e.to_string())
        })
    }

    /// `sync`.
    fn sync(&self, name: &str) -> Result<(), Error> {
        let started = Instant::now();
        let Some(mut svm) = self.migrations.get(name) else {
            return Ok(());
        };
        if !is_condition_true(&svm, MIGRATION_RUNNING) {
            log::debug!("\"Migration is not running yet, skipping\" svm=\"{name}\"");
            return Ok(());
        }
        if is_terminal(&svm) {
            log::debug!("\"Migration has already succeeded or failed previously, skipping\" svm=\"{name}\"");
            return Ok(());
        }
        if svm.status.as_ref().and_then(|s| s.resource_version.as_deref()).is_some_and(|rv| !rv.is_empty()) {
            log::debug!("\"Resource version is already set\" svm=\"{name}\"");
            return Ok(());
        }
        let (group, resource) = super::group_resource(&svm);
        let discovered = discover(&self.client)?;
        let Some(gvr) = resource_for(&discovered, &group, &resource) else {
            if within_discovery_grace(&svm, Timestamp::now()) {
                return Err(Error::NotInRestMapper);
            }
            return self.fail(svm, "resource does not exist in discovery".to_string());
        };
        if !is_resource_migratable(&discovered, &gvr)? {
            let message = format!(
                "resource \"{}\" does not support discovery operations: [{}]",
                gvr_string(&gvr),
                VERBS_REQUIRED_FOR_MIGRATION.join(" ")
            );
            log::error!(
                "\"resource is not able to be migrated, not retrying\" err=\"{message}\" gvr=\"{}\"",
                gvr_string(&gvr)
            );
            return self.fail(svm, message);
        }
        let latest = self.latest_resource_version(&gvr)?;
        if let Err(e) = compare_resource_version(&latest, &latest) {
            return self.fail(svm, format!("latest resourceVersion for {} is not valid: {e}", gvr_string(&gvr)));
        }
        svm.status.get_or_insert_default().resource_version = Some(latest);
        self.migrations.update_status(&svm).map_err(|source| Error::UpdateStatus { name: name.into(), source })?;
        log::debug!(
            "\"Resource version has been successfully added\" svm=\"{name}\" elapsed=\"{:?}\"",
            started.elapsed()
        );
        Ok(())
    }

    /// `getLatestResourceVersion`: the resourceVersion of a one-object list of the resource,
    /// in [`FAKE_NAMESPACE`] if it is namespaced (an empty list, as cheap as it gets).
    fn latest_resource_version(&self, gvr: &ApiResource) -> Result<String, Error> {
        let api = MetadataApi::new(&self.client, gvr, Some(FAKE_NAMESPACE));
        let list = api
            .list(&ListParams { limit: Some(1), ..ListParams::default() })
            .map_err(|source| Error::LatestResourceVersion { gvr: gvr_string(gvr), source })?;
        Ok(list.metadata.resource_version.unwrap_or_default())
    }

    fn fail(&self, svm: StorageVersionMigration, message: String) -> Result<(), Error> {
        self.migrations.fail(svm, message).map_err(Error::MarkFailed)
    }
}

/// `isResourceMigratable`: whether discovery lists `update`, `patch` and `list` for the
/// resource. A group-version discovery does not serve is not migratable (upstream's NotFound);
/// one whose discovery failed is an error.
pub fn is_resource_migratable(discovered: &Discovery, gvr: &ApiResource) -> Result<bool, Error> {
    let in_version = |r: &&ApiResource| r.group == gvr.group && r.version == gvr.version;
    if let Some(found) = discovered.all.iter().filter(in_version).find(|r| r.plural == gvr.plural) {
        return Ok(found.supports_all(&VERBS_REQUIRED_FOR_MIGRATION));
    }
    if let Some(e) = discovered.failed.get(&gvr.api_version()) {
        return Err(Error::GroupDiscovery(e.to_string()));
    }
    if !discovered.all.iter().any(|r| in_version(&r)) {
        return Ok(false);
    }
    Err(Error::NotInDiscovery { gvr: gvr_string(gvr) })
}
