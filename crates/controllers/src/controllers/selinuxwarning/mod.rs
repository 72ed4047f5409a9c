//! `selinux-warning-controller`, after upstream v1.36's `pkg/controller/volume/selinuxwarning`
//! (`selinux_warning_controller.go`, `metrics.go`): when two pods may use the same volume with
//! different SELinux labels or SELinux change policies, it records a Normal Event on each
//! (`SELinuxLabelConflict`, `SELinuxChangePolicyConflict`) and exports the conflict as
//! `selinux_warning_controller_selinux_volume_conflict`. It changes no object. It looks at every
//! pod, scheduled or not; a terminal or deleted pod's volumes are forgotten.
//!
//! The queue holds pods; a claim being bound, a volume being bound and a CSIDriver's
//! `seLinuxMount` changing requeue the pods concerned.

pub mod cache;
pub mod volumes;

use std::sync::{Arc, OnceLock, Weak};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSIDriver;
use parking_lot::Mutex;

use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::pod::{PodFields, phase};
use crate::controllers::volumeutil::{self, POD_PVC_INDEX, add_pod_pvc_index};
use crate::metrics::{Collector, GaugeVec};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;
use cache::{Conflict, PodKey, VolumeCache};
use volumes::{Lookups, MOUNT_OPTION, MultipleLabels, Plugin, RECURSIVE, VolumeSpec, mounted_volumes};

/// Why a pod's volumes could not all be recorded (the pod is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No plugin the controller knows supports the volume.
    #[error("no volume plugin matched")]
    NoPlugin,
    /// Several plugins support the volume.
    #[error("multiple volume plugins matched: {names}")]
    MultiplePlugins {
        /// Their names, comma-separated.
        names: String,
    },
    /// The plugin gives the volume no name.
    #[error("failed to GetVolumeName from volumePlugin for volumeSpec {volume:?}")]
    NoVolumeName {
        /// The volume spec's name.
        volume: String,
    },
    /// The volume's unique name could not be made.
    #[error("failed to get unique volume name for volume {volume:?}: {source}")]
    UniqueName {
        /// The volume spec's name.
        volume: String,
        /// Why.
        source: Box<Error>,
    },
    /// The pod's claim, or its volume, is not usable (yet).
    #[error("error processing PVC {namespace:?}/{claim:?}: {source}")]
    ProcessingClaim {
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// Why.
        source: Box<volumeutil::Error>,
    },
    /// A generic ephemeral volume's claim belongs to another pod.
    #[error("PVC {namespace}/{claim} was not created for pod {namespace}/{pod} (pod is not owner)")]
    NotOwner {
        /// The namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// The pod.
        pod: String,
    },
    /// The containers mount the volume with different labels.
    #[error("{0}")]
    MultipleLabels(#[from] MultipleLabels),
    /// Several volumes failed (`utilerrors.NewAggregate`): `[a, b]`.
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
}

/// `startSELinuxWarningController` runs one worker.
const WORKERS: usize = 1;

/// The controller's feature gates.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// SELinuxMountReadWriteOncePod: without it no volume is mounted with a context, so every
    /// pod counts as relabelling recursively with an empty label.
    pub mount_rwop: bool,
    /// SELinuxChangePolicy: whether a pod's `seLinuxChangePolicy: Recursive` opts it out of
    /// context mounts (the controller runs only with it on).
    pub change_policy: bool,
}

/// `NewController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue: WorkQueue<PodKey> = WorkQueue::new("selinux_warning");
    let pods: Arc<Informer<Pod>> = context.informers.informer();
    add_pod_pvc_index(&pods);
    let lookups = Lookups {
        claims: context.informers.informer(),
        volumes: context.informers.informer(),
        drivers: context.informers.informer(),
        mount_rwop: config.mount_rwop,
    };
    let controller = Arc::new(SELinuxWarning {
        pods,
        lookups,
        cache: Arc::new(VolumeCache::default()),
        recorder: context.recorder.clone(),
        change_policy: config.change_policy,
    });
    controller.add_handlers(&queue);
    register_metrics(&controller.cache);
    let worker = controller.clone();
    Controller::new().with_queue(&queue, WORKERS, move |key: &PodKey| worker.sync(key))
}

