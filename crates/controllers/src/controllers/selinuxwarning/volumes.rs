//! What the controller needs of a pod's volumes, after upstream v1.36: the volume spec of
//! `attachdetach/util.CreateVolumeSpec` (a claim's bound PersistentVolume, or the inline
//! volume), the volume plugins the controller manager probes (`ProbePersistentVolumePlugins`:
//! host-path, NFS, FC, iSCSI and CSI) with their `CanSupport`, `GetVolumeName` and
//! `SupportsSELinuxContextMount`, and `pkg/volume/util`'s `GetPodVolumeNames` and
//! `GetMountSELinuxLabel` with the controller's own label translator.
//!
//! Not ported: CSI migration of in-tree volumes (`translateInTreeSpecToCSIIfNeeded`; none of
//! the probed plugins is migrated, so a migrated in-tree volume is one of an unknown plugin
//! here) and FlexVolume drivers found under `--flex-volume-plugin-dir`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolume, PersistentVolumeClaim, Pod, SELinuxOptions, SecurityContext, Volume,
};
use k8s_openapi::api::storage::v1::CSIDriver;

use crate::controllers::volumeutil::{
    bound_claim_from_cache, bound_volume_from_cache, ephemeral_claim_name, volume_is_for_pod,
};
use crate::runtime::informer::Informer;

use super::Error;

/// A volume as a plugin sees it (`volume.Spec`): a pod's inline volume or a PersistentVolume.
#[derive(Debug, Clone)]
pub enum VolumeSpec {
    /// A volume of the pod's spec that names no claim (`NewSpecFromVolume`).
    Inline(Box<Volume>),
    /// The PersistentVolume bound to the pod's claim (`NewSpecFromPersistentVolume`).
    Persistent(Arc<PersistentVolume>),
}

impl VolumeSpec {
    /// `Spec.Name()`: the pod volume's or the PersistentVolume's name.
    pub fn name(&self) -> &str {
        match self {
            VolumeSpec::Inline(volume) => &volume.name,
            VolumeSpec::Persistent(pv) => pv.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    /// The CSI driver of a CSI volume (`csi.GetCSIDriverName`).
    pub fn csi_driver(&self) -> Option<&str> {
        match self {
            VolumeSpec::Inline(volume) => volume.csi.as_ref().map(|c| c.driver.as_str()),
            VolumeSpec::Persistent(pv) => pv.spec.as_ref()?.csi.as_ref().map(|c| c.driver.as_str()),
        }
    }
}

/// The volume plugins of `ProbePersistentVolumePlugins`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    /// `kubernetes.io/host-path`.
    HostPath,
    /// `kubernetes.io/nfs`.
    Nfs,
    /// `kubernetes.io/fc`.
    Fc,
    /// `kubernetes.io/iscsi`.
    Iscsi,
    /// `kubernetes.io/csi`.
    Csi,
}

impl Plugin {
    const ALL: [Plugin; 5] = [Plugin::HostPath, Plugin::Nfs, Plugin::Fc, Plugin::Iscsi, Plugin::Csi];

    /// `GetPluginName`.
    pub fn name(self) -> &'static str {
        match self {
            Plugin::HostPath => "kubernetes.io/host-path",
            Plugin::Nfs => "kubernetes.io/nfs",
            Plugin::Fc => "kubernetes.io/fc",
            Plugin::Iscsi => "kubernetes.io/iscsi",
            Plugin::Csi => "kubernetes.io/csi",
        }
    }

    /// `CanSupport`: the spec has the plugin's source, inline or in the PersistentVolume.
    fn can_support(self, spec: &VolumeSpec) -> bool {
        match spec {
            VolumeSpec::Inline(v) => match self {
                Plugin::HostPath => v.host_path.is_some(),
                Plugin::Nfs => v.nfs.is_some(),
                Plugin::Fc => v.fc.is_some(),
                Plugin::Iscsi => v.iscsi.is_some(),
                Plugin::Csi => v.csi.is_some(),
            },
            VolumeSpec::Persistent(pv) => pv.spec.as_ref().is_some_and(|s| match self {
                Plugin::HostPath => s.host_path.is_some(),
                Plugin::Nfs => s.nfs.is_some(),
                Plugin::Fc => s.fc.is_some(),
                Plugin::Iscsi => s.iscsi.is_some(),
                Plugin::Csi => s.csi.is_some(),
            }),
        }
    }

