//! `kube-apiserver-serving-clustertrustbundle-publisher-controller`, after upstream v1.36's
//! `ClusterTrustBundlePublisher` (`pkg/controller/certificates/clustertrustbundlepublisher`) and
//! its start function `newKubeAPIServerSignerClusterTrustBundledPublisherController`
//! (`cmd/kube-controller-manager/app/certificates.go`): the kube-apiserver serving CA
//! (`--root-ca-file`, else the kubeconfig's CA data) is kept published as the one
//! ClusterTrustBundle of the signer `kubernetes.io/kube-apiserver-serving`, named after the
//! bundle's hash; the signer's other bundles are deleted.
//!
//! Upstream picks the API version by discovery, `certificates.k8s.io/v1beta1` first, then
//! `v1alpha1`, and does not start when neither serves `clustertrustbundles`. Discovery is a
//! request, which a constructor here must not make (it runs on a standby too): it is made when
//! the controller starts, which then requests the informer of the version found.
//!
//! The queue holds one key, `""`: every sync publishes the whole state.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use k8s_openapi::api::certificates::{v1alpha1, v1beta1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, Resource};
use serde::Serialize;

use crate::client::{Api, Client, DeleteParams, PostParams};
use crate::controllers::syncmetrics::SyncMetrics;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informable, Informer, SharedInformerFactory};
use crate::runtime::workqueue::WorkQueue;

/// The signer whose CA is published (`"kubernetes.io/kube-apiserver-serving"` in the start
/// function).
pub const SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-serving";

/// The workqueue's name.
const QUEUE: &str = "ca_cert_publisher_cluster_trust_bundles";

/// The only key: a sync handles the signer's bundles as a whole.
const KEY: &str = "";

/// The resource upstream's `clusterTrustBundlesAvailable` looks for.
const RESOURCE: &str = "clustertrustbundles";

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The CA bundle to publish (PEM), as read from `--root-ca-file` or the kubeconfig.
    pub ca_bundle: String,
}

/// A served version of ClusterTrustBundle (upstream's `clusterTrustBundleHandlers`).
pub trait BundleVersion: Informable + Resource<Scope = ClusterResourceScope> + Clone + Serialize {
    /// `createClusterTrustBundle`.
    fn build(name: &str, signer_name: &str, trust_bundle: &str) -> Self;
    /// `spec.signerName`.
    fn signer_name(&self) -> &str;
    /// `spec.trustBundle`.
    fn trust_bundle(&self) -> &str;
    /// `updateWithTrustBundle`: a copy holding `trust_bundle`.
    fn with_trust_bundle(&self, trust_bundle: &str) -> Self;
}

/// Implements [`BundleVersion`] for one API version: both have the same fields.
macro_rules! bundle_version {
    ($version:ident) => {
        impl BundleVersion for $version::ClusterTrustBundle {
            fn build(name: &str, signer_name: &str, trust_bundle: &str) -> Self {
                $version::ClusterTrustBundle {
                    metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
                    spec: $version::ClusterTrustBundleSpec {
                        signer_name: Some(signer_name.to_string()),
                        trust_bundle: trust_bundle.to_string(),
                    },
                }
            }

            fn signer_name(&self) -> &str {
                self.spec.signer_name.as_deref().unwrap_or_default()
            }

            fn trust_bundle(&self) -> &str {
                &self.spec.trust_bundle
            }

            fn with_trust_bundle(&self, trust_bundle: &str) -> Self {
                let mut bundle = self.clone();
                bundle.spec.trust_bundle = trust_bundle.to_string();
                bundle
            }
        }
    };
}

bundle_version!(v1alpha1);
bundle_version!(v1beta1);

/// `constructBundleName`: the signer name with `/` as `:`, a `:`, then the hex of the first 12
/// bytes of the bundle's SHA-256.
pub fn bundle_name(signer_name: &str, bundle: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bundle);
    let hash: String = digest.as_ref()[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}:{hash}", signer_name.replace('/', ":"))
}

/// Why the publisher could not start.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The discovery of a ClusterTrustBundle version failed (other than a 404).
    #[error("discovery failed for ClusterTrustBundle: {0}")]
    Discovery(#[source] crate::client::Error),
}

/// The publisher of the version discovery chose, type-erased for the controller.
trait Publishing: Send + Sync {
    fn sync(&self) -> Result<(), crate::client::Error>;
    fn has_synced(&self) -> bool;
}

