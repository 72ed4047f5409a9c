//! ServiceAccount (`plugin/pkg/admission/serviceaccount`): on pod creation, defaults the service
//! account to `default`, requires it to exist, mounts the projected API token volume and copies
//! the account's image pull secrets; mirror pods may reference neither accounts nor secrets.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{AdmissionContext, Phase, annotation, array_mut, forbidden, items, spec_mut, text};
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::store::Txn;

const DEFAULT_SERVICE_ACCOUNT: &str = "default";
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
const ENFORCE_MOUNTABLE_SECRETS_ANNOTATION: &str = "kubernetes.io/enforce-mountable-secrets";
/// `serviceaccount.WarnOnlyBoundTokenExpirationSeconds`.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// Pod creations only (upstream's handler), not subresources.
fn applies(ctx: &AdmissionContext<'_>) -> bool {
    ctx.is_core("pods") && ctx.is_create()
}

/// The mutating half (`Plugin.Admit`).
pub(super) fn admit(ctx: &AdmissionContext<'_>, pod: &mut Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !applies(ctx) {
        return Ok(());
    }
    if annotation(pod, MIRROR_POD_ANNOTATION).is_some() {
        return check(ctx, pod, txn, Phase::Mutating);
    }
    let mut name = text(pod, "/spec/serviceAccountName").to_string();
    if name.is_empty() {
        // The deprecated field converts into serviceAccountName when that is unset.
        name = text(pod, "/spec/serviceAccount").to_string();
    }
    if name.is_empty() {
        name = DEFAULT_SERVICE_ACCOUNT.to_string();
    }
    let spec = spec_mut(pod);
    spec["serviceAccountName"] = json!(name);
    spec["serviceAccount"] = json!(name);

    let account = lookup(ctx, pod, txn, &name, Phase::Mutating)?;
    if should_automount(&account, pod) {
        mount_token(pod);
    }
    let pull_secrets: Vec<Value> =
        items(&account, "/imagePullSecrets").iter().map(|s| json!({"name": text(s, "/name")})).collect();
    if items(pod, "/spec/imagePullSecrets").is_empty() && !pull_secrets.is_empty() {
        spec_mut(pod)["imagePullSecrets"] = Value::Array(pull_secrets);
    }
    check(ctx, pod, txn, Phase::Mutating)
}

/// The validating half (`Plugin.Validate`).
pub(super) fn validate(ctx: &AdmissionContext<'_>, pod: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !applies(ctx) {
        return Ok(());
    }
    check(ctx, pod, txn, Phase::Validating)
}

/// Mirror pods' restrictions; for the others, that the account exists and, when it asks for
/// it, that the pod uses only the secrets it lists.
fn check(ctx: &AdmissionContext<'_>, pod: &Value, txn: &Txn<'_>, phase: Phase) -> ApiResult<()> {
    if annotation(pod, MIRROR_POD_ANNOTATION).is_some() {
        let refused = if !text(pod, "/spec/serviceAccountName").is_empty() {
            Some("a mirror pod may not reference service accounts")
        } else if references_secrets(pod) {
            Some("a mirror pod may not reference secrets")
        } else if uses_token_projection(pod) {
            Some("a mirror pod may not use ServiceAccountToken volume projections")
        } else {
            None
        };
        return match refused {
            Some(why) => Err(forbidden(ctx, pod, phase, why)),
            None => Ok(()),
        };
    }
    let name = text(pod, "/spec/serviceAccountName");
    let account = lookup(ctx, pod, txn, name, phase)?;
    if enforces_mountable_secrets(&account)
        && let Err(why) = limit_secret_references(&account, pod)
    {
        return Err(forbidden(ctx, pod, phase, &why.to_string()));
    }
    Ok(())
}

/// The account, or upstream's refusal. (Upstream retries a missing `default` account for up to
/// two seconds, since its controller creates it right after the namespace; we answer at once.)
fn lookup(ctx: &AdmissionContext<'_>, pod: &Value, txn: &Txn<'_>, name: &str, phase: Phase) -> ApiResult<Arc<Value>> {
    txn.get("serviceaccounts", ctx.namespace, name).ok_or_else(|| {
        let why =
            format!("error looking up service account {}/{name}: serviceaccount \"{name}\" not found", ctx.namespace);
        forbidden(ctx, pod, phase, &why)
    })
}