    /// `VolumePluginMgr.FindPluginBySpec`: the one plugin that supports the spec.
    pub fn for_spec(spec: &VolumeSpec) -> Result<Plugin, Error> {
        let matching: Vec<Plugin> = Plugin::ALL.into_iter().filter(|p| p.can_support(spec)).collect();
        match matching.as_slice() {
            [plugin] => Ok(*plugin),
            [] => Err(Error::NoPlugin),
            many => {
                let names: Vec<&str> = many.iter().map(|p| p.name()).collect();
                Err(Error::MultiplePlugins { names: names.join(",") })
            }
        }
    }

    /// `GetVolumeName`; `None` where upstream's fails or returns "".
    fn volume_name(self, spec: &VolumeSpec) -> Option<String> {
        let (inline, persistent) = match spec {
            VolumeSpec::Inline(v) => (Some(&**v), None),
            VolumeSpec::Persistent(pv) => (None, pv.spec.as_ref()),
        };
        let name = match self {
            Plugin::HostPath => inline
                .and_then(|v| v.host_path.as_ref())
                .or(persistent.and_then(|s| s.host_path.as_ref()))?
                .path
                .clone(),
            Plugin::Nfs => {
                let nfs = inline.and_then(|v| v.nfs.as_ref()).or(persistent.and_then(|s| s.nfs.as_ref()))?;
                format!("{}/{}", nfs.server, nfs.path)
            }
            Plugin::Fc => {
                let fc = inline.and_then(|v| v.fc.as_ref()).or(persistent.and_then(|s| s.fc.as_ref()))?;
                let wwns = fc.target_wwns.as_deref().unwrap_or_default();
                let wwids = fc.wwids.as_deref().unwrap_or_default();
                match fc.lun {
                    Some(lun) if !wwns.is_empty() => format!("{}:{lun}", go_list(wwns)),
                    _ if !wwids.is_empty() => go_list(wwids),
                    _ => String::new(),
                }
            }
            Plugin::Iscsi => match (inline.and_then(|v| v.iscsi.as_ref()), persistent.and_then(|s| s.iscsi.as_ref())) {
                (Some(s), _) => format!("{}:{}:{}", s.target_portal, s.iqn, s.lun),
                (None, Some(s)) => format!("{}:{}:{}", s.target_portal, s.iqn, s.lun),
                (None, None) => return None,
            },
            // An inline CSI volume has no name (`getPVSourceFromSpec` fails for it).
            Plugin::Csi => {
                let csi = persistent?.csi.as_ref()?;
                format!("{}^{}", csi.driver, csi.volume_handle)
            }
        };
        Some(name).filter(|n| !n.is_empty())
    }

    /// `GetUniqueVolumeNameFromSpec`: `<plugin name>/<volume name>`.
    pub fn unique_volume_name(self, spec: &VolumeSpec) -> Result<String, Error> {
        match self.volume_name(spec) {
            Some(name) => Ok(format!("{}/{name}", self.name())),
            None => Err(Error::NoVolumeName { volume: spec.name().to_string() }),
        }
    }
}

/// A string slice as Go's `%v` prints it: `[a b]`.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// The caches the controller reads volumes from.
pub struct Lookups {
    /// The claims pods name.
    pub claims: Arc<Informer<PersistentVolumeClaim>>,
    /// The volumes claims are bound to.
    pub volumes: Arc<Informer<PersistentVolume>>,
    /// The CSIDrivers, for their `seLinuxMount`.
    pub drivers: Arc<Informer<CSIDriver>>,
    /// The SELinuxMountReadWriteOncePod gate.
    pub mount_rwop: bool,
}