/// `NewBetaClusterTrustBundlePublisher` / `NewAlphaClusterTrustBundlePublisher`, with the
/// start function's discovery made when the controller starts. It cannot fail: the discovery's
/// error is the start hook's.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    METRICS.register();
    let queue = WorkQueue::new(QUEUE);
    let chosen: Arc<OnceLock<Arc<dyn Publishing>>> = Arc::new(OnceLock::new());
    let starter = Starter {
        controller: context.name,
        client: context.client.clone(),
        informers: context.informers.clone(),
        queue: queue.clone(),
        ca_bundle: config.ca_bundle,
        chosen: chosen.clone(),
    };
    let worker = chosen.clone();
    let synced = chosen;
    Controller::new()
        .with_queue(&queue, 1, move |_: &String| match worker.get() {
            Some(publisher) => sync(publisher.as_ref()),
            None => Ok(()),
        })
        .wait_for(move || synced.get().is_some_and(|p| p.has_synced()))
        .on_start(move || starter.start().map_err(Into::into))
}

/// `syncClusterTrustBundle`, recorded in the publisher's metrics as upstream's deferred
/// `recordMetrics`.
fn sync(publisher: &dyn Publishing) -> SyncResult {
    let started = Instant::now();
    let result = publisher.sync();
    METRICS.record(&result, started);
    log::debug!("Finished syncing ClusterTrustBundle signerName={SIGNER_NAME:?} elapsedTime={:?}", started.elapsed());
    result.map_err(SyncError::from)
}

/// What the controller does when it starts: discovery, then the informer of the version found.
struct Starter {
    /// The controller's name, for upstream's log line when no version is served.
    controller: &'static str,
    client: Client,
    informers: SharedInformerFactory,
    queue: WorkQueue<String>,
    ca_bundle: String,
    chosen: Arc<OnceLock<Arc<dyn Publishing>>>,
}

impl Starter {
    fn start(self) -> Result<(), Error> {
        let publisher: Arc<dyn Publishing> = if self.available(v1beta1::ClusterTrustBundle::API_VERSION)? {
            self.publisher::<v1beta1::ClusterTrustBundle>()
        } else if self.available(v1alpha1::ClusterTrustBundle::API_VERSION)? {
            self.publisher::<v1alpha1::ClusterTrustBundle>()
        } else {
            log::info!("no known scheme version was found for clustertrustbundles, cannot start {}", self.controller);
            return Ok(());
        };
        log::info!("Starting ClusterTrustBundle CA cert publisher controller");
        let _ = self.chosen.set(publisher);
        self.informers.start();
        // Upstream queues the key once its cache has synced; the worker waits for that here.
        self.queue.add(KEY.to_string());
        Ok(())
    }

    /// `clusterTrustBundlesAvailable`: whether the group-version's discovery document lists
    /// `clustertrustbundles`; a 404 means it is not served.
    fn available(&self, group_version: &str) -> Result<bool, Error> {
        match self.client.get_json::<serde_json::Value>(&format!("/apis/{group_version}")) {
            Ok(list) => Ok(serves_bundles(&list)),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(Error::Discovery(e)),
        }
    }

    /// The publisher of version `K`, its informer's handler queueing the key on every change
    /// to one of the signer's bundles (upstream's informer lists only those, by field selector).
    fn publisher<K: BundleVersion>(&self) -> Arc<dyn Publishing> {
        let bundles: Arc<Informer<K>> = self.informers.informer();
        let queue = self.queue.clone();
        bundles.add_handler(move |event: &Event<K>| {
            if event.object().signer_name() == SIGNER_NAME {
                queue.add(KEY.to_string());
            }
        });
        Arc::new(Publisher { client: self.client.clone(), bundles, ca_bundle: self.ca_bundle.clone() })
    }
}

/// Whether an `APIResourceList` names `clustertrustbundles`.
fn serves_bundles(list: &serde_json::Value) -> bool {
    let resources = list["resources"].as_array().into_iter().flatten();
    resources.into_iter().any(|r| r["name"] == RESOURCE)
}

/// `ClusterTrustBundlePublisher` of one API version.
struct Publisher<K: BundleVersion> {
    client: Client,
    bundles: Arc<Informer<K>>,
    ca_bundle: String,
}