/// The pod's `automountServiceAccountToken` wins, then the account's; the default is to mount.
fn should_automount(account: &Value, pod: &Value) -> bool {
    pod["spec"]["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| account["automountServiceAccountToken"].as_bool())
        .unwrap_or(true)
}

/// Mounts the `kube-api-access-*` projected volume at the token path in every container and
/// init container that has nothing mounted there, adding the volume when one needs it.
fn mount_token(pod: &mut Value) {
    let existing = items(pod, "/spec/volumes")
        .iter()
        .map(|v| text(v, "/name"))
        .find(|name| name.starts_with(TOKEN_VOLUME_PREFIX))
        .map(str::to_string);
    let volume_name =
        existing.clone().unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{}", crate::random::name_suffix(5)));
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needs_volume = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else { continue };
        for container in containers.iter_mut().filter(|c| c.is_object()) {
            if items(container, "/volumeMounts").iter().any(|m| text(m, "/mountPath") == TOKEN_MOUNT_PATH) {
                continue;
            }
            if let Some(mounts) = array_mut(container, "", "volumeMounts") {
                mounts.push(mount.clone());
                needs_volume = true;
            }
        }
    }
    if existing.is_none()
        && needs_volume
        && let Some(volumes) = array_mut(pod, "/spec", "volumes")
    {
        volumes.push(token_volume(&volume_name));
    }
}

/// The projected volume of a bound service account token (`TokenVolumeSource`).
fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [
                    {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
                ]}},
            ],
        },
    })
}

/// Whether the account's annotation asks for mountable-secret enforcement (Go's `ParseBool`).
fn enforces_mountable_secrets(account: &Value) -> bool {
    matches!(
        annotation(account, ENFORCE_MOUNTABLE_SECRETS_ANNOTATION),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// A secret the pod names but its service account does not reference
/// (`limitSecretReferences`' refusals).
#[derive(Debug, thiserror::Error)]
enum UnreferencedSecret {
    /// A secret volume.
    #[error(
        "volume with secret.secretName=\"{secret}\" is not allowed because service account {account} does not reference that secret"
    )]
    Volume {
        /// The secret.
        secret: String,
        /// The service account.
        account: String,
    },
    /// A container's env var from a secret key.
    #[error(
        "{what} {container} with envVar {env} referencing secret.secretName=\"{secret}\" is not allowed because service account {account} does not reference that secret"
    )]
    EnvVar {
        /// "init container" or "container".
        what: &'static str,
        /// The container.
        container: String,
        /// The env var.
        env: String,
        /// The secret.
        secret: String,
        /// The service account.
        account: String,
    },
    /// An image pull secret.
    #[error(
        "imagePullSecrets[{index}].name=\"{secret}\" is not allowed because service account {account} does not reference that imagePullSecret"
    )]
    ImagePull {
        /// Its index in the pod's list.
        index: usize,
        /// The secret.
        secret: String,
        /// The service account.
        account: String,
    },
}

/// `limitSecretReferences`: secret volumes, secret env vars and pull secrets must be ones the
/// account lists.
fn limit_secret_references(account: &Value, pod: &Value) -> Result<(), UnreferencedSecret> {
    let account_name = text(account, "/metadata/name");
    let mountable: Vec<&str> = items(account, "/secrets").iter().map(|s| text(s, "/name")).collect();
    for volume in items(pod, "/spec/volumes") {
        if let Some(secret) = volume.get("secret").filter(|s| s.is_object()) {
            let name = text(secret, "/secretName");
            if !mountable.contains(&name) {
                return Err(UnreferencedSecret::Volume { secret: name.to_string(), account: account_name.to_string() });
            }
        }
    }
    for (list, what) in [("initContainers", "init container"), ("containers", "container")] {
        for container in items(pod, &format!("/spec/{list}")) {
            for env in items(container, "/env") {
                let Some(reference) = env.pointer("/valueFrom/secretKeyRef").filter(|r| r.is_object()) else {
                    continue;
                };
                let name = text(reference, "/name");
                if !mountable.contains(&name) {
                    return Err(UnreferencedSecret::EnvVar {
                        what,
                        container: text(container, "/name").to_string(),
                        env: text(env, "/name").to_string(),
                        secret: name.to_string(),
                        account: account_name.to_string(),
                    });
                }
            }
        }
    }
    let pullable: Vec<&str> = items(account, "/imagePullSecrets").iter().map(|s| text(s, "/name")).collect();
    for (i, reference) in items(pod, "/spec/imagePullSecrets").iter().enumerate() {
        let name = text(reference, "/name");
        if !pullable.contains(&name) {
            return Err(UnreferencedSecret::ImagePull {
                index: i,
                secret: name.to_string(),
                account: account_name.to_string(),
            });
        }
    }
    Ok(())
}

/// Whether a pod names any secret (`podutil.VisitPodSecretNames` over all containers).
fn references_secrets(pod: &Value) -> bool {
    if !items(pod, "/spec/imagePullSecrets").is_empty() {
        return true;
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(pod, &format!("/spec/{list}")) {
            if items(container, "/envFrom").iter().any(|e| e["secretRef"].is_object())
                || items(container, "/env")
                    .iter()
                    .any(|e| e.pointer("/valueFrom/secretKeyRef").is_some_and(Value::is_object))
            {
                return true;
            }
        }
    }
    const SECRET_REFERENCES: &[&str] = &[
        "/secret",
        "/azureFile/secretName",
        "/cephfs/secretRef",
        "/cinder/secretRef",
        "/flexVolume/secretRef",
        "/rbd/secretRef",
        "/scaleIO/secretRef",
        "/iscsi/secretRef",
        "/storageos/secretRef",
        "/csi/nodePublishSecretRef",
    ];
    items(pod, "/spec/volumes").iter().any(|volume| {
        SECRET_REFERENCES.iter().any(|p| volume.pointer(p).is_some_and(|v| !v.is_null()))
            || items(volume, "/projected/sources").iter().any(|s| s["secret"].is_object())
    })
}