impl Lookups {
    /// `CreateVolumeSpec` (without CSI migration): an inline volume as it is, a claim (or a
    /// generic ephemeral volume's claim) as its bound PersistentVolume.
    pub fn volume_spec(&self, pod: &Pod, volume: &Volume) -> Result<VolumeSpec, Error> {
        let claim_name = match (&volume.persistent_volume_claim, &volume.ephemeral) {
            (_, Some(_)) => ephemeral_claim_name(pod, volume),
            (Some(source), None) => source.claim_name.clone(),
            (None, None) => String::new(),
        };
        if claim_name.is_empty() {
            return Ok(VolumeSpec::Inline(Box::new(volume.clone())));
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let processing = |source| Error::ProcessingClaim {
            namespace: namespace.into(),
            claim: claim_name.clone(),
            source: Box::new(source),
        };
        let claim = bound_claim_from_cache(&self.claims, namespace, &claim_name).map_err(processing)?;
        if volume.ephemeral.is_some() && !volume_is_for_pod(pod, &claim) {
            let pod = pod.metadata.name.clone().unwrap_or_default();
            return Err(Error::NotOwner { namespace: namespace.into(), claim: claim_name, pod });
        }
        let pv_name = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default();
        let claim_uid = claim.metadata.uid.as_deref().unwrap_or_default();
        let pv = bound_volume_from_cache(&self.volumes, pv_name, claim_uid).map_err(processing)?;
        Ok(VolumeSpec::Persistent(pv))
    }

    /// `SupportsSELinuxContextMount` of the spec's plugin (none: false). FC and iSCSI always
    /// can; CSI when its CSIDriver says `seLinuxMount: true` (no CSIDriver: false).
    pub fn supports_selinux_context_mount(&self, spec: &VolumeSpec) -> bool {
        match Plugin::for_spec(spec) {
            Ok(Plugin::Fc | Plugin::Iscsi) => true,
            Ok(Plugin::Csi) if self.mount_rwop => spec
                .csi_driver()
                .and_then(|driver| self.drivers.store().get(driver))
                .and_then(|driver| driver.spec.se_linux_mount)
                .unwrap_or(false),
            _ => false,
        }
    }

    /// `GetMountSELinuxLabel` with the controller's translator (which takes SELinux as
    /// enabled): the label the volume would be mounted with, and whether its plugin can mount
    /// with `-o context`. The containers using the volume must agree on one label.
    pub fn mount_label(
        &self,
        spec: &VolumeSpec,
        container_options: &[SELinuxOptions],
        change_policy: Option<&str>,
    ) -> Result<MountLabel, MultipleLabels> {
        let mut info = MountLabel::default();
        if !self.mount_rwop {
            return Ok(info);
        }
        info.plugin_supports_context_mount = self.supports_selinux_context_mount(spec);
        let labels: BTreeSet<String> = container_options.iter().map(file_label).collect();
        if labels.len() > 1 {
            return Err(MultipleLabels(labels.into_iter().collect()));
        }
        let Some(label) = labels.into_iter().next() else { return Ok(info) };
        // The pod opted into recursive relabelling, or the plugin cannot mount with a context.
        if change_policy != Some(RECURSIVE) && info.plugin_supports_context_mount {
            info.mount_label = label;
        }
        Ok(info)
    }
}

/// `v1.SELinuxChangePolicyRecursive`.
pub const RECURSIVE: &str = "Recursive";
/// `v1.SELinuxChangePolicyMountOption`.
pub const MOUNT_OPTION: &str = "MountOption";

/// What `GetMountSELinuxLabel` answers that the controller reads (`SELinuxLabelInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountLabel {
    /// `SELinuxMountLabel`: empty unless the volume is mounted with `-o context`.
    pub mount_label: String,
    /// `PluginSupportsSELinuxContextMount`.
    pub plugin_supports_context_mount: bool,
}

/// `MultipleSELinuxLabelsError`: one volume, several labels in one pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("multiple SELinux labels found: {}", .0.join(","))]
pub struct MultipleLabels(pub Vec<String>);