struct SELinuxWarning {
    pods: Arc<Informer<Pod>>,
    lookups: Lookups,
    cache: Arc<VolumeCache>,
    recorder: EventRecorder,
    change_policy: bool,
}

fn pod_key(pod: &Pod) -> PodKey {
    PodKey {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
    }
}

fn is_terminal(pod: &impl PodFields) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

/// The pods that name the claim `namespace/name` (`enqueueAllPodsForPVC`).
fn enqueue_pods_of_claim(pods: &Informer<Pod>, queue: &WorkQueue<PodKey>, namespace: &str, name: &str) {
    for pod in pods.store().by_index(POD_PVC_INDEX, &format!("{namespace}/{name}")) {
        queue.add(pod_key(&pod));
    }
}

impl SELinuxWarning {
    fn add_handlers(self: &Arc<Self>, queue: &WorkQueue<PodKey>) {
        let on_pod = queue.clone();
        self.pods.add_handler(move |event: &Event<Pod>| match event {
            Event::Added(pod) | Event::Deleted { object: pod, .. } => on_pod.add(pod_key(pod)),
            // `updatePod`: the spec fields that matter are immutable; only a pod reaching its
            // final phase (its volumes being unmounted) matters.
            Event::Updated { old, new } => {
                if phase(old) != phase(new) && is_terminal(new) {
                    on_pod.add(pod_key(new));
                }
            }
        });

        let (pods, on_claim) = (self.pods.clone(), queue.clone());
        self.lookups.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| {
            let volume_name = |c: &PersistentVolumeClaim| c.spec.as_ref().and_then(|s| s.volume_name.clone());
            let claim = match event {
                // `addPVC`: unbound claims are ignored.
                Event::Added(claim) if volume_name(claim).is_some_and(|v| !v.is_empty()) => claim,
                // `updatePVC`: the claim was just bound.
                Event::Updated { old, new } if volume_name(old) != volume_name(new) => new,
                _ => return,
            };
            let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
            enqueue_pods_of_claim(&pods, &on_claim, namespace, claim.metadata.name.as_deref().unwrap_or_default());
        });

        let (pods, on_volume) = (self.pods.clone(), queue.clone());
        self.lookups.volumes.add_handler(move |event: &Event<PersistentVolume>| {
            let claim_ref = |pv: &PersistentVolume| pv.spec.as_ref().and_then(|s| s.claim_ref.clone());
            let (old, new) = match event {
                Event::Added(pv) => (None, pv),
                Event::Updated { old, new } => (Some(old), new),
                Event::Deleted { .. } => return,
            };
            // Unbound volumes, or a binding not complete yet, are ignored.
            let Some(bound) = claim_ref(new).filter(|r| r.uid.as_deref().is_some_and(|u| !u.is_empty())) else {
                return;
            };
            // `updatePV`: only a volume just bound (or bound to another claim).
            if let Some(old) = old
                && claim_ref(old).is_some_and(|r| r.uid == bound.uid)
            {
                return;
            }
            let (namespace, name) = (bound.namespace.unwrap_or_default(), bound.name.unwrap_or_default());
            enqueue_pods_of_claim(&pods, &on_volume, &namespace, &name);
        });

