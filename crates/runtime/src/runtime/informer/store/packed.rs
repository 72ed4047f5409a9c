//! Packed Pods: the metadata kept as it is (what controllers filter on: namespace, labels,
//! owners, deletion) in a [`PodSummary`] with the phase, node and readiness (what the replica
//! controllers count), the spec and status as compact JSON, delta-coded against a sibling's.
//!
//! A `k8s_openapi::api::core::v1::Pod` with two containers and the service-account volume is
//! ~17 KiB in memory, because every `Option` field of the large structs (a `Container` is 2 KiB,
//! a `Volume` 3 KiB) takes its room whether set or not; the same pod is 2–5 KiB of JSON. The pods
//! of one controller (a ReplicaSet's, a Job's) share their template, defaults and status shape,
//! so their JSON is mostly the same bytes: each is kept as a [`delta`] against the JSON of a
//! sibling, the *reference*, shared by all of them (a few hundred bytes a pod instead of
//! kilobytes). Packing round-trips through `k8s_openapi`'s own serde, which is lossless for
//! every field the object was decoded with, so an unpacked pod equals the one that was packed.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::delta;
use crate::apimachinery::pod::PodSummary;

/// One packed object.
pub(super) struct Packed {
    /// The object's metadata and the few fields readers count on, unpacked.
    pub(super) summary: Arc<PodSummary>,
    /// The JSON this object's body is coded against, shared with its siblings.
    reference: Option<Arc<[u8]>>,
    /// The rest of the object: its compact JSON, delta-coded against `reference`.
    body: Box<[u8]>,
}

/// How a kind is packed and unpacked.
pub(super) struct Packing<K> {
    pack: fn(&K, &References) -> Result<Packed, PackError>,
    unpack: fn(&Packed) -> Result<K, PackError>,
    references: References,
}

impl<K: 'static> Packing<K> {
    /// The packing of `K`, for the kinds that are packed (Pods).
    pub(super) fn for_kind() -> Option<Packing<K>> {
        (TypeId::of::<K>() == TypeId::of::<Pod>()).then(|| Packing {
            pack: pack_pod::<K>,
            unpack: unpack_pod::<K>,
            references: References::default(),
        })
    }

    /// Packs `object`; `None` (logged) if it cannot be, and the store keeps it as it is.
    pub(super) fn pack(&self, object: &K) -> Option<Packed> {
        (self.pack)(object, &self.references)
            .map_err(|e| log::error!("cannot pack a cached object, keeping it unpacked: {e}"))
            .ok()
    }

    /// Unpacks `packed`; `None` (logged) if it cannot be.
    pub(super) fn unpack(&self, packed: &Packed) -> Option<K> {
        let name = || {
            format!(
                "{}/{}",
                packed.summary.metadata.namespace.as_deref().unwrap_or(""),
                packed.summary.metadata.name.as_deref().unwrap_or("")
            )
        };
        (self.unpack)(packed).map_err(|e| log::error!("cannot unpack cached object {}: {e}", name())).ok()
    }
}

/// The current reference of each group of siblings (pods with the same controller), held
/// weakly: a reference lives as long as a packed object codes against it.
#[derive(Default)]
pub(super) struct References {
    by_group: Mutex<HashMap<String, Weak<[u8]>>>,
    /// Only the reflector packs (one thread at a time), so this lock is not contended.
    encoder: Mutex<delta::Encoder>,
}

/// A sibling whose delta is larger than this share of its JSON becomes its group's new
/// reference (e.g. the first Running pod after Pending ones): later siblings resemble it more.
const NEW_REFERENCE_ABOVE: usize = 4;

impl References {
    /// Codes `json` against its group's reference, or makes it the reference.
    fn code(&self, group: Option<&str>, json: Vec<u8>) -> (Option<Arc<[u8]>>, Box<[u8]>) {
        let Some(group) = group else {
            return (None, delta::encode(&[], &json).into_boxed_slice());
        };
        let current = self.by_group.lock().get(group).and_then(Weak::upgrade);
        if let Some(reference) = current {
            let body = self.encoder.lock().encode(&reference, &json);
            if body.len() <= json.len() / NEW_REFERENCE_ABOVE {
                return (Some(reference), body.into_boxed_slice());
            }
        }
        let reference: Arc<[u8]> = json.into();
        let body = self.encoder.lock().encode(&reference, &reference).into_boxed_slice();
        self.remember(group, &reference);
        (Some(reference), body)
    }