/// `ControllerSELinuxTranslator.SELinuxOptionsToFileLabel`: the parts joined with `:`, with no
/// defaults (the controller cannot read the nodes' `/etc/selinux`); all empty is "".
pub fn file_label(options: &SELinuxOptions) -> String {
    let part = |p: &Option<String>| p.clone().unwrap_or_default();
    let label = [part(&options.user), part(&options.role), part(&options.type_), part(&options.level)].join(":");
    if label == ":::" { String::new() } else { label }
}

/// `GetPodVolumeNames` with SELinux options: the names of the volumes the pod's containers
/// (init, regular and ephemeral) mount, with the effective SELinux options of each container
/// mounting it (the container's, else the pod's; none when neither has any).
pub fn mounted_volumes(pod: &Pod) -> BTreeMap<String, Vec<SELinuxOptions>> {
    let mut mounts: BTreeMap<String, Vec<SELinuxOptions>> = BTreeMap::new();
    let Some(spec) = pod.spec.as_ref() else { return mounts };
    let pod_options = spec.security_context.as_ref().and_then(|s| s.se_linux_options.as_ref());
    let mut visit = |security: Option<&SecurityContext>, volume_mounts: Option<&Vec<_>>| {
        let container_options = security.and_then(|s| s.se_linux_options.as_ref());
        let options = container_options.or(pod_options);
        for mount in volume_mounts.into_iter().flatten() {
            let mount: &k8s_openapi::api::core::v1::VolumeMount = mount;
            let entry = mounts.entry(mount.name.clone()).or_default();
            entry.extend(options.cloned());
        }
    };
    let containers = spec.init_containers.iter().flatten().chain(spec.containers.iter());
    for container in containers {
        let Container { security_context, volume_mounts, .. } = container;
        visit(security_context.as_ref(), volume_mounts.as_ref());
    }
    for container in spec.ephemeral_containers.iter().flatten() {
        visit(container.security_context.as_ref(), container.volume_mounts.as_ref());
    }
    mounts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::informer::SharedInformerFactory;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("a valid object")
    }

    fn lookups(mount_rwop: bool) -> Lookups {
        let client = crate::client::unreachable_client();
        let informers = SharedInformerFactory::new(client, std::time::Duration::ZERO);
        Lookups {
            claims: informers.informer(),
            volumes: informers.informer(),
            drivers: informers.informer(),
            mount_rwop,
        }
    }

    fn pv(spec: serde_json::Value) -> VolumeSpec {
        VolumeSpec::Persistent(Arc::new(from(json!({"metadata": {"name": "pv"}, "spec": spec}))))
    }

    #[test]
    fn plugins_name_their_volumes() {
        let name = |spec: &VolumeSpec| Plugin::for_spec(spec).and_then(|p| p.unique_volume_name(spec));
        let inline: VolumeSpec =
            VolumeSpec::Inline(Box::new(from(json!({"name": "v", "hostPath": {"path": "/data"}}))));
        assert_eq!(name(&inline).unwrap(), "kubernetes.io/host-path//data");
        let nfs = pv(json!({"nfs": {"server": "srv", "path": "/export"}}));
        assert_eq!(name(&nfs).unwrap(), "kubernetes.io/nfs/srv//export");
        let fc = pv(json!({"fc": {"targetWWNs": ["a", "b"], "lun": 2}}));
        assert_eq!(name(&fc).unwrap(), "kubernetes.io/fc/[a b]:2");
        let fc_wwids = pv(json!({"fc": {"wwids": ["w"]}}));
        assert_eq!(name(&fc_wwids).unwrap(), "kubernetes.io/fc/[w]");
        let iscsi = pv(json!({"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0}}));
        assert_eq!(name(&iscsi).unwrap(), "kubernetes.io/iscsi/10.0.0.1:3260:iqn.x:0");
        let csi = pv(json!({"csi": {"driver": "d", "volumeHandle": "h"}}));
        assert_eq!(name(&csi).unwrap(), "kubernetes.io/csi/d^h");
        assert_eq!(csi.csi_driver(), Some("d"));
        let inline_csi = VolumeSpec::Inline(Box::new(from(json!({"name": "v", "csi": {"driver": "d"}}))));
        assert_eq!(
            name(&inline_csi).unwrap_err().to_string(),
            "failed to GetVolumeName from volumePlugin for volumeSpec \"v\""
        );
        let empty_dir = VolumeSpec::Inline(Box::new(from(json!({"name": "v", "emptyDir": {}}))));
        assert_eq!(Plugin::for_spec(&empty_dir).unwrap_err().to_string(), "no volume plugin matched");
    }

    #[test]
    fn context_mounts_follow_the_plugin_and_the_csi_driver() {
        let lookups = lookups(true);
        assert!(
            lookups.supports_selinux_context_mount(&pv(json!({"iscsi": {"targetPortal": "p", "iqn": "i", "lun": 0}})))
        );
        assert!(!lookups.supports_selinux_context_mount(&pv(json!({"nfs": {"server": "s", "path": "/"}}))));
        let csi = pv(json!({"csi": {"driver": "d", "volumeHandle": "h"}}));
        assert!(!lookups.supports_selinux_context_mount(&csi), "no CSIDriver: no context mount");
    }

    #[test]
    fn the_mount_label_is_the_containers_one_label() {
        let lookups = lookups(true);
        let fc = pv(json!({"fc": {"wwids": ["w"]}}));
        let options = |level: &str| -> SELinuxOptions { from(json!({"level": level})) };
        let info = lookups.mount_label(&fc, &[options("s0:c1"), options("s0:c1")], None).unwrap();
        assert_eq!(info, MountLabel { mount_label: ":::s0:c1".into(), plugin_supports_context_mount: true });
        let recursive = lookups.mount_label(&fc, &[options("s0:c1")], Some(RECURSIVE)).unwrap();
        assert_eq!(recursive.mount_label, "");
        let nfs = pv(json!({"nfs": {"server": "s", "path": "/"}}));
        assert_eq!(lookups.mount_label(&nfs, &[options("s0:c1")], None).unwrap(), MountLabel::default());
        let err = lookups.mount_label(&fc, &[options("s0:c1"), options("s0:c2")], None).unwrap_err();
        assert_eq!(err.to_string(), "multiple SELinux labels found: :::s0:c1,:::s0:c2");
        assert_eq!(lookups.mount_label(&fc, &[], None).unwrap().mount_label, "");
        let gate_off = self::lookups(false);
        assert_eq!(gate_off.mount_label(&fc, &[options("s0:c1")], None).unwrap(), MountLabel::default());
    }

    #[test]
    fn file_labels_join_the_parts_without_defaults() {
        let options: SELinuxOptions = from(json!({"user": "u", "role": "r", "type": "t", "level": "s0:c1,c2"}));
        assert_eq!(file_label(&options), "u:r:t:s0:c1,c2");
        assert_eq!(file_label(&from(json!({"level": "s0"}))), ":::s0");
        assert_eq!(file_label(&SELinuxOptions::default()), "");
    }

    #[test]
    fn mounted_volumes_carry_each_containers_effective_options() {
        let pod: Pod = from(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "securityContext": {"seLinuxOptions": {"level": "s0:c1"}},
                "initContainers": [{"name": "i", "volumeMounts": [{"name": "a", "mountPath": "/a"}]}],
                "containers": [
                    {"name": "c", "securityContext": {"seLinuxOptions": {"level": "s0:c2"}},
                     "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b"}]}
                ],
                "ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "c", "mountPath": "/c"}]}]
            }
        }));
        let mounts = mounted_volumes(&pod);
        let levels =
            |name: &str| -> Vec<String> { mounts[name].iter().map(|o| o.level.clone().unwrap_or_default()).collect() };
        assert_eq!(mounts.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(levels("a"), ["s0:c1", "s0:c2"]);
        assert_eq!(levels("b"), ["s0:c2"]);
        assert_eq!(levels("c"), ["s0:c1"]);

        let no_options: Pod = from(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "volumeMounts": [{"name": "a", "mountPath": "/a"}]}]}}));
        assert_eq!(mounted_volumes(&no_options)["a"], Vec::<SELinuxOptions>::new());
    }
}