        // A CSIDriver's `seLinuxMount` decides whether its volumes are mounted with a context.
        let (cache, on_driver) = (self.cache.clone(), queue.clone());
        self.lookups.drivers.add_handler(move |event: &Event<CSIDriver>| {
            let se_linux_mount = |d: &CSIDriver| d.spec.se_linux_mount.unwrap_or(false);
            let driver = match event {
                Event::Added(driver) => driver,
                Event::Updated { old, new } if se_linux_mount(old) != se_linux_mount(new) => new,
                Event::Deleted { object, .. } if se_linux_mount(object) => object,
                _ => return,
            };
            for pod in cache.pods_for_csi_driver(driver.metadata.name.as_deref().unwrap_or_default()) {
                on_driver.add(pod);
            }
        });
    }

    /// `sync`: a deleted or terminal pod's volumes are forgotten, any other pod's recorded.
    fn sync(&self, key: &PodKey) -> SyncResult {
        // Whether the pod is gone or terminal is read from its summary: the pods a namespace
        // deletion or a scale-down ends are forgotten without unpacking any.
        let store = self.pods.store();
        let live = store.summary_by_name(&key.namespace, &key.name).filter(|s| !is_terminal(&**s));
        match live.and_then(|_| store.get_by_name(&key.namespace, &key.name)) {
            Some(pod) => self.sync_pod(&pod),
            _ => {
                log::debug!("Deleting pod key={key}");
                self.cache.delete_pod(key);
                Ok(())
            }
        }
    }

    /// `syncPod`: each mounted volume of a known plugin is added to the cache with the label
    /// and change policy the pod uses it with; errors are collected and the pod retried.
    fn sync_pod(&self, pod: &Pod) -> SyncResult {
        let key = pod_key(pod);
        log::debug!("Syncing pod pod={key}");
        let mut errors = Vec::new();
        let pod_volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
        let specs: Vec<(&str, VolumeSpec)> = pod_volumes
            .iter()
            .filter_map(|volume| match self.lookups.volume_spec(pod, volume) {
                Ok(spec) => Some((volume.name.as_str(), spec)),
                // Frequent while the claim or the volume does not exist yet.
                Err(e) => {
                    errors.push(e);
                    None
                }
            })
            .collect();
        let change_policy = self.pod_change_policy(pod);
        for (mount, options) in mounted_volumes(pod) {
            let Some((_, spec)) = specs.iter().find(|(name, _)| *name == mount) else {
                log::debug!("skipping not found volume pod={key} volume={mount}");
                continue;
            };
            let info = match self.lookups.mount_label(spec, &options, change_policy) {
                Ok(info) => info,
                Err(e) => {
                    let message =
                        format!("Volume {mount:?} is mounted twice with different SELinux labels inside this pod");
                    self.recorder.event_for(pod, EventType::Warning, "MultipleSELinuxLabels", &message);
                    log::debug!("failed to get SELinux label pod={key} volume={mount}: {e}");
                    errors.push(Error::from(e));
                    continue;
                }
            };
            // The label kubelet would mount with; empty for a pod relabelling recursively.
            if let Err(e) = self.sync_volume(pod, spec, &info.mount_label, info.plugin_supports_context_mount) {
                errors.push(e);
            }
        }
        Aggregate::from_errors(errors).map_err(|e| SyncError::of(Error::from(e)))
    }

    /// The pod's `seLinuxChangePolicy`, when the gate lets it count.
    fn pod_change_policy<'a>(&self, pod: &'a Pod) -> Option<&'a str> {
        let context = pod.spec.as_ref()?.security_context.as_ref()?;
        context.se_linux_change_policy.as_deref().filter(|_| self.change_policy)
    }

    /// `syncVolume`.
    fn sync_volume(
        &self,
        pod: &Pod,
        spec: &VolumeSpec,
        label: &str,
        supports_context_mount: bool,
    ) -> Result<(), Error> {
        // The controller knows only the plugins that matter for SELinux.
        let plugin = match Plugin::for_spec(spec) {
            Ok(plugin) => plugin,
            Err(e) => {
                log::debug!("Skipping volume of unknown plugin volume={}: {e}", spec.name());
                return Ok(());
            }
        };
        let unique_name = plugin
            .unique_volume_name(spec)
            .map_err(|e| Error::UniqueName { volume: spec.name().to_string(), source: Box::new(e) })?;
        let mut change_policy = pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
            .and_then(|c| c.se_linux_change_policy.as_deref())
            .unwrap_or(MOUNT_OPTION);
        // A volume that cannot be mounted with a context, or a pod without a label, is
        // relabelled recursively whatever the pod asks for.
        if !supports_context_mount || label.is_empty() {
            change_policy = RECURSIVE;
        }
        let csi_driver = spec.csi_driver().unwrap_or_default();
        let key = pod_key(pod);
        log::debug!(
            "Syncing pod volume pod={key} volume={} label={label:?} uniqueVolumeName={unique_name} \
             changePolicy={change_policy} csiDriver={csi_driver:?}",
            spec.name()
        );
        let conflicts = self.cache.add_volume(&unique_name, &key, label, change_policy, csi_driver);
        self.report_conflict_events(&conflicts);
        Ok(())
    }

    /// `reportConflictEvents`: one Normal Event per conflict on its pod; a pod gone since
    /// resolved its conflicts, and the remaining ones are not reported either (as upstream).
    fn report_conflict_events(&self, conflicts: &[Conflict]) {
        for conflict in conflicts {
            let Some(pod) = self.pods.store().get_by_name(&conflict.pod.namespace, &conflict.pod.name) else {
                log::debug!("failed to get first pod for event pod={}", conflict.pod);
                return;
            };
            self.recorder.event_for(&*pod, EventType::Normal, conflict.event_reason, &conflict.event_message());
        }
    }
}

