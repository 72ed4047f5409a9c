//! Packed Pods: the metadata kept as it is (what controllers filter on: namespace, labels,
//! owners, deletion), the spec and status as compact JSON.
//!
//! A `k8s_openapi::api::core::v1::Pod` with two containers and the service-account volume is
//! ~17 KiB in memory, because every `Option` field of the large structs (a `Container` is 2 KiB,
//! a `Volume` 3 KiB) takes its room whether set or not; the same pod is ~2 KiB of JSON.
//! Packing round-trips through `k8s_openapi`'s own serde, which is lossless for every field
//! the object was decoded with, so an unpacked pod equals the one that was packed.

use std::any::{Any, TypeId};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// One packed object.
pub(super) struct Packed {
    /// The object's metadata, unpacked.
    pub(super) metadata: ObjectMeta,
    /// The rest of the object, as compact JSON.
    body: Box<[u8]>,
}

/// How a kind is packed and unpacked.
pub(super) struct Packing<K> {
    pack: fn(&K) -> Result<Packed, String>,
    unpack: fn(&Packed) -> Result<K, String>,
}

impl<K: 'static> Packing<K> {
    /// The packing of `K`, for the kinds that are packed (Pods).
    pub(super) fn for_kind() -> Option<Packing<K>> {
        (TypeId::of::<K>() == TypeId::of::<Pod>()).then_some(Packing { pack: pack_pod::<K>, unpack: unpack_pod::<K> })
    }

    /// Packs `object`; `None` (logged) if it cannot be, and the store keeps it as it is.
    pub(super) fn pack(&self, object: &K) -> Option<Packed> {
        (self.pack)(object).map_err(|e| log::error!("cannot pack a cached object, keeping it unpacked: {e}")).ok()
    }

    /// Unpacks `packed`; `None` (logged) if it cannot be.
    pub(super) fn unpack(&self, packed: &Packed) -> Option<K> {
        let name = || {
            format!(
                "{}/{}",
                packed.metadata.namespace.as_deref().unwrap_or(""),
                packed.metadata.name.as_deref().unwrap_or("")
            )
        };
        (self.unpack)(packed).map_err(|e| log::error!("cannot unpack cached object {}: {e}", name())).ok()
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

fn pack_pod<K: 'static>(object: &K) -> Result<Packed, String> {
    let pod = (object as &dyn Any).downcast_ref::<Pod>().ok_or("not a Pod")?;
    let body = serde_json::to_vec(&PodBodyRef { spec: pod.spec.as_ref(), status: pod.status.as_ref() })
        .map_err(|e| e.to_string())?;
    Ok(Packed { metadata: pod.metadata.clone(), body: body.into_boxed_slice() })
}

fn unpack_pod<K: 'static>(packed: &Packed) -> Result<K, String> {
    let body: PodBody = serde_json::from_slice(&packed.body).map_err(|e| e.to_string())?;
    let pod = Pod { metadata: packed.metadata.clone(), spec: body.spec, status: body.status };
    let boxed: Box<dyn Any> = Box::new(pod);
    boxed.downcast::<K>().map(|k| *k).map_err(|_| "not a Pod".to_string())
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

    #[test]
    fn other_kinds_are_kept_as_they_are() {
        assert!(Packing::<ConfigMap>::for_kind().is_none());
    }
}
