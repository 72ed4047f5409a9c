//! `legacy-serviceaccount-token-cleaner-controller`, after upstream's `LegacySATokenCleaner`
//! (`pkg/controller/serviceaccount/legacy_serviceaccount_token_cleaner.go`): once
//! kube-apiserver has tracked legacy token use for `--legacy-service-account-token-clean-up-period`,
//! auto-generated token Secrets unused for that long and mounted by no pod are first labelled
//! `kubernetes.io/legacy-token-invalid-since=<today>` (kube-apiserver then refuses them), and
//! deleted once that label is itself a period old.
//!
//! Upstream evaluates every Secret each `DefaultCleanerSyncInterval` (24 h) from a
//! `wait.UntilWithContext` loop, without a workqueue: here an unnamed queue (one without
//! metrics, so `/metrics` shows no queue upstream lacks) holds one key that each evaluation
//! re-adds after the interval.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use serde_json::{Value, json};

use super::{Error, SERVICE_ACCOUNT_NAME_ANNOTATION, SERVICE_ACCOUNT_UID_ANNOTATION, TOKEN_SECRET_TYPE};
use crate::client::{Api, Client, DeleteParams, Patch, PostParams, Preconditions};
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::informer::Informer;

/// `DefaultCleanerSyncInterval`.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// `serviceaccount.LastUsedLabelKey`, kept current by kube-apiserver.
pub const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
/// `serviceaccount.InvalidSinceLabelKey`.
pub const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";
/// `legacytokentracking.ConfigMapName` in kube-system, with the date tracking began as `since`.
pub const TRACKING_CONFIG_MAP: &str = "kube-apiserver-legacy-service-account-token-tracking";
const TRACKING_SINCE_KEY: &str = "since";
/// Go's `"2006-01-02"`.
const DATE_FORMAT: &str = "%Y-%m-%d";

/// The controller's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--legacy-service-account-token-clean-up-period`: how long a token may go unused.
    pub period: Duration,
}

/// `NewLegacySATokenCleaner`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, Error> {
    let period = config.period;
    if period.is_zero() {
        return Err(Error::InvalidCleanUpPeriod(period));
    }
    let cleaner = Arc::new(LegacyTokenCleaner {
        name: context.name,
        client: context.client.clone(),
        accounts: context.informers.informer::<ServiceAccount>(),
        secrets: context.informers.informer::<Secret>(),
        pods: context.informers.informer::<Pod>(),
        period,
    });
    Ok(Controller::new().every("evaluate", DEFAULT_SYNC_INTERVAL, move || cleaner.evaluate_now()))
}

struct LegacyTokenCleaner {
    /// The controller's name, for its logs.
    name: &'static str,
    client: Client,
    accounts: Arc<Informer<ServiceAccount>>,
    secrets: Arc<Informer<Secret>>,
    pods: Arc<Informer<Pod>>,
    period: Duration,
}

impl LegacyTokenCleaner {
    /// One pass of `wait.Until(evaluateSATokens, syncInterval)`.
    fn evaluate_now(&self) {
        if let Err(e) = self.evaluate(Timestamp::now()) {
            log::error!("{}: {e}", self.name);
        }
    }
}

/// What to do to one Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Label it invalid since `date`.
    MarkInvalid { namespace: String, name: String, uid: String, date: String },
    /// Delete it, if still at `resource_version`.
    Delete { namespace: String, name: String, resource_version: String },
}

impl LegacyTokenCleaner {
    /// `evaluateSATokens`.
    fn evaluate(&self, now: Timestamp) -> Result<(), Error> {
        let tracked_since = self.tracked_since()?;
        let mut mounted: HashMap<String, HashSet<String>> = HashMap::new();
        let secrets = self.secrets.store().list();
        let account = |secret: &Secret| self.account_of(secret);
        let mounted_in = |namespace: &str| {
            mounted
                .entry(namespace.to_string())
                .or_insert_with(|| {
                    self.pods.store().list_namespace(namespace).iter().flat_map(|p| pod_secret_names(p)).collect()
                })
                .clone()
        };
        for action in plan(now, tracked_since, self.period, &secrets, account, mounted_in) {
            self.apply(action);
        }
        Ok(())
    }

