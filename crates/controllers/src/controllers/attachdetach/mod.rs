//! The attach/detach controller (`persistentvolume-attach-detach-controller`), after upstream
//! v1.36's `pkg/controller/volume/attachdetach` with the CSI volume plugin: CSI
//! PersistentVolumes whose driver requires attachment are attached to the nodes where scheduled
//! pods use them, by creating VolumeAttachment objects that the driver's external attacher
//! marks attached, and detached (the VolumeAttachment deleted) once no pod needs them there
//! and the node no longer lists them in `status.volumesInUse`. Each managed node's
//! `status.volumesAttached` lists what is attached to it. Only nodes annotated
//! `volumes.kubernetes.io/controller-managed-attach-detach` are managed.
//!
//! Upstream's concerns, one file each: the desired state of the world (`desired`), the actual
//! state (`actual`), the reconciler with its attach and detach operations (`reconciler`), the
//! node status updater (`statusupdater`), the metrics, and which volumes are attachable
//! (`volumes`, upstream's `util` and the CSI plugin). The desired-state populator and the
//! start-up population are here.

mod actual;
mod desired;
mod metrics;
mod reconciler;
mod statusupdater;
mod volumes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
use parking_lot::Mutex;

use self::actual::{ActualState, AttachState};
use self::desired::{DesiredState, PodRef};
use self::reconciler::{Operations, Reconciler, Settings};
use self::statusupdater::NodeStatusUpdater;
use self::volumes::{Lookups, node_of, pod_volumes};
use crate::apimachinery::errors::BoxError;
use crate::client;
use crate::controllers::volumeutil::{POD_PVC_INDEX, add_pod_pvc_index, is_pod_terminated};
use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `volumeutil.ControllerManagedAttachAnnotation`.
const CONTROLLER_MANAGED_ATTACH_ANNOTATION: &str = "volumes.kubernetes.io/controller-managed-attach-detach";
/// `defaultTimerConfig`.
const RECONCILER_LOOP_PERIOD: Duration = Duration::from_millis(100);
const MAX_WAIT_FOR_UNMOUNT: Duration = Duration::from_secs(6 * 60);
const POPULATOR_LOOP_SLEEP_PERIOD: Duration = Duration::from_secs(60);
const POPULATOR_LIST_PODS_RETRY_DURATION: Duration = Duration::from_secs(3 * 60);

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--attach-detach-reconcile-sync-period`.
    pub reconcile_sync_period: Duration,
    /// `--disable-attach-detach-reconcile-sync`.
    pub disable_reconcile_sync: bool,
    /// `--disable-force-detach-on-timeout`.
    pub disable_force_detach_on_timeout: bool,
}

/// Why a volume could not be looked at, a state not changed, or an attach or detach failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The claim a pod volume names is not (yet) usable, or its volume is not.
    #[error("error processing PVC {namespace:?}/{claim:?}: {source}")]
    ProcessClaim { namespace: String, claim: String, source: BoxError },
    /// The claim of a pod's generic ephemeral volume is not the pod's.
    #[error("PVC {namespace}/{claim} was not created for pod {namespace}/{pod} (pod is not owner)")]
    NotPodOwner { namespace: String, claim: String, pod: String },
    /// A node still needing volumes cannot leave the desired state.
    #[error(
        "failed to delete node {node:?} from list of nodes managed by attach/detach controller--the node still contains {volumes} volumes in its list of volumes to attach"
    )]
    NodeStillHasVolumes { node: String, volumes: usize },
    /// A pod's volume on a node the controller does not manage.
    #[error("no node with the name {node:?} exists in the list of managed nodes")]
    NodeNotManaged { node: String },
    /// The volume is not attached to the node.
    #[error("failed to set detach request time with error: volume {volume:?} is not attached to node {node:?}")]
    NotAttached { volume: String, node: String },
    /// Some nodes' `volumesAttached` could not be written.
    #[error("unable to update {failed} nodes")]
    UpdateNodes { failed: usize },
    /// The VolumeAttachment could not be created.
    #[error("csi: attacher.Attach failed: {0}")]
    CreateAttachment(#[source] client::Error),
    /// The VolumeAttachment waited for is being deleted.
    #[error("volume attachment is being deleted")]
    AttachmentDeleting,
    /// The external attacher's `attachError` or `detachError` message.
    #[error("{0}")]
    Attacher(String),
    /// The external attacher did not answer in time.
    #[error("timed out waiting for external-attacher of {driver} CSI driver to {operation} volume {handle}")]
    Timeout { driver: String, operation: &'static str, handle: String },
    /// The controller stopped while an operation waited.
    #[error("the controller stopped while waiting to {operation} volume {handle}")]
    Stopped { operation: &'static str, handle: String },
    /// The node could not be read to tell whether the volume is still in use.
    #[error("DetachVolume failed fetching node from API server: {0}")]
    FetchNode(#[source] client::Error),
    /// The node still lists the volume in `volumesInUse`.
    #[error("volume is still in use by node, according to Node status")]
    StillInUse,
    /// The volume's unique name is no CSI one.
    #[error("volumeName missing expected data")]
    MissingVolumeData,
    /// The VolumeAttachment could not be deleted.
    #[error("csi: detacher.Detach failed to delete VolumeAttachment [{name}]: {source}")]
    DeleteAttachment { name: String, source: client::Error },
    /// The attach operation failed (also its `FailedAttachVolume` Events' text).
    #[error("AttachVolume.Attach failed for volume {spec_name:?} : {source}")]
    AttachFailed { spec_name: String, source: Box<Error> },
    /// The detach operation failed.
    #[error("DetachVolume.Detach failed for volume {spec_name:?} : {source}")]
    DetachFailed { spec_name: String, source: Box<Error> },
}

/// `NewAttachDetachController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let informers = context.informers;
    let pods = informers.informer::<Pod>();
    let nodes = informers.informer::<Node>();
    let attachments = informers.informer::<VolumeAttachment>();
    // Synced before starting, as upstream's (the CSI plugin reads CSINodes on the kubelet side).
    let _ = informers.informer::<CSINode>();
    let lookups = Arc::new(Lookups {
        claims: informers.informer::<PersistentVolumeClaim>(),
        volumes: informers.informer::<PersistentVolume>(),
        drivers: informers.informer::<CSIDriver>(),
    });
    let desired = Arc::new(DesiredState::default());
    let actual = Arc::new(ActualState::default());
    let updater = NodeStatusUpdater { client: context.client.clone(), nodes: nodes.clone(), actual: actual.clone() };
    let settings = Settings {
        loop_period: RECONCILER_LOOP_PERIOD,
        sync_period: config.reconcile_sync_period,
        disable_sync: config.disable_reconcile_sync,
        disable_force_detach_on_timeout: config.disable_force_detach_on_timeout,
        max_wait_for_unmount: MAX_WAIT_FOR_UNMOUNT,
    };
    let queue = WorkQueue::new("pvcs");
    let stopping = queue.clone();
    let reconciler = Arc::new(Reconciler {
        client: context.client.clone(),
        desired: desired.clone(),
        actual: actual.clone(),
        nodes: nodes.clone(),
        attachments: attachments.clone(),
        recorder: context.recorder.clone(),
        updater,
        settings,
        operations: Operations::default(),
        last_sync: Mutex::new(Instant::now()),
        // The queue is shut down when the controller stops.
        stopping: Box::new(move || stopping.is_shutting_down()),
    });
    add_pod_pvc_index(&pods);
    let controller = Arc::new(AttachDetach {
        pods,
        nodes,
        attachments,
        lookups,
        desired,
        actual,
        reconciler,
        queue: queue.clone(),
        started: AtomicBool::new(false),
        last_pod_list: Mutex::new(None),
    });
    controller.watch();
    let (looping, populating) = (controller.clone(), controller.clone());
    let loop_period = controller.reconciler.settings.loop_period;
    Controller::new()
        .with_queue(&queue, 1, move |key: &String| controller.sync_pvc_by_key(key))
        .every("reconciler", loop_period, move || looping.reconcile_loop())
        .every("desired-state-populator", POPULATOR_LOOP_SLEEP_PERIOD, move || populating.populator_loop())
}

