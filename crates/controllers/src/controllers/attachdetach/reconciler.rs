//! The reconciler (upstream's `reconciler/reconciler.go`) and the operations it starts (the
//! operation executor's attach and detach with the CSI attacher, `pkg/volume/csi`): every loop
//! period it detaches what no pod needs (once the node no longer uses it), attaches what pods
//! need, and writes the nodes' `volumesAttached`; every sync period it checks that attached
//! volumes still have their VolumeAttachment.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec};
use parking_lot::Mutex;

use super::Error;
use super::actual::{ActualState, AttachState, Attachment};
use super::desired::{DesiredState, PodRef, VolumeToAttach};
use super::metrics::{FORCE_DETACH_REASON_OUT_OF_SERVICE, FORCE_DETACH_REASON_TIMEOUT, forced_detaches};
use super::statusupdater::NodeStatusUpdater;
use super::volumes::{attachment_name, split_unique_name};
use crate::client::{Api, Client, DeleteParams, PostParams};
use crate::controllers::nodeutil::{is_node_ready, taint_key_exists};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::Informer;

/// `v1.TaintNodeOutOfService`.
const TAINT_NODE_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// The CSI attacher's `csiTimeout`: how long an attach or detach waits for the external attacher.
const CSI_TIMEOUT: Duration = Duration::from_secs(120);
/// How often an operation looks at the VolumeAttachment it waits for.
const POLL: Duration = Duration::from_millis(100);
/// `exponentialbackoff`: the first and the longest wait after a failed operation.
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(122);

/// What the reconciler is configured with.
pub struct Settings {
    pub loop_period: Duration,
    pub sync_period: Duration,
    pub disable_sync: bool,
    pub disable_force_detach_on_timeout: bool,
    pub max_wait_for_unmount: Duration,
}

