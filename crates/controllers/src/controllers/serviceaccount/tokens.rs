//! `serviceaccount-token-controller`, after upstream's `TokensController`
//! (`pkg/controller/serviceaccount/tokens_controller.go`): Secrets of type
//! `kubernetes.io/service-account-token` that name an existing ServiceAccount get a signed legacy
//! JWT as `token`, the CA bundle as `ca.crt` and their namespace as `namespace`; token Secrets
//! whose ServiceAccount is gone (or was recreated with another UID) are deleted, and a deleted
//! token Secret is dropped from its account's `secrets`.
//!
//! As upstream, two queues with N workers each: `serviceaccount_tokens_service` carries the
//! accounts' keys and `serviceaccount_tokens_secret` the secrets'.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};

use super::{Error, SERVICE_ACCOUNT_NAME_ANNOTATION, SERVICE_ACCOUNT_UID_ANNOTATION, TOKEN_SECRET_TYPE};
use crate::apimachinery::errors::Aggregate;
use crate::client::{Api, Client, DeleteParams, PostParams, Preconditions};
use crate::jwt::{self, SigningKey};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::{QueueItem, WorkQueue};

/// The data keys of a token Secret (`v1.ServiceAccountTokenKey` & co.).
pub const TOKEN_KEY: &str = "token";
pub const ROOT_CA_KEY: &str = "ca.crt";
pub const NAMESPACE_KEY: &str = "namespace";

/// A key is retried this many times, then dropped (`maxRetries`).
const MAX_RETRIES: u32 = 10;
/// `RemoveTokenBackoff`: 10 tries, 100 ms apart with full jitter.
const REMOVE_REFERENCE_TRIES: u32 = 10;
const REMOVE_REFERENCE_INTERVAL: Duration = Duration::from_millis(100);

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-serviceaccount-token-syncs`.
    pub workers: usize,
    /// `--service-account-private-key-file`.
    pub private_key_file: std::path::PathBuf,
    /// The CA bundle put in token Secrets.
    pub root_ca: String,
}

/// `NewTokensController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, Error> {
    let key = SigningKey::from_pem_file(&config.private_key_file).map_err(|e| Error::ReadKey(e.into()))?;
    let root_ca = config.root_ca;
    let queue = WorkQueue::new("serviceaccount_tokens_service");
    let secret_queue = WorkQueue::new("serviceaccount_tokens_secret");
    let controller = Arc::new(TokensController {
        name: context.name,
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
        on_account.add(AccountKey::of(event.object()));
    });
    let on_secret = secret_queue.clone();
    controller.secrets.add_handler(move |event: &Event<Secret>| {
        let secret = event.object();
        if secret.type_.as_deref() == Some(TOKEN_SECRET_TYPE) {
            on_secret.add(SecretKey::of(secret));
        }
    });
    let secrets = controller.clone();
    Ok(Controller::new()
        .with_queue(&queue, config.workers, move |key: &AccountKey| controller.sync_account_key(key))
        .with_queue(&secret_queue, config.workers, move |key: &SecretKey| secrets.sync_secret_key(key)))
}

/// `serviceAccountQueueKey`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AccountKey {
    namespace: String,
    name: String,
    uid: String,
}

/// `secretQueueKey`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SecretKey {
    namespace: String,
    name: String,
    uid: String,
    account: String,
    account_uid: String,
}