/// The conflict collector (`RegisterMetrics`, registered once per process). It reads the
/// caches of the controllers running in the process: one in a controller manager, as upstream's
/// (which keeps the first one's); tests run several side by side.
struct ConflictCollector {
    caches: Mutex<Vec<Weak<VolumeCache>>>,
}

fn register_metrics(cache: &Arc<VolumeCache>) {
    static COLLECTOR: OnceLock<Arc<ConflictCollector>> = OnceLock::new();
    let collector = crate::metrics::registered(&COLLECTOR, || ConflictCollector { caches: Mutex::new(Vec::new()) });
    let mut caches = collector.caches.lock();
    caches.retain(|c| c.strong_count() > 0);
    caches.push(Arc::downgrade(cache));
}

impl Collector for ConflictCollector {
    /// `CollectWithStability`: one sample of 1 per active conflict.
    fn write_to(&self, out: &mut String) {
        let caches: Vec<Arc<VolumeCache>> = self.caches.lock().iter().filter_map(Weak::upgrade).collect();
        if caches.is_empty() {
            return;
        }
        let family = conflict_family();
        for conflict in caches.iter().flat_map(|cache| cache.conflicts()) {
            family.set(&conflict_labels(&conflict), 1.0);
        }
        family.write_to(out);
    }
}

fn conflict_family() -> GaugeVec {
    GaugeVec::gauge(
        "selinux_warning_controller_selinux_volume_conflict",
        "[ALPHA] Conflict between two Pods using the same volume",
        &["property", "pod1_namespace", "pod1_name", "pod1_value", "pod2_namespace", "pod2_name", "pod2_value"],
    )
}

fn conflict_labels(conflict: &Conflict) -> [&str; 7] {
    [
        conflict.property_name,
        &conflict.pod.namespace,
        &conflict.pod.name,
        &conflict.property_value,
        &conflict.other_pod.namespace,
        &conflict.other_pod.name,
        &conflict.other_property_value,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_exported_one_sample_each() {
        let cache = VolumeCache::default();
        let key = |name: &str| PodKey { namespace: "ns".into(), name: name.into() };
        cache.add_volume("vol", &key("a"), ":::s0:c1", MOUNT_OPTION, "");
        cache.add_volume("vol", &key("b"), ":::s0:c2", MOUNT_OPTION, "");
        let family = conflict_family();
        for conflict in cache.conflicts() {
            family.set(&conflict_labels(&conflict), 1.0);
        }
        let mut out = String::new();
        family.write_to(&mut out);
        assert!(
            out.contains(
                "selinux_warning_controller_selinux_volume_conflict{pod1_name=\"a\",pod1_namespace=\"ns\",\
                 pod1_value=\":::s0:c1\",pod2_name=\"b\",pod2_namespace=\"ns\",\
                 pod2_value=\":::s0:c2\",property=\"SELinuxLabel\"} 1"
            ),
            "{out}"
        );
        assert_eq!(out.lines().filter(|l| !l.starts_with('#')).count(), 2, "{out}");
    }
}