pub struct Reconciler {
    pub client: Client,
    pub desired: Arc<DesiredState>,
    pub actual: Arc<ActualState>,
    pub nodes: Arc<Informer<Node>>,
    pub attachments: Arc<Informer<VolumeAttachment>>,
    pub recorder: EventRecorder,
    pub updater: NodeStatusUpdater,
    pub settings: Settings,
    pub operations: Operations,
    pub last_sync: Mutex<Instant>,
    /// Whether the controller is stopping: operations stop waiting (upstream's end with the
    /// process).
    pub stopping: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Reconciler {
    /// `reconciliationLoopFunc`: one loop, with the sync when due.
    pub fn run_once(self: &Arc<Self>) {
        self.reconcile();
        if self.settings.disable_sync {
            log::trace!(
                "Skipping reconciling attached volumes still attached since it is disabled via the command line"
            );
        } else if self.settings.sync_period < Duration::from_secs(1) {
            log::trace!(
                "Skipping reconciling attached volumes still attached since it is set to less than one second via the command line"
            );
        } else if self.last_sync.lock().elapsed() > self.settings.sync_period {
            log::trace!("Starting reconciling attached volumes still attached");
            self.sync_states();
            *self.last_sync.lock() = Instant::now();
        }
    }

    /// `reconcile`: detaches first (a pod moved to another node frees its volume), then
    /// attaches, then writes node statuses.
    fn reconcile(self: &Arc<Self>) {
        for attached in self.actual.attached_volumes() {
            if !self.desired.volume_exists(&attached.volume, &attached.node) {
                self.maybe_detach(&attached);
            }
        }
        self.attach_desired_volumes();
        if let Err(e) = self.updater.update_node_statuses() {
            // Go's `%v` of the error (this log line quoted the text).
            log::info!("UpdateNodeStatuses failed err={:?}", e.to_string());
        }
    }

    /// The detach half of `reconcile` for one attachment no pod needs.
    fn maybe_detach(self: &Arc<Self>, attached: &Attachment) {
        let (volume, node) = (attached.volume.as_str(), attached.node.as_str());
        let key = operation_key(volume, node, attached.spec.as_ref().is_some_and(|s| s.multi_attach));
        if !self.operations.can_start(&key) {
            return;
        }
        if self.actual.attach_state(volume, node) == AttachState::Detached {
            return;
        }
        let elapsed = match self.actual.set_detach_request_time(volume, node) {
            Ok(elapsed) => elapsed,
            Err(e) => {
                log::error!(
                    "Cannot trigger detach because it fails to set detach request time with error err={:?}",
                    e.to_string()
                );
                return;
            }
        };
        let expired = elapsed > self.settings.max_wait_for_unmount;
        let node_object = self.nodes.store().get(node);
        let healthy = node_object.as_deref().is_some_and(is_node_ready);
        let force_timeout = expired && !self.settings.disable_force_detach_on_timeout;
        let force = !healthy && force_timeout;
        let out_of_service = node_object.as_deref().is_some_and(|n| {
            taint_key_exists(n.spec.as_ref().and_then(|s| s.taints.as_ref()), TAINT_NODE_OUT_OF_SERVICE)
        });
        if attached.mounted_by_node && !force && !out_of_service {
            log::trace!("Cannot detach volume because it is still mounted node={node:?} volumeName={volume:?}");
            return;
        }
        self.actual.remove_from_report(volume, node);
        if let Err(e) = self.updater.update_node_status_for_node(node) {
            log::error!(
                "UpdateNodeStatusForNode failed while attempting to report volume as attached node={node:?} volumeName={volume:?} err={e}"
            );
            self.actual.add_to_report(volume, node);
            return;
        }
        let verify_safe = !(force_timeout || out_of_service);
        let this = self.clone();
        let detaching = attached.clone();
        self.operations.start(key, move || this.detach(&detaching, verify_safe));
        if verify_safe {
            log::info!("attacherDetacher.DetachVolume started node={node:?} volumeName={volume:?}");
        } else if force_timeout {
            forced_detaches().inc(&[FORCE_DETACH_REASON_TIMEOUT]);
            log::info!(
                "attacherDetacher.DetachVolume started: this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching duration={:?} node={node:?} volumeName={volume:?}",
                self.settings.max_wait_for_unmount
            );
        } else {
            forced_detaches().inc(&[FORCE_DETACH_REASON_OUT_OF_SERVICE]);
            log::info!(
                "attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching node={node:?} volumeName={volume:?}"
            );
        }
    }

    /// `attachDesiredVolumes`.
    fn attach_desired_volumes(self: &Arc<Self>) {
        for wanted in self.desired.volumes_to_attach() {
            let key = operation_key(&wanted.volume, &wanted.node, wanted.spec.multi_attach);
            if !self.operations.can_start(&key) {
                continue;
            }
            if self.actual.attach_state(&wanted.volume, &wanted.node) == AttachState::Attached {
                self.actual.reset_detach_request_time(&wanted.volume, &wanted.node);
                continue;
            }
            if !wanted.spec.multi_attach {
                let nodes = self.actual.nodes_for_attached_volume(&wanted.volume);
                if !nodes.is_empty() {
                    if !wanted.multi_attach_error_reported {
                        self.report_multi_attach_error(&wanted, &nodes);
                        self.desired.set_multi_attach_error(&wanted.volume, &wanted.node);
                    }
                    continue;
                }
            }
            let pods: Vec<String> = wanted.pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect();
            let this = self.clone();
            let attaching = wanted.clone();
            self.operations.start(key, move || this.attach(&attaching));
            log::info!(
                "attacherDetacher.AttachVolume started volumeName={:?} nodeName={:?} scheduledPods={pods:?}",
                wanted.volume,
                wanted.node
            );
        }
    }

    /// `reportMultiAttachError`: a Warning on each pod waiting for a volume that is attached
    /// elsewhere.
    fn report_multi_attach_error(&self, wanted: &VolumeToAttach, nodes: &[String]) {
        let others: Vec<String> = nodes.iter().filter(|n| **n != wanted.node).cloned().collect();
        let users = self.desired.volume_pods_on_nodes(&others, &wanted.volume);
        for pod in &wanted.pods {
            let detail = if users.is_empty() {
                "Volume is already exclusively attached to one node and can't be attached to another".to_string()
            } else {
                multi_attach_detail(&users, &pod.namespace)
            };
            let message = simple_msg("Multi-Attach error", &detail, &wanted.spec.name);
            self.recorder.event(&pod_reference(pod), EventType::Warning, "FailedAttachVolume", &message);
        }
        log::info!(
            "Multi-Attach error: volume is already exclusively attached and can't be attached to another node attachedTo={others:?} volume={:?}",
            wanted.volume
        );
    }

    /// The attach operation (`GenerateAttachVolumeFunc` with the CSI attacher's `Attach`). As
    /// v1.36, the volume is marked attached before the `SuccessfulAttachVolume` Events (v1.33
    /// recorded them first).
    fn attach(&self, wanted: &VolumeToAttach) -> Result<(), Error> {
        match self.attach_volume(wanted) {
            Ok(()) => {
                self.actual.mark_attached(&wanted.volume, Some(wanted.spec.clone()), &wanted.node, "");
                let message = simple_msg("AttachVolume.Attach succeeded", "", &wanted.spec.name);
                for pod in &wanted.pods {
                    self.recorder.event(&pod_reference(pod), EventType::Normal, "SuccessfulAttachVolume", &message);
                }
                log::info!("{message}(UniqueName: {:?}) from node {:?} ", wanted.volume, wanted.node);
                Ok(())
            }
            Err(e) => {
                self.actual.mark_uncertain(&wanted.volume, Some(wanted.spec.clone()), &wanted.node);
                let error = Error::AttachFailed { spec_name: wanted.spec.name.clone(), source: Box::new(e) };
                let message = error.to_string();
                for pod in &wanted.pods {
                    self.recorder.event(&pod_reference(pod), EventType::Warning, "FailedAttachVolume", &message);
                }
                Err(error)
            }
        }
    }

    /// `csiAttacher.Attach`: the VolumeAttachment created unless it exists, then waited for.
    fn attach_volume(&self, wanted: &VolumeToAttach) -> Result<(), Error> {
        let spec = &wanted.spec;
        let name = attachment_name(&spec.handle, &spec.driver, &wanted.node);
        if self.attachments.store().get(&name).is_none() {
            let attachment = VolumeAttachment {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                spec: VolumeAttachmentSpec {
                    attacher: spec.driver.clone(),
                    node_name: wanted.node.clone(),
                    source: VolumeAttachmentSource {
                        persistent_volume_name: Some(spec.name.clone()),
                        ..Default::default()
                    },
                },
                status: None,
            };
            match Api::<VolumeAttachment>::cluster(&self.client).create(&attachment, &PostParams::default()) {
                Ok(_) => log::debug!("csi: attachment [{name}] for volume [{}] created successfully", spec.handle),
                Err(e) if e.is_already_exists() => {
                    log::debug!(
                        "csi: attachment [{name}] for volume [{}] already exists (will not be recreated)",
                        spec.handle
                    )
                }
                Err(e) => return Err(Error::CreateAttachment(e)),
            }
        }
        self.wait(&spec.driver, &spec.handle, "attach", || {
            let found = self.attachments.store().get(&name);
            verify_attachment_status(found.as_deref())
        })
    }

    /// The detach operation (`GenerateDetachVolumeFunc` with the CSI detacher's `Detach`).
    fn detach(&self, attached: &Attachment, verify_safe: bool) -> Result<(), Error> {
        let result = if verify_safe { self.verify_safe_to_detach(attached) } else { Ok(()) };
        match result.and_then(|()| self.detach_volume(attached)) {
            Ok(()) => {
                log::info!(
                    "DetachVolume.Detach succeeded for volume {:?} (UniqueName: {:?}) from node {:?} ",
                    spec_name(attached),
                    attached.volume,
                    attached.node
                );
                self.actual.mark_detached(&attached.volume, &attached.node);
                Ok(())
            }
            Err(e) => {
                self.actual.mark_uncertain(&attached.volume, attached.spec.clone(), &attached.node);
                Err(Error::DetachFailed { spec_name: spec_name(attached), source: Box::new(e) })
            }
        }
    }

    /// `verifyVolumeIsSafeToDetach`: the node (read fresh) must not list the volume in use.
    fn verify_safe_to_detach(&self, attached: &Attachment) -> Result<(), Error> {
        let node = match Api::<Node>::cluster(&self.client).get(&attached.node) {
            Ok(node) => node,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(Error::FetchNode(e)),
        };
        let in_use = node.status.as_ref().and_then(|s| s.volumes_in_use.as_ref());
        if in_use.into_iter().flatten().any(|v| *v == attached.volume) {
            return Err(Error::StillInUse);
        }
        Ok(())
    }

    /// `csiAttacher.Detach`: the VolumeAttachment deleted, then waited for until gone.
    fn detach_volume(&self, attached: &Attachment) -> Result<(), Error> {
        let (driver, handle) = split_unique_name(&attached.volume).ok_or(Error::MissingVolumeData)?;
        let name = attachment_name(handle, driver, &attached.node);
        match Api::<VolumeAttachment>::cluster(&self.client).delete(&name, &DeleteParams::default()) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            Err(source) => return Err(Error::DeleteAttachment { name, source }),
        }
        self.wait(driver, handle, "detach", || {
            // `verifyDetachmentStatus`: gone is detached; a `detachError` fails the wait.
            let Some(found) = self.attachments.store().get(&name) else { return Ok(true) };
            match found.status.as_ref().and_then(|s| s.detach_error.as_ref()) {
                Some(error) => Err(Error::Attacher(error.message.clone().unwrap_or_default())),
                None => Ok(false),
            }
        })
    }