    fn apply(&self, action: Action) {
        match action {
            Action::MarkInvalid { namespace, name, uid, date } => {
                log::info!(
                    "Mark the auto-generated service account token as invalid invalidSince={date} secret={namespace}/{name}"
                );
                let patch = json!({"kind": "Secret", "apiVersion": "v1",
                    "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": {INVALID_SINCE_LABEL: date}}});
                let api = Api::<Secret>::namespaced(&self.client, &namespace);
                if let Err(e) = api.patch(&name, &Patch::Merge(patch), &PostParams::default()) {
                    log::error!("Failed to label legacy service account token secret with invalid since date: {e}");
                }
            }
            Action::Delete { namespace, name, resource_version } => {
                log::info!("Delete auto-generated service account token secret={namespace}/{name}");
                let preconditions = Some(Preconditions { uid: None, resource_version: Some(resource_version) });
                let params = DeleteParams { preconditions, ..DeleteParams::default() };
                match Api::<Secret>::namespaced(&self.client, &namespace).delete(&name, &params) {
                    Err(e) if !e.is_conflict() && !e.is_not_found() => {
                        log::error!("Deleting legacy service account token {namespace}/{name}: {e}");
                    }
                    _ => {}
                }
            }
        }
    }

    /// `latestPossibleTrackedSinceTime`: the day after kube-apiserver began tracking use.
    fn tracked_since(&self) -> Result<Timestamp, Error> {
        let config_map = Api::<ConfigMap>::namespaced(&self.client, "kube-system").get(TRACKING_CONFIG_MAP);
        let config_map = config_map.map_err(Error::TrackingConfigMap)?;
        let since = config_map.data.as_ref().and_then(|d| d.get(TRACKING_SINCE_KEY));
        let since = since.ok_or(Error::NoTrackedSince)?;
        let date = parse_date(since).ok_or_else(|| Error::ParseTrackedSince(since.clone()))?;
        let next_day = date.tomorrow()?;
        Ok(next_day.to_zoned(TimeZone::UTC).map(|z| z.timestamp())?)
    }

    /// `getServiceAccount`: the account a Secret names, if it exists with the named UID.
    fn account_of(&self, secret: &Secret) -> Option<Arc<ServiceAccount>> {
        let name = label_or_annotation(secret.metadata.annotations.as_ref(), SERVICE_ACCOUNT_NAME_ANNOTATION)?;
        let uid = label_or_annotation(secret.metadata.annotations.as_ref(), SERVICE_ACCOUNT_UID_ANNOTATION);
        let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
        let account = self.accounts.store().get_by_name(namespace, name)?;
        (uid.is_none_or(|u| u.is_empty() || account.metadata.uid.as_deref() == Some(u))).then_some(account)
    }
}

fn label_or_annotation<'a>(map: Option<&'a std::collections::BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    map.and_then(|m| m.get(key)).map(String::as_str).filter(|v| !v.is_empty())
}

/// A `YYYY-MM-DD` date, strictly.
fn parse_date(text: &str) -> Option<Date> {
    Date::strptime(DATE_FORMAT, text).ok()
}

fn format_date(at: Timestamp) -> String {
    at.to_zoned(TimeZone::UTC).date().strftime(DATE_FORMAT).to_string()
}

