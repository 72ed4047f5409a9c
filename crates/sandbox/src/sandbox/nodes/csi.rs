//! The simulated CSI driver [`DRIVER`] on both backends: its CSIDriver object (attachment
//! required), a CSINode per simulated node as the kubelet's CSI plugin registers it, the
//! driver's external attacher (external-attacher's handling of VolumeAttachments), and the
//! kubelets' side of attachment: a pod's containers start only once its node's
//! `status.volumesAttached` lists each of its attachable volumes ("Volume not attached
//! according to node status"), and each node reports the volumes its pods use in
//! `status.volumesInUse` (sorted, as the kubelet), dropping them once the pods' containers
//! stopped. One liberty: `volumesInUse` is written as soon as it changes, not at the
//! kubelet's next status update.

use std::collections::BTreeSet;

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::mirror::{Mirror, Source, WATCH_CAPACITY};
use super::{NodesError, Worker, is_terminal, log_error};
use crate::client::{Api, Client, Patch, PostParams};

/// The simulated CSI driver: StorageClass provisioner, CSIDriver name, PV `spec.csi.driver`,
/// VolumeAttachment `spec.attacher`.
pub const DRIVER: &str = "csi.kcm-sandbox.dev";
/// external-attacher's VolumeAttachment finalizer: `external-attacher/` and the driver name
/// with everything but letters, digits and `-` replaced by `-` (`SanitizeDriverName`).
pub const ATTACHER_FINALIZER: &str = "external-attacher/csi-kcm-sandbox-dev";
/// The in-tree plugins a v1.36 kubelet lists as migrated on its CSINode.
const MIGRATED_PLUGINS: &str = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume";
const CSI_PLUGIN: &str = "kubernetes.io/csi";

/// The CSIDriver as created (with the server's defaults, for the sandbox's start-up objects).
pub fn csi_driver() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": DRIVER},
        "spec": {"attachRequired": true, "podInfoOnMount": false, "volumeLifecycleModes": ["Persistent"],
            "storageCapacity": false, "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
            "seLinuxMount": false}})
}

/// The CSINode the kubelet's CSI plugin registers for node `name` (uid `uid`).
pub fn csi_node(name: &str, uid: &str, zoned: bool) -> Value {
    let keys: Vec<&str> = if zoned { vec!["topology.kubernetes.io/zone"] } else { vec![] };
    let mut driver = json!({"name": DRIVER, "nodeID": name});
    if zoned {
        driver["topologyKeys"] = json!(keys);
    }
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": name, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": MIGRATED_PLUGINS},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
        "spec": {"drivers": [driver]}})
}

/// The caches the CSI pieces read.
pub(super) struct Csi {
    volumes: Mirror<PersistentVolume>,
    attachments: Mirror<VolumeAttachment>,
    drivers: Mirror<CSIDriver>,
    nodes: Mirror<CSINode>,
}

fn mirror<K>(client: &Client) -> Mirror<K>
where
    K: k8s_openapi::ListableResource + Metadata<Ty = ObjectMeta> + DeserializeOwned + Clone + Send + 'static,
    K::Scope: crate::client::Scope,
{
    let (list, watch) = (Api::<K>::all(client), Api::<K>::all(client));
    Mirror::new(Source {
        list: Box::new(move |params| list.list_all(params)),
        watch: Box::new(move |params| watch.watch_channel(params, WATCH_CAPACITY)),
    })
}

impl Csi {
    pub(super) fn new(client: &Client) -> Csi {
        Csi { volumes: mirror(client), attachments: mirror(client), drivers: mirror(client), nodes: mirror(client) }
    }

    pub(super) fn sync(&mut self) {
        let synced = [
            ("persistent volumes", self.volumes.sync()),
            ("volume attachments", self.attachments.sync()),
            ("CSI drivers", self.drivers.sync()),
            ("CSI nodes", self.nodes.sync()),
        ];
        for (what, result) in synced {
            if let Err(e) = result {
                log::debug!("simulated nodes: cannot sync {what}: {e}");
            }
        }
    }
}

impl Worker {
    /// Creates the CSIDriver unless one of that name exists.
    pub(super) fn ensure_csi_driver(&self) -> Result<(), NodesError> {
        let driver: CSIDriver = serde_json::from_value(csi_driver())?;
        match Api::<CSIDriver>::cluster(&self.shared.client).create(&driver, &PostParams::default()) {
            Ok(_) => Ok(()),
            Err(e) if e.is_already_exists() => Ok(()),
            Err(source) => Err(NodesError::CsiDriver { driver: DRIVER, source }),
        }
    }