fn text(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

fn annotation(secret: &Secret, key: &str) -> String {
    secret.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned().unwrap_or_default()
}

impl AccountKey {
    fn of(account: &ServiceAccount) -> AccountKey {
        let meta = &account.metadata;
        AccountKey { namespace: text(&meta.namespace), name: text(&meta.name), uid: text(&meta.uid) }
    }

    /// `parseServiceAccountKey`'s rules: every part is required.
    fn check(&self) -> Result<(), Error> {
        match [&self.namespace, &self.name, &self.uid].iter().any(|part| part.is_empty()) {
            true => Err(Error::InvalidKey(format!("{self:?}"))),
            false => Ok(()),
        }
    }
}

impl SecretKey {
    fn of(secret: &Secret) -> SecretKey {
        let meta = &secret.metadata;
        SecretKey {
            namespace: text(&meta.namespace),
            name: text(&meta.name),
            uid: text(&meta.uid),
            account: annotation(secret, SERVICE_ACCOUNT_NAME_ANNOTATION),
            account_uid: annotation(secret, SERVICE_ACCOUNT_UID_ANNOTATION),
        }
    }

    /// `parseSecretQueueKey`'s rules: every part but the account UID is required.
    fn check(&self) -> Result<(), Error> {
        match [&self.namespace, &self.name, &self.uid, &self.account].iter().any(|part| part.is_empty()) {
            true => Err(Error::InvalidKey(format!("{self:?}"))),
            false => Ok(()),
        }
    }
}

/// The outcome of one step: an error, and whether it is worth a retry.
type Step = Result<(), (bool, Error)>;

struct TokensController {
    /// The controller's name, for its logs.
    name: &'static str,
    client: Client,
    key: SigningKey,
    root_ca: String,
    accounts: Arc<Informer<ServiceAccount>>,
    secrets: Arc<Informer<Secret>>,
    /// `syncServiceAccountQueue`, the main queue.
    account_queue: WorkQueue<AccountKey>,
    /// `syncSecretQueue`.
    secret_queue: WorkQueue<SecretKey>,
}

impl TokensController {
    /// `syncServiceAccount` for one key of its queue.
    fn sync_account_key(&self, key: &AccountKey) -> SyncResult {
        let step = key.check().map_err(|e| (false, e));
        let step = step.and_then(|()| self.sync_account(&key.namespace, &key.name, &key.uid));
        self.retry_or_forget(step, &self.account_queue, key)
    }

    /// `syncSecret` for one key of its queue.
    fn sync_secret_key(&self, key: &SecretKey) -> SyncResult {
        let step = key.check().map_err(|e| (false, e));
        let SecretKey { namespace, name, uid, account, account_uid } = key;
        let step = step.and_then(|()| self.sync_secret(namespace, name, uid, account, account_uid));
        self.retry_or_forget(step, &self.secret_queue, key)
    }

    /// `retryOrForget`: requeue a retriable failure up to MAX_RETRIES times.
    fn retry_or_forget<K: QueueItem>(&self, step: Step, queue: &WorkQueue<K>, key: &K) -> SyncResult {
        match step {
            Ok(()) => Ok(()),
            Err((true, e)) if queue.num_requeues(key) < MAX_RETRIES => Err(SyncError::of(e)),
            Err((_, e)) => {
                log::error!("{}: {e}", self.name);
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
    ) -> Result<Option<ServiceAccount>, (bool, Error)> {
        let matches = |sa: &ServiceAccount| uid.is_empty() || sa.metadata.uid.as_deref() == Some(uid);
        if let Some(sa) = self.accounts.store().get_by_name(namespace, name).filter(|sa| matches(sa)) {
            return Ok(Some((*sa).clone()));
        }
        if !fetch_on_miss {
            return Ok(None);
        }
        let live = Api::<ServiceAccount>::namespaced(&self.client, namespace).get_opt(name);
        let live = live
            .map_err(|source| (true, Error::GetAccount { namespace: namespace.into(), name: name.into(), source }))?;
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
        Aggregate::from_errors(errors).map_err(|all| (retry, Error::DeleteTokens(all)))
    }

    /// `deleteToken`, with the Secret's UID as precondition; gone or replaced is fine.
    fn delete_token(&self, namespace: &str, name: &str, uid: &str) -> Step {
        let preconditions =
            (!uid.is_empty()).then(|| Preconditions { uid: Some(uid.to_string()), resource_version: None });
        let params = DeleteParams { preconditions, ..DeleteParams::default() };
        match Api::<Secret>::namespaced(&self.client, namespace).delete(name, &params) {
            Err(source) if !source.is_not_found() && !source.is_conflict() => {
                Err((true, Error::DeleteToken { namespace: namespace.into(), name: name.into(), source }))
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
            Err(source) => {
                let retry = !source.is_not_found();
                return Err((retry, Error::GetSecret { namespace, name, source }));
            }
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
            let token = jwt::sign(&self.key, &claims).map_err(|e| (false, Error::Sign(e.into())))?;
            data.insert(TOKEN_KEY.into(), ByteString(token.into_bytes()));
        }
        let annotations = live.metadata.annotations.get_or_insert_default();
        annotations.insert(SERVICE_ACCOUNT_NAME_ANNOTATION.into(), text(&sa.metadata.name));
        annotations.insert(SERVICE_ACCOUNT_UID_ANNOTATION.into(), text(&sa.metadata.uid));
        match api.replace(&name, &live, &PostParams::default()) {
            // Someone else changed it (we will hear of it) or it is gone.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(source) => Err((true, Error::PopulateToken { namespace, name, source })),
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
    ) -> Result<(), Error> {
        let api = Api::<ServiceAccount>::namespaced(&self.client, namespace);
        for attempt in 1..=REMOVE_REFERENCE_TRIES {
            let Some(mut sa) = api.get_opt(account).map_err(Error::RemoveReference)? else { return Ok(()) };
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
                Err(e) => return Err(Error::RemoveReference(e)),
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
    use serde_json::json;

    #[test]
    fn keys_need_their_parts() {
        let account = AccountKey { namespace: "ns".into(), name: "a".into(), uid: "u".into() };
        assert!(account.check().is_ok());
        let secret = SecretKey {
            namespace: "ns".into(),
            name: "a-token".into(),
            uid: "s".into(),
            account: "odd/name\"".into(),
            account_uid: "".into(),
        };
        assert!(secret.check().is_ok());
        assert!(AccountKey { uid: "".into(), ..account }.check().is_err(), "no uid");
        assert!(SecretKey { account: "".into(), ..secret }.check().is_err(), "no account name");
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
