//! `pkg/controller/history`: the ControllerRevisions in which the DaemonSet and StatefulSet
//! controllers keep their templates' history.
//!
//! A revision's `data` is upstream's `getPatch` of the owner: `{"spec":{"template":{…,
//! "$patch":"replace"}}}`. Its name is `<owner>-<hash>`, the hash being FNV-1 over the bytes Go's
//! `json.Marshal` writes for that patch (keys sorted, HTML characters escaped, the fields Go
//! always writes present), so that a revision made here has the name upstream's controller
//! gives it, and either controller recognises the other's revisions after a failover.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::apimachinery::gojson;
use crate::apimachinery::labels::Selector;
use crate::client::{Api, Client, DeleteParams, Error, PostParams, retry};
use crate::random::safe_encode_string;
use crate::runtime::controller_ref::controller_of;
use crate::runtime::informer::Informer;

/// `apps.ControllerRevisionHashLabelKey`: on the pods of a DaemonSet or StatefulSet (and on a
/// DaemonSet's revisions), the revision they were made from.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// `history.ControllerRevisionHashLabel`: the hash on a revision made by [`new_revision`].
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// `getPatch` of a DaemonSet or StatefulSet: its template, to be restored whole.
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut template = crate::apimachinery::json::to_value(template).unwrap_or_else(|_| json!({}));
    with_go_zero_fields(&mut template);
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

/// Adds what Go's `json.Marshal` writes for a `v1.PodTemplateSpec` although our types leave it
/// out: a struct-typed field without `omitzero` is never empty to Go, so a template always has
/// `metadata` and every container `resources`, and so has an ephemeral volume's claim template.
/// (`metadata.creationTimestamp` is `omitzero` since v1.34: a zero time is left out, where
/// v1.33 wrote `creationTimestamp: null`.)
fn with_go_zero_fields(template: &mut Value) {
    fn always(object: &mut Value, key: &str) {
        if let Some(object) = object.as_object_mut() {
            object.entry(key).or_insert_with(|| json!({}));
        }
    }
    always(template, "metadata");
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            always(container, "resources");
        }
    }
    for volume in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(claim) = volume.pointer_mut("/ephemeral/volumeClaimTemplate") {
            always(claim, "metadata");
            if let Some(spec) = claim.get_mut("spec") {
                always(spec, "resources");
            }
        }
    }
}

/// FNV-1, 32 bits (`hash/fnv.New32`).
fn fnv32(chunks: &[&[u8]]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in chunks.iter().flat_map(|c| c.iter()) {
        hash = hash.wrapping_mul(0x0100_0193);
        hash ^= u32::from(*byte);
    }
    hash
}

/// `HashControllerRevision`: FNV-1 of the data's bytes, then of the decimal collision count.
pub fn hash_revision(data: &Value, probe: Option<i32>) -> String {
    let bytes = gojson::marshal(data).into_bytes();
    let probe = probe.map(|p| p.to_string()).unwrap_or_default();
    safe_encode_string(&fnv32(&[&bytes, probe.as_bytes()]).to_string())
}

/// `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to 223 bytes so the name fits
/// in 253.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(223);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &prefix[..end])
}

/// `NewControllerRevision`: a revision of `parent` holding `data`, labelled as the template
/// and with its hash, named after both.
pub fn new_revision(
    parent: &ObjectMeta,
    owner_ref: OwnerReference,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let hash = hash_revision(&data, collision_count);
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(HASH_LABEL.to_string(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(parent.name.as_deref().unwrap_or_default(), &hash)),
            namespace: parent.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// `EqualRevision`: the same data. (Since v1.34 the `controller.kubernetes.io/hash` labels
/// are not compared: a revision written by v1.33, whose data now re-encodes differently, may
/// carry another hash for the same template.)
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    data_of(a) == data_of(b)
}

fn data_of(revision: &ControllerRevision) -> Option<&Value> {
    revision.data.as_ref().map(|d| &d.0)
}

/// `FindEqualRevisions`: the revisions equal to `needle`, in their order.
pub fn find_equal_revisions<'a>(
    revisions: &'a [Arc<ControllerRevision>],
    needle: &ControllerRevision,
) -> Vec<&'a Arc<ControllerRevision>> {
    revisions.iter().filter(|r| equal_revision(r, needle)).collect()
}