    /// `waitForVolumeAttachDetachStatusWithLister`, polling the cache.
    fn wait(
        &self,
        driver: &str,
        handle: &str,
        operation: &'static str,
        verify: impl Fn() -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + CSI_TIMEOUT;
        loop {
            if verify()? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout { driver: driver.to_string(), operation, handle: handle.to_string() });
            }
            if (self.stopping)() {
                return Err(Error::Stopped { operation, handle: handle.to_string() });
            }
            std::thread::sleep(POLL);
        }
    }

    /// `syncStates` (`VerifyVolumesAreAttached` with the CSI attacher): an attachment whose
    /// VolumeAttachment is gone or not attached is marked detached.
    fn sync_states(&self) {
        for attached in self.actual.attached_volumes().into_iter().filter(|a| a.confirmed) {
            let Some((driver, handle)) = split_unique_name(&attached.volume) else { continue };
            let name = attachment_name(handle, driver, &attached.node);
            let still = match Api::<VolumeAttachment>::cluster(&self.client).get_opt(&name) {
                Ok(found) => found.and_then(|a| a.status).is_some_and(|s| s.attached),
                Err(e) => {
                    log::error!("VolumesAreAttached failed for checking on node node={:?} err={e}", attached.node);
                    continue;
                }
            };
            if !still {
                log::info!(
                    "Volume is not attached to node anymore; marking it detached volumeName={:?} node={:?}",
                    attached.volume,
                    attached.node
                );
                self.actual.mark_detached(&attached.volume, &attached.node);
            }
        }
    }
}

