//! `serviceaccount-token-controller`, after upstream's `TokensController`
//! (`pkg/controller/serviceaccount/tokens_controller.go`): Secrets of type
//! `kubernetes.io/service-account-token` that name an existing ServiceAccount get a signed legacy
//! JWT as `token`, the CA bundle as `ca.crt` and their namespace as `namespace`; token Secrets
//! whose ServiceAccount is gone (or was recreated with another UID) are deleted, and a deleted
//! token Secret is dropped from its account's `secrets`.
//!
//! As upstream, two queues with N workers each: `serviceaccount_tokens_service` carries the
//! accounts' keys and `serviceaccount_tokens_secret` the secrets' (keys JSON-encoded).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use serde_json::json;

use super::{SERVICE_ACCOUNT_NAME_ANNOTATION, SERVICE_ACCOUNT_UID_ANNOTATION, TOKEN_SECRET_TYPE};
use crate::client::{Api, Client, DeleteParams, PostParams, Preconditions};
use crate::jwt::{self, SigningKey};
use crate::runtime::controller::{ControllerContext, ControllerHandle, Reconciler};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// The data keys of a token Secret (`v1.ServiceAccountTokenKey` & co.).
pub const TOKEN_KEY: &str = "token";
pub const ROOT_CA_KEY: &str = "ca.crt";
pub const NAMESPACE_KEY: &str = "namespace";

/// A key is retried this many times, then dropped (`maxRetries`).
const MAX_RETRIES: u32 = 10;
/// `RemoveTokenBackoff`: 10 tries, 100 ms apart with full jitter.
const REMOVE_REFERENCE_TRIES: u32 = 10;
const REMOVE_REFERENCE_INTERVAL: Duration = Duration::from_millis(100);

/// `startServiceAccountTokenController`: skipped without a private key.
pub(super) fn init(context: &ControllerContext<'_>) -> Result<ControllerHandle, String> {
    let key_file = &context.options.service_account.private_key_file;
    if key_file.is_empty() {
        return Ok(ControllerHandle::disabled(context.name, "Controller is disabled because there is no private key"));
    }
    let key = SigningKey::from_pem_file(Path::new(key_file))
        .map_err(|e| format!("error reading key for service account token controller: {e}"))?;
    let root_ca = super::root_ca(context.options, &context.client)?;
    let queue = WorkQueue::new("serviceaccount_tokens_service");
    let secret_queue = WorkQueue::new("serviceaccount_tokens_secret");
    let controller = Arc::new(TokensController {
        client: context.client.clone(),
        key,
        root_ca,
        accounts: context.informers.informer::<ServiceAccount>(),
        secrets: context.informers.informer::<Secret>(),
        account_queue: queue.clone(),
        secret_queue: secret_queue.clone(),
    });
    let on_account = queue.clone();
    controller.accounts.add_handler(move |event: &Event<ServiceAccount>| {
        on_account.add(Key::of_account(event.object()).encode());
    });
    let on_secret = secret_queue;
    controller.secrets.add_handler(move |event: &Event<Secret>| {
        let secret = event.object();
        if secret.type_.as_deref() == Some(TOKEN_SECRET_TYPE) {
            on_secret.add(Key::of_secret(secret).encode());
        }
    });
    let workers = usize::try_from(context.options.concurrency.serviceaccount_token_syncs).unwrap_or(0);
    Ok(ControllerHandle { queue, reconciler: controller, workers: workers.max(1) })
}

/// A queue key: `serviceAccountQueueKey` or `secretQueueKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Account { namespace: String, name: String, uid: String },
    Secret { namespace: String, name: String, uid: String, account: String, account_uid: String },
}