/// `SortControllerRevisions`: by revision number, then creation time, then name (stable).
pub fn sort_revisions(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| revision_order(a, b));
}

fn revision_order(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    let created = |r: &ControllerRevision| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
    a.revision
        .cmp(&b.revision)
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `NextRevision`: one past the last of `sorted`, or 1.
pub fn next_revision(sorted: &[Arc<ControllerRevision>]) -> i64 {
    sorted.last().map_or(1, |r| r.revision + 1)
}

/// `realHistory`: revisions read from the informer, written through the controller's client.
pub struct History {
    client: Client,
    revisions: Arc<Informer<ControllerRevision>>,
}

impl History {
    /// The history of the controller acting through `client`, read from `revisions`.
    pub fn new(client: Client, revisions: Arc<Informer<ControllerRevision>>) -> History {
        History { client, revisions }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        Api::namespaced(&self.client, namespace)
    }

    /// `ListControllerRevisions`: the revisions in `namespace` matching `selector` that have no
    /// controller or have the parent as theirs (the ones to claim).
    pub fn list(&self, parent: &ObjectMeta, selector: &Selector) -> Vec<Arc<ControllerRevision>> {
        let namespace = parent.namespace.as_deref().unwrap_or_default();
        self.revisions.store().list_namespace_where(namespace, |meta| {
            selector.matches(meta.labels.as_ref())
                && controller_of(meta).is_none_or(|owner| Some(&owner.uid) == parent.uid.as_ref())
        })
    }

    /// `CreateControllerRevision`: creates `revision` named from its data's hash and
    /// `collision_count`; a revision of that name with the same data is the one returned, one
    /// with other data bumps the count and the name is tried again.
    pub fn create(
        &self,
        parent: &ObjectMeta,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision, Error> {
        let namespace = parent.namespace.as_deref().unwrap_or_default();
        let data = data_of(revision).cloned().unwrap_or(Value::Null);
        let mut attempt = revision.clone();
        loop {
            let hash = hash_revision(&data, Some(*collision_count));
            let name = revision_name(parent.name.as_deref().unwrap_or_default(), &hash);
            attempt.metadata.name = Some(name.clone());
            match self.api(namespace).create(&attempt, &PostParams::default()) {
                Err(e) if e.is_already_exists() => {
                    let existing = self.api(namespace).get(&name)?;
                    if data_of(&existing) == Some(&data) {
                        return Ok(existing);
                    }
                    *collision_count += 1;
                }
                other => return other,
            }
        }
    }

    /// `UpdateControllerRevision`: sets the revision number, retrying conflicts on the newest
    /// copy the informer has.
    pub fn update_revision_number(
        &self,
        revision: &ControllerRevision,
        new_revision: i64,
    ) -> Result<ControllerRevision, Error> {
        let namespace = revision.metadata.namespace.clone().unwrap_or_default();
        let name = revision.metadata.name.clone().unwrap_or_default();
        let mut current = revision.clone();
        retry::on_conflict(|| {
            if current.revision == new_revision {
                return Ok(current.clone());
            }
            let mut wanted = current.clone();
            wanted.revision = new_revision;
            let result = self.api(&namespace).replace(&name, &wanted, &PostParams::default());
            if result.is_err()
                && let Some(cached) = self.revisions.store().get_by_name(&namespace, &name)
            {
                current = (*cached).clone();
            }
            result
        })
    }

    /// `DeleteControllerRevision`.
    pub fn delete(&self, revision: &ControllerRevision) -> Result<(), Error> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace).delete(name, &DeleteParams::default()).map(|_| ())
    }
}

#[cfg(test)]
mod tests;