/// Upstream's `attachDetachController`.
struct AttachDetach {
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    attachments: Arc<Informer<VolumeAttachment>>,
    lookups: Arc<Lookups>,
    desired: Arc<DesiredState>,
    actual: Arc<ActualState>,
    reconciler: Arc<Reconciler>,
    queue: WorkQueue<String>,
    /// The states were populated from the caches (the first loop after they synced).
    started: AtomicBool,
    /// When the populator last listed all pods.
    last_pod_list: Mutex<Option<Instant>>,
}

fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

impl AttachDetach {
    fn watch(self: &Arc<Self>) {
        let this = self.clone();
        self.pods.add_handler(move |event: &Event<Pod>| match event {
            Event::Added(pod) | Event::Updated { new: pod, .. } => this.pod_add(pod),
            // A deletion seen only in a relist counts too (v1.36 unwraps the tombstone, which
            // v1.33 ignored).
            Event::Deleted { object, .. } => this.process_pod_volumes(object, false),
        });
        let this = self.clone();
        self.nodes.add_handler(move |event: &Event<Node>| match event {
            Event::Added(node) => this.node_add(node),
            Event::Updated { new, .. } => this.node_update(new),
            Event::Deleted { object, .. } => this.node_delete(object),
        });
        let this = self.clone();
        self.lookups.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| match event {
            Event::Added(claim) | Event::Updated { new: claim, .. } => this.queue.add(object_key(&claim.metadata)),
            Event::Deleted { .. } => {}
        });
    }

    /// `podAdd` / `podUpdate`: a scheduled pod's volumes are added, or removed once it
    /// terminated (`DetermineVolumeAction`).
    fn pod_add(&self, pod: &Pod) {
        if node_of(pod).is_empty() {
            return;
        }
        let add = pod_volumes(pod).is_empty() || !is_pod_terminated(pod);
        self.process_pod_volumes(pod, add);
    }

    /// `ProcessPodVolumes`.
    fn process_pod_volumes(&self, pod: &Pod, add: bool) {
        let node = node_of(pod);
        if pod_volumes(pod).is_empty() || node.is_empty() {
            return;
        }
        if !self.desired.node_exists(node) {
            log::debug!(
                "Skipping processing of pod, it is scheduled to node which is not managed by the controller node={node:?} pod={:?}",
                object_key(&pod.metadata)
            );
            return;
        }
        for volume in pod_volumes(pod) {
            let spec = match self.lookups.attachable(pod, volume) {
                Ok(Some(spec)) => spec,
                Ok(None) => continue,
                Err(e) => {
                    log::trace!(
                        "Error processing volume {:?} for pod {:?}: {e}",
                        volume.name,
                        object_key(&pod.metadata)
                    );
                    continue;
                }
            };
            if add {
                if let Err(e) = self.desired.add_pod(pod_ref(pod), &spec, node) {
                    log::trace!("Failed to add volume for pod to desiredStateOfWorld: {e}");
                }
            } else {
                self.desired.delete_pod(pod.metadata.uid.as_deref().unwrap_or_default(), &spec.unique_name(), node);
            }
        }
    }

    /// `nodeAdd`: also flags the node's status for a write (a re-created Node has no
    /// `volumesAttached`).
    fn node_add(&self, node: &Node) {
        self.node_update(node);
        self.actual.set_node_status_update_needed(node.metadata.name.as_deref().unwrap_or_default());
    }

    /// `nodeUpdate`.
    fn node_update(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.add_node_to_dswp(node);
        self.actual.set_volumes_mounted_by_node(&volumes_in_use(node), name);
    }

    /// `nodeDelete`.
    fn node_delete(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Err(e) = self.desired.delete_node(name) {
            log::info!("Error removing node from desired-state-of-world node={name:?} err={e}");
        }
        self.actual.set_volumes_mounted_by_node(&volumes_in_use(node), name);
    }

    /// `addNodeToDswp`: a node with the annotation (any value) is managed.
    fn add_node_to_dswp(&self, node: &Node) {
        let annotations = node.metadata.annotations.as_ref();
        if annotations.is_some_and(|a| a.contains_key(CONTROLLER_MANAGED_ATTACH_ANNOTATION)) {
            self.desired.add_node(node.metadata.name.as_deref().unwrap_or_default());
        }
    }

    /// `syncPVCByKey`: a claim that became Bound brings its running pods' volumes in.
    fn sync_pvc_by_key(&self, key: &str) -> SyncResult {
        let Some(claim) = self.lookups.claims.store().get(key) else { return Ok(()) };
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        let volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default();
        if phase != Some("Bound") || volume.is_empty() {
            return Ok(());
        }
        for pod in self.pods.store().by_index(POD_PVC_INDEX, key) {
            if node_of(&pod).is_empty() || is_pod_terminated(&pod) {
                continue;
            }
            self.process_pod_volumes(&pod, true);
        }
        Ok(())
    }

    /// The reconciler's loop; the first one populates both states (upstream's `Run` does it
    /// once the caches have synced).
    fn reconcile_loop(&self) {
        if !self.started.swap(true, Ordering::SeqCst) {
            log::info!("Starting attach detach controller");
            self.populate_actual_state();
            self.populate_desired_state();
            metrics::register(metrics::StateSources {
                desired: self.desired.clone(),
                actual: self.actual.clone(),
                pods: self.pods.clone(),
                lookups: self.lookups.clone(),
            });
        }
        self.reconciler.run_once();
    }

    /// `populateActualStateOfWorld`: what nodes report attached, and what VolumeAttachments
    /// say may be.
    fn populate_actual_state(&self) {
        for node in self.nodes.store().list() {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let attached = node.status.as_ref().and_then(|s| s.volumes_attached.as_ref());
            for volume in attached.into_iter().flatten() {
                self.actual.mark_attached(&volume.name, None, name, &volume.device_path);
            }
            self.actual.set_volumes_mounted_by_node(&volumes_in_use(&node), name);
            self.add_node_to_dswp(&node);
        }
        self.process_volume_attachments();
    }

    /// `processVolumeAttachments`: a VolumeAttachment of a volume not known attached makes it
    /// uncertain, so that the reconciler attaches it if needed and detaches it otherwise.
    fn process_volume_attachments(&self) {
        for attachment in self.attachments.store().list() {
            let node = &attachment.spec.node_name;
            let Some(pv_name) = attachment.spec.source.persistent_volume_name.as_deref() else {
                log::info!("Skipping the va as its pvName is nil node={node:?} vaName={:?}", attachment.metadata.name);
                continue;
            };
            let Some(pv) = self.lookups.volumes.store().get(pv_name) else {
                log::error!("Unable to lookup pv object PV={pv_name:?}");
                continue;
            };
            let Some(spec) = self.lookups.spec_of(&pv) else {
                log::info!(
                    "Skipping processing the volume on node, no attacher interface found node={node:?} PV={pv_name:?}"
                );
                continue;
            };
            let name = spec.unique_name();
            if self.actual.attach_state(&name, node) == AttachState::Detached {
                log::info!(
                    "Marking volume attachment as uncertain as volume is not attached node={node:?} volumeName={name:?}"
                );
                self.actual.mark_uncertain(&name, Some(spec), node);
            }
        }
    }

    /// `populateDesiredStateOfWorld`: every pod's volumes, and their specs for the volumes
    /// already attached.
    /// The pods are read one at a time: the packed cache unpacks each, and all of them at once
    /// were the controller manager's peak memory after a restart.
    fn populate_desired_state(&self) {
        // Only pods naming a claim can have an attachable volume (`attachable`).
        self.pods.store().for_each_indexed(POD_PVC_INDEX, |pod| {
            self.pod_add(&pod);
            let node = node_of(&pod);
            for volume in pod_volumes(&pod) {
                let Ok(Some(spec)) = self.lookups.attachable(&pod, volume) else { continue };
                let name = spec.unique_name();
                if self.actual.attach_state(&name, node) != AttachState::Attached {
                    continue;
                }
                match self.device_path(&name, node) {
                    Some(path) => self.actual.mark_attached(&name, Some(spec), node, &path),
                    None => log::error!("Failed to find device path: Volume {name} not found on node {node}"),
                }
            }
        });
    }

    /// `getNodeVolumeDevicePath`.
    fn device_path(&self, volume: &str, node: &str) -> Option<String> {
        let node = self.nodes.store().get(node)?;
        let attached = node.status.as_ref().and_then(|s| s.volumes_attached.as_ref())?;
        attached.iter().find(|v| v.name == volume).map(|v| v.device_path.clone())
    }

    /// The desired state of world populator's loop (`populatorLoop`): pods gone or
    /// terminated leave; every `POPULATOR_LIST_PODS_RETRY_DURATION` all pods are added again.
    fn populator_loop(&self) {
        self.find_and_remove_deleted_pods();
        let mut last = self.last_pod_list.lock();
        if last.is_some_and(|at| at.elapsed() < POPULATOR_LIST_PODS_RETRY_DURATION) {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        self.pods.store().for_each_indexed(POD_PVC_INDEX, |pod| {
            if !node_of(&pod).is_empty() && !is_pod_terminated(&pod) {
                self.process_pod_volumes(&pod, true);
            }
        });
    }

    /// `findAndRemoveDeletedPods`.
    fn find_and_remove_deleted_pods(&self) {
        for (pod, volume, node) in self.desired.pods() {
            let current = self.pods.store().get(&format!("{}/{}", pod.namespace, pod.name));
            let keep = current.as_deref().is_some_and(|p| {
                p.metadata.uid.as_deref() == Some(pod.uid.as_str()) && node_of(p) == node && !is_pod_terminated(p)
            });
            if !keep {
                log::debug!(
                    "Removing pod from dsw because it does not exist in pod informer pod={}/{}",
                    pod.namespace,
                    pod.name
                );
                self.desired.delete_pod(&pod.uid, &volume, &node);
            }
        }
    }
}

/// The node's `status.volumesInUse`.
fn volumes_in_use(node: &Node) -> Vec<String> {
    node.status.as_ref().and_then(|s| s.volumes_in_use.clone()).unwrap_or_default()
}
