//! `token-cleaner-controller`, after upstream's `TokenCleaner` (`tokencleaner.go`): a bootstrap
//! token of kube-system is deleted (with its uid as a precondition) once its `expiration` has
//! passed; until then its key is queued again for the moment it expires.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;

use super::token::{SECRET_TYPE, is_token_in, remaining};
use crate::client::{Api, Client, DeleteParams, Preconditions};
use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `api.NamespaceSystem`.
const TOKEN_NAMESPACE: &str = "kube-system";

/// `NewTokenCleaner` with `DefaultTokenCleanerOptions` (no resync). It cannot fail.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("token_cleaner");
    let cleaner = Arc::new(TokenCleaner {
        client: context.client.clone(),
        secrets: context.informers.informer::<Secret>(),
        queue: queue.clone(),
    });
    let enqueue = queue.clone();
    cleaner.secrets.add_handler(move |event: &Event<Secret>| match event {
        Event::Added(secret) | Event::Updated { new: secret, .. } if is_token_in(secret, TOKEN_NAMESPACE) => {
            enqueue.add(object_key(&secret.metadata))
        }
        _ => {}
    });
    // One worker (`wait.UntilWithContext(ctx, tc.worker, 10*time.Second)`).
    Controller::new().with_queue(&queue, 1, move |key: &String| cleaner.sync(key)).on_start(|| {
        log::info!("Starting token cleaner controller");
        Ok(())
    })
}

struct TokenCleaner {
    client: Client,
    secrets: Arc<Informer<Secret>>,
    queue: WorkQueue<String>,
}

impl TokenCleaner {
    /// `syncFunc`.
    fn sync(&self, key: &str) -> SyncResult {
        let started = std::time::Instant::now();
        let Some(secret) = self.secrets.store().get(key) else {
            log::debug!("Secret has been deleted secret={key:?}");
            return Ok(());
        };
        if secret.type_.as_deref() == Some(SECRET_TYPE) {
            self.eval_secret(key, &secret);
        }
        log::trace!("Finished syncing secret secret={key:?} elapsedTime={:?}", started.elapsed());
        Ok(())
    }

    /// `evalSecret`: delete it when expired, else look again when it expires. A failed delete
    /// is only logged, as upstream's.
    fn eval_secret(&self, key: &str, secret: &Secret) {
        let Some(left) = remaining(secret, Timestamp::now()) else {
            log::debug!("Deleting expired secret secret={key:?}");
            let options = DeleteParams {
                preconditions: secret
                    .metadata
                    .uid
                    .as_ref()
                    .filter(|uid| !uid.is_empty())
                    .map(|uid| Preconditions { uid: Some(uid.clone()), ..Preconditions::default() }),
                ..DeleteParams::default()
            };
            let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
            let name = secret.metadata.name.as_deref().unwrap_or_default();
            if let Err(e) = Api::<Secret>::namespaced(&self.client, namespace).delete(name, &options)
                && !e.is_conflict()
                && !e.is_not_found()
            {
                log::debug!("Error deleting secret err={e}");
            }
            return;
        };
        if !left.is_zero() {
            self.queue.add_after(key.to_string(), left);
        }
    }
}
