//! `root-ca-certificate-publisher-controller`, after upstream's `Publisher`
//! (`pkg/controller/certificates/rootcacertpublisher/publisher.go`): every namespace gets the
//! ConfigMap `kube-root-ca.crt` holding the cluster CA bundle as `ca.crt`, put back when it is
//! edited or deleted. The queue holds namespace names.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::client::{Api, Client, PostParams};
use crate::controllers::syncmetrics::SyncMetrics;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `RootCACertConfigMapName`.
pub const CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// The data key of the bundle.
pub const CA_KEY: &str = "ca.crt";
/// `DescriptionAnnotation` and its `Description`.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// `Description`: the value of [`DESCRIPTION_ANNOTATION`] on the ConfigMap.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// `startRootCACertPublisher` runs one worker.
const WORKERS: usize = 1;

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The CA bundle to publish (`--root-ca-file`, else the kubeconfig's CA data).
    pub root_ca: String,
}

/// `NewPublisher`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let root_ca = config.root_ca;
    METRICS.register();
    let queue = WorkQueue::new("root_ca_cert_publisher");
    let publisher = Arc::new(Publisher {
        client: context.client.clone(),
        root_ca,
        config_maps: context.informers.informer::<ConfigMap>(),
    });
    let on_config_map = queue.clone();
    publisher.config_maps.add_handler(move |event: &Event<ConfigMap>| {
        // `configMapUpdated` / `configMapDeleted`: only ours matters.
        let cm = match event {
            Event::Added(_) => return,
            Event::Updated { new, .. } => new,
            Event::Deleted { object, .. } => object,
        };
        if cm.metadata.name.as_deref() == Some(CONFIG_MAP_NAME) {
            on_config_map.add(cm.metadata.namespace.clone().unwrap_or_default());
        }
    });
    let on_namespace = queue.clone();
    context.informers.informer::<Namespace>().add_handler(move |event: &Event<Namespace>| match event {
        Event::Added(ns) => on_namespace.add(ns.metadata.name.clone().unwrap_or_default()),
        // `namespaceUpdated` skips namespaces that are not active.
        Event::Updated { new, .. } if new.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active") => {
            on_namespace.add(new.metadata.name.clone().unwrap_or_default())
        }
        _ => {}
    });
    Controller::new().with_queue(&queue, WORKERS, move |key: &String| publisher.sync(key))
}

struct Publisher {
    client: Client,
    root_ca: String,
    config_maps: Arc<Informer<ConfigMap>>,
}

impl Publisher {
    fn wanted_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(CA_KEY.to_string(), self.root_ca.clone())])
    }
}

impl Publisher {
    /// `syncNamespace`, recorded in the publisher's metrics as upstream's deferred `recordMetrics`.
    fn sync(&self, namespace: &str) -> SyncResult {
        let started = Instant::now();
        let result = self.sync_namespace(namespace);
        METRICS.record(&result, started);
        result.map_err(SyncError::from)
    }

    fn sync_namespace(&self, namespace: &str) -> Result<(), crate::client::Error> {
        let api = Api::<ConfigMap>::namespaced(&self.client, namespace);
        let Some(cached) = self.config_maps.store().get_by_name(namespace, CONFIG_MAP_NAME) else {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(CONFIG_MAP_NAME.to_string()),
                    annotations: Some(BTreeMap::from([(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string())])),
                    ..ObjectMeta::default()
                },
                data: Some(self.wanted_data()),
                ..ConfigMap::default()
            };
            return match api.create(&cm, &PostParams::default()) {
                // No retry when the namespace is gone or terminating.
                Err(e) if e.is_not_found() || e.has_status_cause("NamespaceTerminating") => Ok(()),
                Err(e) => Err(e),
                Ok(_) => Ok(()),
            };
        };
        let described = cached.metadata.annotations.as_ref().and_then(|a| a.get(DESCRIPTION_ANNOTATION));
        if cached.data.as_ref() == Some(&self.wanted_data()) && described.is_some_and(|d| !d.is_empty()) {
            return Ok(());
        }
        let mut cm = (*cached).clone();
        cm.data = Some(self.wanted_data());
        cm.metadata
            .annotations
            .get_or_insert_default()
            .insert(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string());
        api.replace(CONFIG_MAP_NAME, &cm, &PostParams::default()).map(|_| ())
    }
}

/// The help of both families: upstream's histogram has the counter's.
const SYNC_HELP: &str = "[ALPHA] Number of namespace syncs happened in root ca cert publisher.";

/// The publisher's families (upstream's `rootcacertpublisher/metrics.go`), registered when the
/// controller is created (`registerMetrics`).
static METRICS: SyncMetrics = SyncMetrics::new(
    ("root_ca_cert_publisher_sync_total", SYNC_HELP),
    ("root_ca_cert_publisher_sync_duration_seconds", SYNC_HELP),
);
