//! `bootstrap-signer-controller`, after upstream's `Signer` (`bootstrapsigner.go`): the
//! ConfigMap `kube-public/cluster-info` carries a `jws-kubeconfig-<token-id>` detached JWS of
//! its `kubeconfig` for every bootstrap token of kube-system that may sign (valid, unexpired,
//! `usage-bootstrap-signing: "true"`); other signatures are removed. Any change to the
//! ConfigMap or to a token queues the one ConfigMap key; one worker re-signs it.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::jws::detached_signature;
use super::token::{CLUSTER_INFO, JWS_KEY_PREFIX, KUBECONFIG_KEY, for_signing, is_token_in};
use crate::client::{Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `api.NamespacePublic`.
const CONFIG_MAP_NAMESPACE: &str = "kube-public";
/// `api.NamespaceSystem`: where the tokens live.
const TOKEN_NAMESPACE: &str = "kube-system";

/// `NewSigner` with `DefaultSignerOptions` (no resync). It cannot fail: its informers are
/// the shared ones.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("bootstrap_signer_queue");
    let signer = Arc::new(Signer {
        client: context.client.clone(),
        secrets: context.informers.informer::<Secret>(),
        config_maps: context.informers.informer::<ConfigMap>(),
    });
    let key = format!("{CONFIG_MAP_NAMESPACE}/{CLUSTER_INFO}");
    let poke = queue.clone();
    let cm_key = key.clone();
    signer.config_maps.add_handler(move |event: &Event<ConfigMap>| {
        let cm = match event {
            Event::Added(cm) | Event::Updated { new: cm, .. } => cm,
            Event::Deleted { .. } => return,
        };
        let meta = &cm.metadata;
        if meta.name.as_deref() == Some(CLUSTER_INFO) && meta.namespace.as_deref() == Some(CONFIG_MAP_NAMESPACE) {
            poke.add(cm_key.clone());
        }
    });
    let poke = queue.clone();
    signer.secrets.add_handler(move |event: &Event<Secret>| {
        // A missed deletion reaches upstream's filter as a tombstone, which it drops.
        let missed = matches!(event, Event::Deleted { final_state_unknown: true, .. });
        if !missed && is_token_in(event.object(), TOKEN_NAMESPACE) {
            poke.add(key.clone());
        }
    });
    // `serviceConfigMapQueue` runs in one goroutine.
    Controller::new().with_queue(&queue, 1, move |_: &String| signer.sign_config_map())
}

struct Signer {
    client: Client,
    secrets: Arc<Informer<Secret>>,
    config_maps: Arc<Informer<ConfigMap>>,
}

/// The data cluster-info should hold given `tokens` (ID → secret), or `None` when it holds
/// exactly that already (`signConfigMap`'s `needUpdate`).
fn signed_data(data: &BTreeMap<String, String>, tokens: &BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    let content = data.get(KUBECONFIG_KEY)?;
    let mut new: BTreeMap<String, String> =
        data.iter().filter(|(k, _)| !k.starts_with(JWS_KEY_PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect();
    for (id, secret) in tokens {
        new.insert(format!("{JWS_KEY_PREFIX}{id}"), detached_signature(content, id, secret));
    }
    (new != *data).then_some(new)
}

impl Signer {
    /// `signConfigMap`: errors are logged, never retried (an update of either kind queues
    /// the key again). It reads its own last write until the watch brings it, so that tokens
    /// created in a row do not meet a Conflict.
    fn sign_config_map(&self) -> SyncResult {
        let Some(cm) = self.config_maps.get_newest(&format!("{CONFIG_MAP_NAMESPACE}/{CLUSTER_INFO}")) else {
            return Ok(());
        };
        let data = cm.data.clone().unwrap_or_default();
        if !data.contains_key(KUBECONFIG_KEY) {
            log::debug!("No key in ConfigMap key={KUBECONFIG_KEY} configMap={CONFIG_MAP_NAMESPACE}/{CLUSTER_INFO}");
            return Ok(());
        }
        let Some(new_data) = signed_data(&data, &self.tokens()) else { return Ok(()) };
        let mut updated = (*cm).clone();
        updated.data = Some(new_data);
        let api = Api::<ConfigMap>::namespaced(&self.client, CONFIG_MAP_NAMESPACE);
        match api.replace(CLUSTER_INFO, &updated, &PostParams::default()) {
            Ok(written) => drop(self.config_maps.mutation(written)),
            Err(e) if e.is_conflict() || e.is_not_found() => {}
            Err(e) => log::debug!("Error updating ConfigMap err={e}"),
        }
        Ok(())
    }

    /// `getTokens`: the tokens that may sign, by ID (the first Secret of an ID wins).
    fn tokens(&self) -> BTreeMap<String, String> {
        let now = Timestamp::now();
        let mut tokens = BTreeMap::new();
        for secret in self.secrets.store().list_namespace(TOKEN_NAMESPACE) {
            if !is_token_in(&secret, TOKEN_NAMESPACE) {
                continue;
            }
            let Some((id, token_secret)) = for_signing(&secret, now) else { continue };
            if tokens.contains_key(&id) {
                log::info!("Duplicate bootstrap tokens found for id, ignoring on the duplicate secret tokenID={id:?}");
                continue;
            }
            tokens.insert(id, token_secret);
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn signatures_follow_the_tokens() {
        let tokens = map(&[("abcdef", "0123456789abcdef")]);
        let signature = detached_signature("config", "abcdef", "0123456789abcdef");
        let unsigned = map(&[("kubeconfig", "config"), ("jws-kubeconfig-gone00", "old")]);
        let signed = signed_data(&unsigned, &tokens).expect("an update");
        assert_eq!(signed, map(&[("kubeconfig", "config"), ("jws-kubeconfig-abcdef", &signature)]));
        assert_eq!(signed_data(&signed, &tokens), None, "already signed");
        assert_eq!(signed_data(&signed, &BTreeMap::new()), Some(map(&[("kubeconfig", "config")])));
        assert_eq!(signed_data(&map(&[("other", "x")]), &tokens), None, "no kubeconfig");
    }
}
