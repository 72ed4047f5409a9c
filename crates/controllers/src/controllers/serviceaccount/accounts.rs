//! `serviceaccount-controller`, after upstream's `ServiceAccountsController`
//! (`pkg/controller/serviceaccount/serviceaccounts_controller.go`): every active namespace has
//! the `default` ServiceAccount; it is created when a namespace is added or updated (or
//! resynced) and again when it is deleted. The queue holds namespace names.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Error;
use crate::apimachinery::errors::Aggregate;
use crate::client::{Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `DefaultServiceAccountsControllerOptions`: the accounts every namespace gets.
pub const ACCOUNTS_TO_ENSURE: &[&str] = &["default"];

/// `startServiceAccountController` runs one worker.
const WORKERS: usize = 1;

/// `NewServiceAccountsController`.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("serviceaccount");
    let controller = Arc::new(ServiceAccountsController {
        client: context.client.clone(),
        namespaces: context.informers.informer::<Namespace>(),
        accounts: context.informers.informer::<ServiceAccount>(),
    });
    let on_namespace = queue.clone();
    controller.namespaces.add_handler(move |event: &Event<Namespace>| match event {
        // `namespaceAdded` / `namespaceUpdated`; deletions need nothing.
        Event::Added(ns) | Event::Updated { new: ns, .. } => {
            on_namespace.add(ns.metadata.name.clone().unwrap_or_default());
        }
        Event::Deleted { .. } => {}
    });
    let on_account = queue.clone();
    controller.accounts.add_handler(move |event: &Event<ServiceAccount>| {
        // `serviceAccountDeleted`: recreate it if it is one we ensure.
        if let Event::Deleted { object, .. } = event {
            on_account.add(object.metadata.namespace.clone().unwrap_or_default());
        }
    });
    Controller::new()
        .with_queue(&queue, WORKERS, move |namespace: &String| controller.sync(namespace).map_err(SyncError::of))
}

struct ServiceAccountsController {
    client: Client,
    namespaces: Arc<Informer<Namespace>>,
    accounts: Arc<Informer<ServiceAccount>>,
}

impl ServiceAccountsController {
    /// `syncNamespace`.
    fn sync(&self, namespace: &str) -> Result<(), Error> {
        let Some(ns) = self.namespaces.store().get(namespace) else {
            return Ok(());
        };
        if ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Active") {
            // Nothing is created in a namespace that is not active.
            return Ok(());
        }
        let mut failures = Vec::new();
        for name in ACCOUNTS_TO_ENSURE {
            if self.accounts.store().get_by_name(namespace, name).is_some() {
                continue;
            }
            let account = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    ..ObjectMeta::default()
                },
                ..ServiceAccount::default()
            };
            let api = Api::<ServiceAccount>::namespaced(&self.client, namespace);
            match api.create(&account, &PostParams::default()) {
                Ok(_) => log::debug!("created service account {namespace}/{name}"),
                Err(e) if e.is_already_exists() || e.has_status_cause("NamespaceTerminating") => {}
                Err(e) => failures.push(e),
            }
        }
        Aggregate::from_errors(failures).map_err(Error::CreateAccounts)
    }
}