/// The decisions of one evaluation at `now`, given when tracking began (`tracked_since`), the
/// cached Secrets, the account of a Secret, and the Secret names pods of a namespace use.
pub fn plan(
    now: Timestamp,
    tracked_since: Timestamp,
    period: Duration,
    secrets: &[Arc<Secret>],
    account_of: impl Fn(&Secret) -> Option<Arc<ServiceAccount>>,
    mut mounted_in: impl FnMut(&str) -> HashSet<String>,
) -> Vec<Action> {
    let Ok(period) = jiff::SignedDuration::try_from(period) else { return Vec::new() };
    if tracked_since.checked_add(period).is_ok_and(|ready| now < ready) {
        return Vec::new(); // Not tracking long enough.
    }
    let Ok(preserve_created_on_or_after) = now.checked_sub(period) else { return Vec::new() };
    let preserve_used_on_or_after = format_date(preserve_created_on_or_after);
    let mut actions = Vec::new();
    for secret in secrets {
        let meta = &secret.metadata;
        let labels = meta.labels.as_ref();
        let old_enough = meta.creation_timestamp.as_ref().is_some_and(|t| t.0 < preserve_created_on_or_after);
        if secret.type_.as_deref() != Some(TOKEN_SECRET_TYPE) || !old_enough || meta.deletion_timestamp.is_some() {
            continue;
        }
        // No last-used label: not used since tracking began.
        if let Some(last_used) = labels.and_then(|l| l.get(LAST_USED_LABEL)) {
            if parse_date(last_used).is_none() {
                log::error!("Parsing lastUsed time of secret {}: {last_used:?}", object_name(secret));
                continue;
            }
            if *last_used >= preserve_used_on_or_after {
                continue;
            }
        }
        let (namespace, name) = (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default());
        // Only tokens an account lists can be known to be auto-generated.
        let Some(account) = account_of(secret) else { continue };
        if !account.secrets.iter().flatten().any(|r| r.name.as_deref() == Some(name.as_str())) {
            continue;
        }
        if mounted_in(&namespace).contains(&name) {
            continue;
        }
        let invalid_since = labels.and_then(|l| l.get(INVALID_SINCE_LABEL)).filter(|d| parse_date(d).is_some());
        match invalid_since {
            None => actions.push(Action::MarkInvalid {
                namespace,
                name,
                uid: meta.uid.clone().unwrap_or_default(),
                date: format_date(now),
            }),
            Some(since) if *since >= preserve_used_on_or_after => {}
            Some(_) => actions.push(Action::Delete {
                namespace,
                name,
                resource_version: meta.resource_version.clone().unwrap_or_default(),
            }),
        }
    }
    actions
}

fn object_name(secret: &Secret) -> String {
    format!("{}/{}", secret.metadata.namespace.as_deref().unwrap_or(""), secret.metadata.name.as_deref().unwrap_or(""))
}