/// What a pod in `namespace` is told of the pods holding its volume: names only of those in
/// its own namespace.
fn multi_attach_detail(users: &[PodRef], namespace: &str) -> String {
    let local: Vec<&str> = users.iter().filter(|p| p.namespace == namespace).map(|p| p.name.as_str()).collect();
    let others = users.len() - local.len();
    match (local.is_empty(), others) {
        (true, _) => format!("Volume is already used by {others} pod(s) in different namespaces"),
        (false, 0) => format!("Volume is already used by pod(s) {}", local.join(", ")),
        (false, _) => {
            format!("Volume is already used by pod(s) {} and {others} pod(s) in different namespaces", local.join(", "))
        }
    }
}

/// `verifyAttachmentStatus`.
fn verify_attachment_status(attachment: Option<&VolumeAttachment>) -> Result<bool, Error> {
    let Some(attachment) = attachment else { return Ok(false) };
    if attachment.metadata.deletion_timestamp.is_some() {
        return Err(Error::AttachmentDeleting);
    }
    let status = attachment.status.as_ref();
    if status.is_some_and(|s| s.attached) {
        return Ok(true);
    }
    match status.and_then(|s| s.attach_error.as_ref()) {
        Some(error) => Err(Error::Attacher(error.message.clone().unwrap_or_default())),
        None => Ok(false),
    }
}

/// `generateVolumeMsg`'s simple message: `<prefix> for volume "<spec name>" <suffix>`.
fn simple_msg(prefix: &str, suffix: &str, spec_name: &str) -> String {
    format!("{prefix} for volume {spec_name:?} {suffix}")
}

/// The spec's name, `nil` for a volume known only from a node's status.
fn spec_name(attached: &Attachment) -> String {
    attached.spec.as_ref().map(|s| s.name.clone()).unwrap_or_else(|| "nil".to_string())
}

/// The operation key: the volume alone unless it may be attached to several nodes.
fn operation_key(volume: &str, node: &str, multi_attach: bool) -> String {
    if multi_attach { format!("{volume}|{node}") } else { volume.to_string() }
}