fn uses_token_projection(pod: &Value) -> bool {
    items(pod, "/spec/volumes")
        .iter()
        .any(|volume| items(volume, "/projected/sources").iter().any(|s| s["serviceAccountToken"].is_object()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use super::*;
    use crate::sandbox::storage::store::Store;

    #[test]
    fn a_pod_gets_the_default_account_and_the_token_volume() {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let mut p = pod("team", "p");
        p["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox"}]);
        let stored = create(&store, "", "pods", "team", p).unwrap();
        assert_eq!(stored["spec"]["serviceAccountName"], "default");
        assert_eq!(stored["spec"]["serviceAccount"], "default");
        let volumes = stored["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 1);
        let name = volumes[0]["name"].as_str().unwrap();
        assert!(name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5, "{name}");
        assert_eq!(volumes[0], token_volume(name));
        assert_eq!(volumes[0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3607);
        for list in ["containers", "initContainers"] {
            assert_eq!(
                stored["spec"][list][0]["volumeMounts"],
                json!([{"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
            );
        }
    }

    #[test]
    fn a_missing_account_is_refused() {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let mut p = pod("team", "p");
        p["spec"]["serviceAccountName"] = json!("builder");
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(err.reason(), "Forbidden");
        assert_eq!(
            err.message(),
            "pods \"p\" is forbidden: error looking up service account team/builder: serviceaccount \"builder\" not found"
        );
        let err = create(&store, "", "pods", "other", pod("other", "q")).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"q\" is forbidden: error looking up service account other/default: serviceaccount \"default\" not found"
        );
    }

    #[test]
    fn automount_can_be_turned_off_and_existing_mounts_are_kept() {
        let store = Store::default();
        seed(
            &store,
            "serviceaccounts",
            vec![
                json!({"metadata": {"namespace": "team", "name": "default"}}),
                json!({"metadata": {"namespace": "team", "name": "quiet"}, "automountServiceAccountToken": false,
                       "imagePullSecrets": [{"name": "registry"}]}),
            ],
        );
        let mut off = pod("team", "off");
        off["spec"]["automountServiceAccountToken"] = json!(false);
        let stored = create(&store, "", "pods", "team", off).unwrap();
        assert!(stored["spec"]["volumes"].is_null());
        assert!(stored["spec"]["containers"][0]["volumeMounts"].is_null());

        let mut quiet = pod("team", "quiet");
        quiet["spec"]["serviceAccountName"] = json!("quiet");
        let stored = create(&store, "", "pods", "team", quiet).unwrap();
        assert!(stored["spec"]["volumes"].is_null());
        assert_eq!(stored["spec"]["imagePullSecrets"], json!([{"name": "registry"}]));

        let mut own = pod("team", "own");
        own["spec"]["containers"] = json!([
            {"name": "a", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]},
            {"name": "b"},
        ]);
        let stored = create(&store, "", "pods", "team", own).unwrap();
        assert_eq!(stored["spec"]["containers"][0]["volumeMounts"].as_array().unwrap().len(), 1);
        assert_eq!(stored["spec"]["containers"][1]["volumeMounts"].as_array().unwrap().len(), 1);
        assert_eq!(stored["spec"]["volumes"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn mirror_pods_may_not_reference_accounts_or_secrets() {
        let store = Store::default();
        let mut mirror = pod("kube-system", "etcd-node1");
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        let stored = create(&store, "", "pods", "kube-system", mirror.clone()).unwrap();
        assert!(stored["spec"]["serviceAccountName"].is_null());
        mirror["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}]);
        let err = create(&store, "", "pods", "kube-system", mirror).unwrap_err();
        assert_eq!(err.message(), "pods \"etcd-node1\" is forbidden: a mirror pod may not reference secrets");
    }

    #[test]
    fn mountable_secrets_are_enforced_when_the_account_asks() {
        let store = Store::default();
        seed(
            &store,
            "serviceaccounts",
            vec![json!({"metadata": {"namespace": "team", "name": "default",
                "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
                "secrets": [{"name": "allowed"}]})],
        );
        let mut p = pod("team", "p");
        p["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "other"}}]);
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"p\" is forbidden: volume with secret.secretName=\"other\" is not allowed because service account default does not reference that secret"
        );
    }
}