    /// The CSI steps of a tick: CSINodes, the external attacher, `volumesInUse`.
    pub(super) fn run_csi(&mut self) {
        self.csi.sync();
        self.ensure_csi_nodes();
        self.run_attacher();
        self.report_volumes_in_use();
    }

    /// A CSINode for each live node whose Node exists and has none (or one owned by an
    /// earlier Node of that name).
    fn ensure_csi_nodes(&mut self) {
        if !self.csi.nodes.is_listed() {
            return;
        }
        let zoned = !self.options.zones.is_empty();
        for name in self.alive_nodes() {
            let Some(uid) = self.nodes.get("", &name).and_then(|n| n.metadata.uid.clone()) else { continue };
            let owned = self
                .csi
                .nodes
                .get("", &name)
                .is_some_and(|c| c.metadata.owner_references.iter().flatten().any(|o| o.uid == uid));
            if owned {
                continue;
            }
            let Ok(object) = serde_json::from_value::<CSINode>(csi_node(&name, &uid, zoned)) else { continue };
            let api = Api::<CSINode>::cluster(&self.shared.client);
            let written = match api.create(&object, &PostParams::default()) {
                Err(e) if e.is_already_exists() => {
                    let patch =
                        json!({"metadata": {"ownerReferences": object.metadata.owner_references}, "spec": object.spec});
                    api.patch(&name, &Patch::Merge(patch), &PostParams::default())
                }
                other => other,
            };
            match written {
                Ok(written) => self.csi.nodes.observe(written),
                Err(e) => log_error(&format!("kubelet {name}: cannot register CSINode"), &e),
            }
        }
    }

    /// The external attacher: our VolumeAttachments get the finalizer and `attached: true`;
    /// deleted ones are detached and released.
    fn run_attacher(&mut self) {
        let ours: Vec<VolumeAttachment> =
            self.csi.attachments.values().filter(|a| a.spec.attacher == DRIVER).cloned().collect();
        for attachment in ours {
            if self.stopping() {
                return;
            }
            let result = if attachment.metadata.deletion_timestamp.is_some() {
                self.detach(&attachment)
            } else {
                self.attach(&attachment)
            };
            let name = attachment.metadata.name.as_deref().unwrap_or_default();
            match result {
                // Written from a stale copy: the watch brings the newer one for the next tick.
                Err(e) if e.is_conflict() => log::debug!("simulated CSI attacher: VolumeAttachment {name}: {e}"),
                Err(e) => log_error(&format!("simulated CSI attacher: VolumeAttachment {name}"), &e),
                Ok(()) => {}
            }
        }
    }

    fn attach(&mut self, attachment: &VolumeAttachment) -> Result<(), crate::client::Error> {
        let name = attachment.metadata.name.clone().unwrap_or_default();
        let api = Api::<VolumeAttachment>::cluster(&self.shared.client);
        if !has_finalizer(attachment) {
            let mut finalizers = attachment.metadata.finalizers.clone().unwrap_or_default();
            finalizers.push(ATTACHER_FINALIZER.to_string());
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": attachment.metadata.resource_version}});
            let updated = api.patch(&name, &Patch::Merge(patch), &PostParams::default())?;
            self.csi.attachments.observe(updated);
            return Ok(());
        }
        if attachment.status.as_ref().is_some_and(|s| s.attached) {
            return Ok(());
        }
        let patch = json!({"status": {"attached": true}});
        let updated = api.patch_status(&name, &Patch::Merge(patch), &PostParams::default())?;
        log::debug!("simulated CSI attacher: attached {name}");
        self.csi.attachments.observe(updated);
        Ok(())
    }