fn text(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

fn annotation(secret: &Secret, key: &str) -> String {
    secret.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned().unwrap_or_default()
}

impl Key {
    fn of_account(account: &ServiceAccount) -> Key {
        let meta = &account.metadata;
        Key::Account { namespace: text(&meta.namespace), name: text(&meta.name), uid: text(&meta.uid) }
    }

    fn of_secret(secret: &Secret) -> Key {
        let meta = &secret.metadata;
        Key::Secret {
            namespace: text(&meta.namespace),
            name: text(&meta.name),
            uid: text(&meta.uid),
            account: annotation(secret, SERVICE_ACCOUNT_NAME_ANNOTATION),
            account_uid: annotation(secret, SERVICE_ACCOUNT_UID_ANNOTATION),
        }
    }

    fn encode(&self) -> String {
        let parts = match self {
            Key::Account { namespace, name, uid } => json!(["serviceaccount", namespace, name, uid]),
            Key::Secret { namespace, name, uid, account, account_uid } => {
                json!(["secret", namespace, name, uid, account, account_uid])
            }
        };
        parts.to_string()
    }

    /// `parseServiceAccountKey` / `parseSecretQueueKey`: every part but the account UID is
    /// required.
    fn decode(key: &str) -> Result<Key, String> {
        let parts: Vec<String> = serde_json::from_str(key).map_err(|e| format!("invalid key {key:?}: {e}"))?;
        let parsed = match parts.as_slice() {
            [kind, namespace, name, uid] if kind == "serviceaccount" => {
                Key::Account { namespace: namespace.clone(), name: name.clone(), uid: uid.clone() }
            }
            [kind, namespace, name, uid, account, account_uid] if kind == "secret" && !account.is_empty() => {
                Key::Secret {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    account: account.clone(),
                    account_uid: account_uid.clone(),
                }
            }
            _ => return Err(format!("invalid key {key:?}")),
        };
        let (namespace, name, uid) = match &parsed {
            Key::Account { namespace, name, uid } | Key::Secret { namespace, name, uid, .. } => (namespace, name, uid),
        };
        if namespace.is_empty() || name.is_empty() || uid.is_empty() {
            return Err(format!("invalid key {key:?}"));
        }
        Ok(parsed)
    }
}

/// The outcome of one step: an error, and whether it is worth a retry.
type Step = Result<(), (bool, String)>;

struct TokensController {
    client: Client,
    key: SigningKey,
    root_ca: String,
    accounts: Arc<Informer<ServiceAccount>>,
    secrets: Arc<Informer<Secret>>,
    /// `syncServiceAccountQueue`, the main queue.
    account_queue: WorkQueue<String>,
    /// `syncSecretQueue`.
    secret_queue: WorkQueue<String>,
}

impl Reconciler for TokensController {
    fn extra_queues(&self) -> Vec<WorkQueue<String>> {
        vec![self.secret_queue.clone()]
    }

    fn sync(&self, key: &str) -> Result<(), String> {
        let (step, queue) = match Key::decode(key) {
            Err(e) => (Err((false, e)), &self.account_queue),
            Ok(Key::Account { namespace, name, uid }) => {
                (self.sync_account(&namespace, &name, &uid), &self.account_queue)
            }
            Ok(Key::Secret { namespace, name, uid, account, account_uid }) => {
                (self.sync_secret(&namespace, &name, &uid, &account, &account_uid), &self.secret_queue)
            }
        };
        match step {
            Ok(()) => Ok(()),
            // `retryOrForget`: requeue a retriable failure up to MAX_RETRIES times.
            Err((true, e)) if queue.num_requeues(&key.to_string()) < MAX_RETRIES => Err(e),
            Err((_, e)) => {
                log::error!("serviceaccount-token-controller: {e}");
                Ok(())
            }
        }
    }
}

impl TokensController {
    /// `syncServiceAccount`: the tokens of an account that no longer exists are deleted.
    fn sync_account(&self, namespace: &str, name: &str, uid: &str) -> Step {
        if self.account(namespace, name, uid, false)?.is_some() {
            return Ok(());
        }
        log::debug!("service account {namespace}/{name} deleted, removing tokens");
        self.delete_tokens(namespace, name, uid)
    }

    /// `syncSecret`.
    fn sync_secret(&self, namespace: &str, name: &str, uid: &str, account: &str, account_uid: &str) -> Step {
        let cached =
            self.secrets.store().get_by_name(namespace, name).filter(|s| s.metadata.uid.as_deref() == Some(uid));
        let Some(secret) = cached else {
            // The Secret is gone: drop it from its account's `secrets`.
            if self.account(namespace, account, account_uid, false)?.is_some()
                && let Err(e) = self.remove_secret_reference(namespace, account, account_uid, name)
            {
                log::error!("removing secret reference {namespace}/{name} from service account {account}: {e}");
            }
            return Ok(());
        };
        match self.account(namespace, account, account_uid, true)? {
            None => {
                log::debug!("service account {namespace}/{account} does not exist, deleting token {namespace}/{name}");
                self.delete_token(namespace, name, uid)
            }
            Some(sa) => self.generate_token_if_needed(&sa, &secret),
        }
    }

    /// `getServiceAccount`: from the cache, or (`fetch_on_miss`) from the server; an account
    /// whose UID differs from a given `uid` does not count.
    fn account(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        fetch_on_miss: bool,
    ) -> Result<Option<ServiceAccount>, (bool, String)> {
        let matches = |sa: &ServiceAccount| uid.is_empty() || sa.metadata.uid.as_deref() == Some(uid);
        if let Some(sa) = self.accounts.store().get_by_name(namespace, name).filter(|sa| matches(sa)) {
            return Ok(Some((*sa).clone()));
        }
        if !fetch_on_miss {
            return Ok(None);
        }
        let live = Api::<ServiceAccount>::namespaced(&self.client, namespace).get_opt(name);
        let live = live.map_err(|e| (true, format!("getting service account {namespace}/{name}: {e}")))?;
        Ok(live.filter(matches))
    }

    /// `deleteTokens`: every token Secret of the account in the cache.
    fn delete_tokens(&self, namespace: &str, name: &str, uid: &str) -> Step {
        let mut errors = Vec::new();
        let mut retry = false;
        for secret in self.secrets.store().list_namespace(namespace) {
            if !is_token_of(&secret, name, uid) {
                continue;
            }
            if let Err((retriable, e)) =
                self.delete_token(namespace, &text(&secret.metadata.name), &text(&secret.metadata.uid))
            {
                retry |= retriable;
                errors.push(e);
            }
        }
        if errors.is_empty() { Ok(()) } else { Err((retry, errors.join(", "))) }
    }

    /// `deleteToken`, with the Secret's UID as precondition; gone or replaced is fine.
    fn delete_token(&self, namespace: &str, name: &str, uid: &str) -> Step {
        let preconditions =
            (!uid.is_empty()).then(|| Preconditions { uid: Some(uid.to_string()), resource_version: None });
        let params = DeleteParams { preconditions, ..DeleteParams::default() };
        match Api::<Secret>::namespaced(&self.client, namespace).delete(name, &params) {
            Err(e) if !e.is_not_found() && !e.is_conflict() => {
                Err((true, format!("deleting token {namespace}/{name}: {e}")))
            }
            _ => Ok(()),
        }
    }

    /// `secretUpdateNeeded`: (CA, namespace, token) missing or, for the CA, different.
    fn update_needed(&self, secret: &Secret) -> (bool, bool, bool) {
        let data =
            |key: &str| secret.data.as_ref().and_then(|d| d.get(key)).map(|b| b.0.as_slice()).unwrap_or_default();
        let needs_ca = !self.root_ca.is_empty() && data(ROOT_CA_KEY) != self.root_ca.as_bytes();
        (needs_ca, data(NAMESPACE_KEY).is_empty(), data(TOKEN_KEY).is_empty())
    }

    /// `generateTokenIfNeeded`: fills a fresh copy of the Secret, if the cache is current.
    fn generate_token_if_needed(&self, sa: &ServiceAccount, cached: &Secret) -> Step {
        if self.update_needed(cached) == (false, false, false) {
            return Ok(());
        }
        let (namespace, name) = (text(&cached.metadata.namespace), text(&cached.metadata.name));
        let api = Api::<Secret>::namespaced(&self.client, &namespace);
        let mut live = match api.get(&name) {
            Ok(live) => live,
            Err(e) => return Err((!e.is_not_found(), format!("getting secret {namespace}/{name}: {e}"))),
        };
        if live.metadata.resource_version != cached.metadata.resource_version {
            // The update event will bring us back.
            log::debug!("secret {namespace}/{name} is not up to date, skipping token population");
            return Ok(());
        }
        let (needs_ca, needs_namespace, needs_token) = self.update_needed(&live);
        if !needs_ca && !needs_namespace && !needs_token {
            return Ok(());
        }
        let data = live.data.get_or_insert_default();
        if needs_ca {
            data.insert(ROOT_CA_KEY.into(), ByteString(self.root_ca.as_bytes().to_vec()));
        }
        if needs_namespace {
            data.insert(NAMESPACE_KEY.into(), ByteString(namespace.as_bytes().to_vec()));
        }
        if needs_token {
            let claims = jwt::legacy_claims(
                &text(&sa.metadata.namespace),
                &text(&sa.metadata.name),
                &text(&sa.metadata.uid),
                &name,
            );
            let token = jwt::sign(&self.key, &claims).map_err(|e| (false, format!("signing a token: {e}")))?;
            data.insert(TOKEN_KEY.into(), ByteString(token.into_bytes()));
        }
        let annotations = live.metadata.annotations.get_or_insert_default();
        annotations.insert(SERVICE_ACCOUNT_NAME_ANNOTATION.into(), text(&sa.metadata.name));
        annotations.insert(SERVICE_ACCOUNT_UID_ANNOTATION.into(), text(&sa.metadata.uid));
        match api.replace(&name, &live, &PostParams::default()) {
            // Someone else changed it (we will hear of it) or it is gone.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err((true, format!("populating token {namespace}/{name}: {e}"))),
            Ok(_) => Ok(()),
        }
    }

    /// `removeSecretReference` under `RetryOnConflict(RemoveTokenBackoff, …)`.
    fn remove_secret_reference(
        &self,
        namespace: &str,
        account: &str,
        account_uid: &str,
        secret: &str,
    ) -> Result<(), String> {
        let api = Api::<ServiceAccount>::namespaced(&self.client, namespace);
        for attempt in 1..=REMOVE_REFERENCE_TRIES {
            let Some(mut sa) = api.get_opt(account).map_err(|e| e.to_string())? else { return Ok(()) };
            if !account_uid.is_empty() && sa.metadata.uid.as_deref() != Some(account_uid) {
                return Ok(());
            }
            let secrets = sa.secrets.get_or_insert_default();
            if !secrets.iter().any(|r| r.name.as_deref() == Some(secret)) {
                return Ok(());
            }
            secrets.retain(|r| r.name.as_deref() != Some(secret));
            match api.replace(account, &sa, &PostParams::default()) {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) if e.is_conflict() && attempt < REMOVE_REFERENCE_TRIES => {
                    let jitter = crate::random::below(REMOVE_REFERENCE_INTERVAL.as_millis() as u64);
                    std::thread::sleep(REMOVE_REFERENCE_INTERVAL + Duration::from_millis(jitter));
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }
}

/// `IsServiceAccountToken`: a token Secret naming the account (and its UID, when it has one).
pub fn is_token_of(secret: &Secret, account: &str, account_uid: &str) -> bool {
    let uid = annotation(secret, SERVICE_ACCOUNT_UID_ANNOTATION);
    secret.type_.as_deref() == Some(TOKEN_SECRET_TYPE)
        && annotation(secret, SERVICE_ACCOUNT_NAME_ANNOTATION) == account
        && (uid.is_empty() || uid == account_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_need_their_parts() {
        let account = Key::Account { namespace: "ns".into(), name: "a".into(), uid: "u".into() };
        assert_eq!(Key::decode(&account.encode()), Ok(account));
        let secret = Key::Secret {
            namespace: "ns".into(),
            name: "a-token".into(),
            uid: "s".into(),
            account: "odd/name\"".into(),
            account_uid: "".into(),
        };
        assert_eq!(Key::decode(&secret.encode()), Ok(secret));
        assert!(Key::decode(r#"["serviceaccount","ns","a",""]"#).is_err(), "no uid");
        assert!(Key::decode(r#"["secret","ns","s","u","",""]"#).is_err(), "no account name");
        assert!(Key::decode("ns/a").is_err());
    }

    #[test]
    fn token_secrets_belong_to_the_account_they_name() {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "t", "annotations": {
                "kubernetes.io/service-account.name": "builder", "kubernetes.io/service-account.uid": "u1"}},
            "type": "kubernetes.io/service-account-token"}))
        .unwrap();
        assert!(is_token_of(&secret, "builder", "u1"));
        assert!(!is_token_of(&secret, "builder", "u2"), "recreated account");
        assert!(!is_token_of(&secret, "other", "u1"));
        let mut opaque = secret.clone();
        opaque.type_ = Some("Opaque".into());
        assert!(!is_token_of(&opaque, "builder", "u1"));
        let mut no_uid = secret;
        no_uid.metadata.annotations.as_mut().unwrap().remove(SERVICE_ACCOUNT_UID_ANNOTATION);
        assert!(is_token_of(&no_uid, "builder", "anything"));
    }
}