fn pod_reference(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("Pod".to_string()),
        namespace: Some(pod.namespace.clone()),
        name: Some(pod.name.clone()),
        uid: Some(pod.uid.clone()),
        ..ObjectReference::default()
    }
}

/// `nestedpendingoperations`: at most one operation per key, each on its own thread, with an
/// exponential back-off after a failure.
#[derive(Default)]
pub struct Operations {
    state: Arc<Mutex<HashMap<String, OperationState>>>,
}

#[derive(Debug, Default)]
struct OperationState {
    running: bool,
    /// After a failure: no retry before this, and the wait that led to it.
    backoff: Option<(Instant, Duration)>,
}

impl Operations {
    /// Neither running nor backing off.
    pub fn can_start(&self, key: &str) -> bool {
        self.state
            .lock()
            .get(key)
            .is_none_or(|s| !s.running && s.backoff.is_none_or(|(until, _)| Instant::now() >= until))
    }

    /// Runs `operation` on a thread of its own; a failure is logged and backs the key off.
    pub fn start(&self, key: String, operation: impl FnOnce() -> Result<(), Error> + Send + 'static) {
        self.state.lock().entry(key.clone()).or_default().running = true;
        let (state, running) = (self.state.clone(), key.clone());
        let spawned = std::thread::Builder::new().name("attachdetach-op".to_string()).spawn(move || {
            let result = operation();
            finish(&state, &running, result);
        });
        if let Err(e) = spawned {
            log::error!("cannot start a volume operation: {e}");
            self.state.lock().remove(&key);
        }
    }

    /// Whether an operation runs now (tests).
    #[cfg(test)]
    fn running(&self, key: &str) -> bool {
        self.state.lock().get(key).is_some_and(|s| s.running)
    }
}

fn finish(state: &Mutex<HashMap<String, OperationState>>, key: &str, result: Result<(), Error>) {
    let mut state = state.lock();
    match result {
        Ok(()) => {
            state.remove(key);
        }
        Err(e) => {
            let entry = state.entry(key.to_string()).or_default();
            let wait = entry.backoff.map_or(INITIAL_BACKOFF, |(_, last)| (last * 2).min(MAX_BACKOFF));
            entry.running = false;
            entry.backoff = Some((Instant::now() + wait, wait));
            log::error!("Operation for {key:?} failed. No retries permitted until {wait:?} from now. Error: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_messages_are_upstreams() {
        assert_eq!(
            simple_msg("AttachVolume.Attach succeeded", "", "pv1"),
            "AttachVolume.Attach succeeded for volume \"pv1\" "
        );
        assert_eq!(
            simple_msg("AttachVolume.Attach failed", ": boom", "pv1"),
            "AttachVolume.Attach failed for volume \"pv1\" : boom"
        );
    }

    #[test]
    fn a_failed_operation_backs_off() {
        let operations = Operations::default();
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        operations.start("v".to_string(), move || {
            done_tx.send(()).ok();
            Err(Error::Attacher("boom".to_string()))
        });
        done_rx.recv_timeout(Duration::from_secs(10)).expect("ran");
        let deadline = Instant::now() + Duration::from_secs(10);
        while operations.running("v") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!operations.running("v"));
        let backoff = operations.state.lock()["v"].backoff.expect("backing off");
        assert_eq!(backoff.1, INITIAL_BACKOFF);
        finish(&operations.state, "v", Err(Error::Attacher("again".to_string())));
        assert_eq!(operations.state.lock()["v"].backoff.expect("backing off").1, INITIAL_BACKOFF * 2);
        finish(&operations.state, "v", Ok(()));
        assert!(operations.can_start("v"));
    }

    #[test]
    fn attachment_status_is_read_as_the_csi_attacher_does() {
        let attachment = |status: serde_json::Value| -> VolumeAttachment {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "a"},
                "spec": {"attacher": "d", "nodeName": "n", "source": {}}, "status": status}))
            .expect("an attachment")
        };
        let verify = |a: Option<&VolumeAttachment>| verify_attachment_status(a).map_err(|e| e.to_string());
        assert_eq!(verify(None), Ok(false));
        assert_eq!(verify(Some(&attachment(serde_json::json!({"attached": true})))), Ok(true));
        let failed = attachment(serde_json::json!({"attached": false, "attachError": {"message": "no"}}));
        assert_eq!(verify(Some(&failed)), Err("no".to_string()));
    }
}