    fn detach(&mut self, attachment: &VolumeAttachment) -> Result<(), crate::client::Error> {
        if !has_finalizer(attachment) {
            return Ok(());
        }
        let name = attachment.metadata.name.clone().unwrap_or_default();
        let api = Api::<VolumeAttachment>::cluster(&self.shared.client);
        if attachment.status.as_ref().is_some_and(|s| s.attached) {
            let patch = json!({"status": {"attached": false}});
            let updated = api.patch_status(&name, &Patch::Merge(patch), &PostParams::default())?;
            self.csi.attachments.observe(updated);
            return Ok(());
        }
        let rest: Vec<&String> =
            attachment.metadata.finalizers.iter().flatten().filter(|f| *f != ATTACHER_FINALIZER).collect();
        let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": attachment.metadata.resource_version}});
        match api.patch(&name, &Patch::Merge(patch), &PostParams::default()) {
            Ok(updated) => self.csi.attachments.observe(updated),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        log::debug!("simulated CSI attacher: detached {name}");
        Ok(())
    }

    /// The unique names (`kubernetes.io/csi/<driver>^<handle>`) of the pod's volumes that need
    /// attaching: claims bound to CSI volumes whose driver does not say `attachRequired: false`.
    pub(super) fn attachable_volumes(&self, pod: &Pod) -> BTreeSet<String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
        let claims = volumes.iter().filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(source), _) => Some(source.claim_name.clone()),
            (None, Some(_)) => Some(format!("{}-{}", pod.metadata.name.as_deref().unwrap_or_default(), v.name)),
            _ => None,
        });
        claims
            .filter_map(|claim| {
                let claim = self.claims.get(namespace, &claim)?;
                let pv_name = claim.spec.as_ref()?.volume_name.as_deref()?;
                let csi = self.csi.volumes.get("", pv_name)?.spec.as_ref()?.csi.as_ref()?;
                let skip = self.csi.drivers.get("", &csi.driver).and_then(|d| d.spec.attach_required) == Some(false);
                (!skip).then(|| format!("{CSI_PLUGIN}/{}^{}", csi.driver, csi.volume_handle))
            })
            .collect()
    }

    /// Whether the node's `status.volumesAttached` lists every attachable volume of the pod.
    pub(super) fn volumes_attached(&self, pod: &Pod, node: &str) -> bool {
        let wanted = self.attachable_volumes(pod);
        if wanted.is_empty() {
            return true;
        }
        let node = self.nodes.get("", node);
        let attached = node.and_then(|n| n.status.as_ref()).and_then(|s| s.volumes_attached.as_ref());
        let attached: BTreeSet<&str> = attached.into_iter().flatten().map(|v| v.name.as_str()).collect();
        let missing: Vec<&String> = wanted.iter().filter(|v| !attached.contains(v.as_str())).collect();
        if !missing.is_empty() {
            let (namespace, name) = super::namespace_and_name(pod);
            log::trace!("kubelet: pod {namespace}/{name}: Volume not attached according to node status: {missing:?}");
        }
        missing.is_empty()
    }

    /// Each live node's `status.volumesInUse`: the attachable volumes of its pods whose
    /// containers have not stopped, written when it differs.
    fn report_volumes_in_use(&mut self) {
        if !self.pods.is_listed() || !self.csi.volumes.is_listed() {
            return;
        }
        for name in self.alive_nodes() {
            let Some(node) = self.nodes.get("", &name) else { continue };
            let in_use: BTreeSet<String> = self
                .pods
                .values()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
                .filter(|p| !is_terminal(crate::apimachinery::pod::phase(p)))
                .flat_map(|p| self.attachable_volumes(p))
                .collect();
            let reported: BTreeSet<String> =
                node.status.as_ref().and_then(|s| s.volumes_in_use.clone()).unwrap_or_default().into_iter().collect();
            if in_use == reported {
                continue;
            }
            let list = if in_use.is_empty() { Value::Null } else { json!(in_use) };
            let patch = json!({"status": {"volumesInUse": list}});
            let written = self.with_live_kubelet(&name, |worker, _| {
                Api::<k8s_openapi::api::core::v1::Node>::cluster(&worker.shared.client).patch_status(
                    &name,
                    &Patch::Merge(patch),
                    &PostParams::default(),
                )
            });
            match written {
                Some(Ok(updated)) => {
                    log::debug!("kubelet {name}: volumes in use {in_use:?}");
                    self.nodes.observe(updated);
                }
                Some(Err(e)) => log_error(&format!("kubelet {name}: cannot report volumes in use"), &e),
                None => {}
            }
        }
    }
}

fn has_finalizer(attachment: &VolumeAttachment) -> bool {
    attachment.metadata.finalizers.iter().flatten().any(|f| f == ATTACHER_FINALIZER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csi_node_is_owned_by_its_node() {
        let node: CSINode = serde_json::from_value(csi_node("n1", "u1", true)).expect("a CSINode");
        assert_eq!(node.metadata.owner_references.expect("owned")[0].uid, "u1");
        let driver = &node.spec.drivers[0];
        assert_eq!((driver.name.as_str(), driver.node_id.as_str()), (DRIVER, "n1"));
        assert_eq!(driver.topology_keys.as_deref(), Some(&["topology.kubernetes.io/zone".to_string()][..]));
        let plain: CSINode = serde_json::from_value(csi_node("n1", "u1", false)).expect("a CSINode");
        assert_eq!(plain.spec.drivers[0].topology_keys, None);
    }

    #[test]
    fn the_finalizer_is_the_sanitized_driver_name() {
        let sanitized: String =
            DRIVER.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
        assert_eq!(ATTACHER_FINALIZER, format!("external-attacher/{sanitized}"));
    }
}