    fn remember(&self, group: &str, reference: &Arc<[u8]>) {
        let mut by_group = self.by_group.lock();
        let new_group = by_group.insert(group.to_string(), Arc::downgrade(reference)).is_none();
        // Groups whose pods are all gone are dropped now and then, not on every removal.
        if new_group && by_group.len().is_power_of_two() && by_group.len() >= 64 {
            by_group.retain(|_, reference| reference.strong_count() > 0);
        }
    }
}

/// What is packed of a Pod.
#[derive(Serialize)]
struct PodBodyRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a PodStatus>,
}

#[derive(Deserialize)]
struct PodBody {
    #[serde(default)]
    spec: Option<PodSpec>,
    #[serde(default)]
    status: Option<PodStatus>,
}

/// Pods are grouped by the uid of their controller.
fn pod_group(metadata: &ObjectMeta) -> Option<&str> {
    metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| o.uid.as_str())
}

/// Why an object cannot be packed or unpacked (logged; the store then keeps it as it is, or
/// has no object to give).
#[derive(Debug, thiserror::Error)]
pub(super) enum PackError {
    /// The kind is not the one the packing is for.
    #[error("not a Pod")]
    NotAPod,
    /// The body does not encode to JSON, or its JSON does not decode.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The delta-coded body is corrupt.
    #[error("{0}")]
    Delta(#[from] delta::DecodeError),
}

fn pack_pod<K: 'static>(object: &K, references: &References) -> Result<Packed, PackError> {
    let pod = (object as &dyn Any).downcast_ref::<Pod>().ok_or(PackError::NotAPod)?;
    let json = serde_json::to_vec(&PodBodyRef { spec: pod.spec.as_ref(), status: pod.status.as_ref() })?;
    let (reference, body) = references.code(pod_group(&pod.metadata), json);
    Ok(Packed { summary: Arc::new(PodSummary::of(pod)), reference, body })
}