impl<K: BundleVersion> Publishing for Publisher<K> {
    /// `syncClusterTrustBundle`: create the bundle named after the CA, or update its content,
    /// then delete the signer's other bundles, returning the last deletion error so that the
    /// key is retried.
    fn sync(&self) -> Result<(), crate::client::Error> {
        let api = Api::<K>::cluster(&self.client);
        let name = bundle_name(SIGNER_NAME, self.ca_bundle.as_bytes());
        match self.bundles.store().get(&name) {
            None => {
                api.create(&K::build(&name, SIGNER_NAME, &self.ca_bundle), &PostParams::default())?;
            }
            Some(bundle) if bundle.trust_bundle() != self.ca_bundle => {
                api.replace(&name, &bundle.with_trust_bundle(&self.ca_bundle), &PostParams::default())?;
            }
            Some(_) => {}
        }
        let mut deletion_error = None;
        for other in self.bundles.store().filter(|b| b.signer_name() == SIGNER_NAME) {
            let other_name = other.metadata().name.as_deref().unwrap_or_default();
            if other_name == name {
                continue;
            }
            match api.delete(other_name, &DeleteParams::default()) {
                Err(e) if !e.is_not_found() => {
                    log::error!("failed to remove a cluster trust bundle bundleName={other_name:?}: {e}");
                    deletion_error = Some(e);
                }
                _ => {}
            }
        }
        deletion_error.map_or(Ok(()), Err)
    }

    fn has_synced(&self) -> bool {
        self.bundles.has_synced()
    }
}

/// The publisher's families (upstream's `clustertrustbundlepublisher/metrics.go`), registered
/// when the controller is created (upstream registers them at package init; a family without
/// samples is not exposed either way).
static METRICS: SyncMetrics = SyncMetrics::new(
    (
        "clustertrustbundle_publisher_sync_total",
        "[ALPHA] Number of syncs that occurred in cluster trust bundle publisher.",
    ),
    ("clustertrustbundle_publisher_sync_duration_seconds", "[ALPHA] The time it took to sync a cluster trust bundle."),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_names_follow_construct_bundle_name() {
        // printf 'bundle' | sha256sum: the first 12 bytes.
        assert_eq!(
            bundle_name("kubernetes.io/kube-apiserver-serving", b"bundle"),
            "kubernetes.io:kube-apiserver-serving:1e6ed65d77d6364eeaed5a74"
        );
        assert_eq!(bundle_name("a/b/c", b"").len(), "a:b:c:".len() + 24);
        assert!(bundle_name("a/b/c", b"").starts_with("a:b:c:e3b0c44298fc1c149afbf4c8"));
    }

    #[test]
    fn both_versions_build_and_update_the_same_bundle() {
        let beta = v1beta1::ClusterTrustBundle::build("n", SIGNER_NAME, "one");
        assert_eq!(beta.metadata.name.as_deref(), Some("n"));
        assert_eq!((beta.signer_name(), beta.trust_bundle()), (SIGNER_NAME, "one"));
        let updated = beta.with_trust_bundle("two");
        assert_eq!((updated.signer_name(), updated.trust_bundle()), (SIGNER_NAME, "two"));
        assert_eq!(beta.trust_bundle(), "one", "a copy is updated");
        let alpha = v1alpha1::ClusterTrustBundle::build("n", SIGNER_NAME, "one");
        assert_eq!(serde_json::to_value(&alpha.spec).unwrap(), serde_json::to_value(&beta.spec).unwrap());
        assert_eq!(serde_json::to_value(&beta).unwrap()["apiVersion"], "certificates.k8s.io/v1beta1");
        assert_eq!(serde_json::to_value(&alpha).unwrap()["apiVersion"], "certificates.k8s.io/v1alpha1");
    }

    #[test]
    fn discovery_looks_for_clustertrustbundles() {
        let list = |names: &[&str]| {
            let resources: Vec<_> = names.iter().map(|n| serde_json::json!({"name": n})).collect();
            serde_json::json!({"kind": "APIResourceList", "resources": resources})
        };
        assert!(serves_bundles(&list(&["podcertificaterequests", "clustertrustbundles"])));
        assert!(!serves_bundles(&list(&["podcertificaterequests"])));
        assert!(!serves_bundles(&serde_json::json!({})));
    }
}