/// `podutil.VisitPodSecretNames`: every Secret a pod references.
pub fn pod_secret_names(pod: &Pod) -> Vec<String> {
    let Ok(pod) = crate::apimachinery::json::to_value(pod) else { return Vec::new() };
    let spec = &pod["spec"];
    let mut names = Vec::new();
    let mut push = |value: &Value| {
        if let Some(name) = value.as_str().filter(|n| !n.is_empty()) {
            names.push(name.to_string());
        }
    };
    let items = |value: &Value| value.as_array().cloned().unwrap_or_default();
    for reference in items(&spec["imagePullSecrets"]) {
        push(&reference["name"]);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(&spec[list]) {
            for source in items(&container["envFrom"]) {
                push(&source["secretRef"]["name"]);
            }
            for variable in items(&container["env"]) {
                push(&variable["valueFrom"]["secretKeyRef"]["name"]);
            }
        }
    }
    for volume in items(&spec["volumes"]) {
        push(&volume["azureFile"]["secretName"]);
        push(&volume["secret"]["secretName"]);
        push(&volume["csi"]["nodePublishSecretRef"]["name"]);
        for plugin in ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"] {
            push(&volume[plugin]["secretRef"]["name"]);
        }
        for source in items(&volume["projected"]["sources"]) {
            push(&source["secret"]["name"]);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(365 * 24 * 60 * 60);

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    fn token(name: &str, created: &str, labels: Value) -> Arc<Secret> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "7",
                    "creationTimestamp": created, "labels": labels,
                    "annotations": {"kubernetes.io/service-account.name": "builder", "kubernetes.io/service-account.uid": "sa-uid"}},
                "type": "kubernetes.io/service-account-token"}))
            .expect("secret"),
        )
    }

    fn account(listed: &[&str]) -> Arc<ServiceAccount> {
        let secrets: Vec<Value> = listed.iter().map(|n| json!({"name": n})).collect();
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "builder", "uid": "sa-uid"}, "secrets": secrets}))
                .unwrap(),
        )
    }

    fn run(now: &str, secrets: &[Arc<Secret>], mounted: &[&str]) -> Vec<Action> {
        let sa = account(&["old", "used", "mounted", "invalid-long", "invalid-recent", "fresh", "bad-label"]);
        let mounted: HashSet<String> = mounted.iter().map(|s| s.to_string()).collect();
        plan(at(now), at("2024-01-02T00:00:00Z"), PERIOD, secrets, |_| Some(sa.clone()), |_| mounted.clone())
    }

    #[test]
    fn nothing_happens_until_use_was_tracked_for_a_whole_period() {
        let secrets = [token("old", "2020-01-01T00:00:00Z", json!({}))];
        assert_eq!(run("2024-12-31T23:59:59Z", &secrets, &[]), []);
        assert_eq!(run("2025-01-01T00:00:00Z", &secrets, &[]).len(), 1);
    }

    #[test]
    fn unused_unmounted_listed_tokens_are_invalidated_then_deleted_a_period_later() {
        let now = "2025-06-01T10:00:00Z";
        let secrets = [
            token("old", "2020-01-01T00:00:00Z", json!({})),
            token("used", "2020-01-01T00:00:00Z", json!({LAST_USED_LABEL: "2024-06-01"})),
            token("mounted", "2020-01-01T00:00:00Z", json!({})),
            token("fresh", "2025-01-01T00:00:00Z", json!({})),
            token("unlisted", "2020-01-01T00:00:00Z", json!({})),
            token("bad-label", "2020-01-01T00:00:00Z", json!({LAST_USED_LABEL: "yesterday"})),
            token("invalid-recent", "2020-01-01T00:00:00Z", json!({INVALID_SINCE_LABEL: "2024-06-01"})),
            token("invalid-long", "2020-01-01T00:00:00Z", json!({INVALID_SINCE_LABEL: "2024-05-31"})),
        ];
        let actions = run(now, &secrets, &["mounted"]);
        assert_eq!(
            actions,
            [
                Action::MarkInvalid {
                    namespace: "ns".into(),
                    name: "old".into(),
                    uid: "uid-old".into(),
                    date: "2025-06-01".into()
                },
                Action::Delete { namespace: "ns".into(), name: "invalid-long".into(), resource_version: "7".into() },
            ]
        );
        // A day later the last-used date of "used" is a full period old too.
        let later = run("2025-06-02T10:00:00Z", &secrets[1..2], &[]);
        assert!(matches!(later.as_slice(), [Action::MarkInvalid { name, .. }] if name == "used"));
    }

    #[test]
    fn pods_reference_secrets_in_many_places() {
        let pod: Pod = serde_json::from_value(json!({"spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "env-from"}}],
                "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-var", "key": "k"}}}]}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
            "volumes": [{"name": "a", "secret": {"secretName": "volume"}},
                {"name": "b", "projected": {"sources": [{"secret": {"name": "projected"}}]}},
                {"name": "c", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "d", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": "rbd"}}}]}}))
        .unwrap();
        let mut names = pod_secret_names(&pod);
        names.sort();
        assert_eq!(names, ["csi", "env-from", "env-var", "init-env", "projected", "pull", "rbd", "volume"]);
    }
}