fn unpack_pod<K: 'static>(packed: &Packed) -> Result<K, PackError> {
    let json = delta::decode(packed.reference.as_deref().unwrap_or_default(), &packed.body)?;
    let body: PodBody = serde_json::from_slice(&json)?;
    let pod = Pod { metadata: packed.summary.metadata.clone(), spec: body.spec, status: body.status };
    let boxed: Box<dyn Any> = Box::new(pod);
    boxed.downcast::<K>().map(|k| *k).map_err(|_| PackError::NotAPod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    /// A Pod as a real kube-apiserver v1.33 answers it (defaults, the service-account volume,
    /// status with conditions and a terminated container), `managedFields` aside.
    fn real_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "default", "uid": "38c3a002-c343-45bc-98b3-5b4417dc2214",
                "resourceVersion": "564", "generation": 1, "creationTimestamp": "2026-11-26T06:32:23Z",
                "labels": {"app": "web", "pod-template-hash": "7d4b9c8f5d"},
                "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-26T06:30:00Z"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f5d",
                    "uid": "0b6e8f0e-6f5e-4a53-9a51-3c8f8b7f6a11", "controller": true, "blockOwnerDeletion": true}],
                "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "periodSeconds": 5, "successThreshold": 1, "timeoutSeconds": 1, "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "name": "kube-api-access-x2kq9", "readOnly": true}]}],
                "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "nodeName": "node-1",
                "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
                "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
                "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "tolerationSeconds": 300}],
                "volumes": [{"name": "kube-api-access-x2kq9", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        "path": "namespace"}]}}]}}]},
            "status": {"phase": "Running", "podIP": "10.244.1.5", "podIPs": [{"ip": "10.244.1.5"}],
                "hostIP": "10.0.0.1", "qosClass": "Burstable", "startTime": "2026-11-26T06:32:24Z",
                "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": "2026-11-26T06:32:30Z"}],
                "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 2, "started": true,
                    "image": "nginx:1.27", "imageID": "docker.io/library/nginx@sha256:00", "containerID": "containerd://ab",
                    "state": {"running": {"startedAt": "2026-11-26T06:32:29Z"}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                        "startedAt": "2026-11-26T06:32:25Z", "finishedAt": "2026-11-26T06:32:28Z"}}}]}
        }))
        .expect("a pod")
    }

    #[test]
    fn pods_unpack_equal_to_what_was_packed() {
        let packing = Packing::<Pod>::for_kind().expect("pods are packed");
        for pod in [real_pod(), Pod::default(), Pod { status: None, ..real_pod() }] {
            let packed = packing.pack(&pod).expect("packs");
            assert_eq!(packing.unpack(&packed).expect("unpacks"), pod);
        }
        let packed = packing.pack(&real_pod()).unwrap();
        assert!(packed.body.len() < 2500, "compact: {} bytes", packed.body.len());
    }

    /// `real_pod` as the `n`th pod of one ReplicaSet: its own name, volume, node and IP.
    fn sibling(n: u32, phase: &str) -> Pod {
        let mut pod = real_pod();
        pod.metadata.name = Some(format!("web-{n}"));
        pod.metadata.finalizers = None;
        let spec = pod.spec.as_mut().unwrap();
        spec.node_name = Some(format!("node-{}", n % 3));
        spec.volumes.as_mut().unwrap()[0].name = format!("kube-api-access-{n:05}");
        spec.containers[0].volume_mounts.as_mut().unwrap()[0].name = format!("kube-api-access-{n:05}");
        let status = pod.status.as_mut().unwrap();
        status.phase = Some(phase.into());
        status.pod_ip = Some(format!("10.244.{}.{}", n % 3, n));
        pod
    }

    #[test]
    fn siblings_share_a_reference_and_keep_only_their_differences() {
        let packing = Packing::<Pod>::for_kind().unwrap();
        let first = packing.pack(&sibling(1, "Running")).unwrap();
        let json_len = first.reference.as_ref().expect("a reference").len();
        assert!(first.body.len() <= 4, "the first is its group's reference");
        for n in 2..20 {
            let pod = sibling(n, "Running");
            let packed = packing.pack(&pod).unwrap();
            assert!(Arc::ptr_eq(packed.reference.as_ref().unwrap(), first.reference.as_ref().unwrap()));
            assert!(packed.body.len() * 10 < json_len, "{} bytes of {json_len}", packed.body.len());
            assert_eq!(packing.unpack(&packed).unwrap(), pod);
        }
        let orphan = Pod { metadata: ObjectMeta { owner_references: None, ..real_pod().metadata }, ..real_pod() };
        let packed = packing.pack(&orphan).unwrap();
        assert!(packed.reference.is_none(), "a pod without a controller codes against nothing");
        assert_eq!(packing.unpack(&packed).unwrap(), orphan);
    }

    #[test]
    fn a_sibling_unlike_the_reference_becomes_the_new_one() {
        let packing = Packing::<Pod>::for_kind().unwrap();
        let pending = Pod { spec: Some(PodSpec::default()), status: None, ..sibling(1, "Pending") };
        let first = packing.pack(&pending).unwrap();
        let running = packing.pack(&sibling(2, "Running")).unwrap();
        let (old, new) = (first.reference.as_ref().unwrap(), running.reference.as_ref().unwrap());
        assert!(!Arc::ptr_eq(old, new), "a spec and status the reference lacks are too much difference");
        let third = packing.pack(&sibling(3, "Running")).unwrap();
        assert!(Arc::ptr_eq(third.reference.as_ref().unwrap(), new));
        assert_eq!(packing.unpack(&first).unwrap(), pending, "the old reference lives on for its pods");
    }

    #[test]
    fn a_group_whose_pods_are_gone_starts_afresh() {
        let packing = Packing::<Pod>::for_kind().unwrap();
        let reference = Arc::downgrade(packing.pack(&sibling(1, "Running")).unwrap().reference.as_ref().unwrap());
        assert_eq!(reference.strong_count(), 0, "dropping the last pod drops its reference");
        let packed = packing.pack(&sibling(2, "Running")).unwrap();
        assert!(packed.body.len() <= 4, "the next pod is the new reference");
        assert_eq!(packing.unpack(&packed).unwrap(), sibling(2, "Running"));
    }

    #[test]
    fn other_kinds_are_kept_as_they_are() {
        assert!(Packing::<ConfigMap>::for_kind().is_none());
    }
}
