//! TEMPORARY stand-in for `crate::controllers::history` (being written on main), with the same
//! names, so that this branch compiles until main has it. Deleted when main is merged.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::apimachinery::labels::Selector;
use crate::client::{Api, Client, DeleteParams, PostParams};
use crate::runtime::informer::Informer;

pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

pub fn hash_revision(data: &Value, collision_count: Option<i32>) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut write = |bytes: &[u8]| {
        for b in bytes {
            hash = hash.wrapping_mul(0x0100_0193);
            hash ^= u32::from(*b);
        }
    };
    write(&serde_json::to_vec(data).unwrap_or_default());
    if let Some(count) = collision_count {
        write(count.to_string().as_bytes());
    }
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string().bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

pub fn revision_name(prefix: &str, hash: &str) -> String {
    let prefix = if prefix.len() > 223 { &prefix[..223] } else { prefix };
    format!("{prefix}-{hash}")
}

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
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(parent.name.as_deref().unwrap_or(""), &hash)),
            namespace: parent.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

fn hash_label(revision: &ControllerRevision) -> Option<&str> {
    revision.metadata.labels.as_ref()?.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str)
}

pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    if let (Some(x), Some(y)) = (hash_label(a), hash_label(b))
        && x != y
    {
        return false;
    }
    a.data == b.data
}

pub fn find_equal_revisions<'a>(
    revisions: &'a [Arc<ControllerRevision>],
    needle: &ControllerRevision,
) -> Vec<&'a Arc<ControllerRevision>> {
    revisions.iter().filter(|r| equal_revision(r, needle)).collect()
}

pub fn sort_revisions(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| a.revision.cmp(&b.revision).then_with(|| a.metadata.name.cmp(&b.metadata.name)));
}

pub fn next_revision(sorted: &[Arc<ControllerRevision>]) -> i64 {
    sorted.last().map_or(1, |r| r.revision + 1)
}

pub struct History {
    client: Client,
    revisions: Arc<Informer<ControllerRevision>>,
}

impl History {
    pub fn new(client: Client, revisions: Arc<Informer<ControllerRevision>>) -> History {
        History { client, revisions }
    }

    pub fn list(&self, namespace: &str, selector: &Selector) -> Vec<Arc<ControllerRevision>> {
        self.revisions.store().list_namespace_where(namespace, |m| selector.matches(m.labels.as_ref()))
    }

    pub fn create(
        &self,
        parent: &ObjectMeta,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision, crate::client::Error> {
        let namespace = parent.namespace.as_deref().unwrap_or("");
        let api = Api::<ControllerRevision>::namespaced(&self.client, namespace);
        let data = revision.data.as_ref().map(|d| d.0.clone()).unwrap_or(Value::Null);
        loop {
            let hash = hash_revision(&data, Some(*collision_count));
            let mut clone = revision.clone();
            clone.metadata.name = Some(revision_name(parent.name.as_deref().unwrap_or(""), &hash));
            match api.create(&clone, &PostParams::default()) {
                Err(e) if e.is_already_exists() => {
                    let existing = api.get(clone.metadata.name.as_deref().unwrap_or(""))?;
                    if existing.data == clone.data {
                        return Ok(existing);
                    }
                    *collision_count += 1;
                }
                other => return other,
            }
        }
    }

    pub fn update_revision_number(
        &self,
        revision: &ControllerRevision,
        new_revision: i64,
    ) -> Result<ControllerRevision, crate::client::Error> {
        if revision.revision == new_revision {
            return Ok(revision.clone());
        }
        let mut clone = revision.clone();
        clone.revision = new_revision;
        let api =
            Api::<ControllerRevision>::namespaced(&self.client, revision.metadata.namespace.as_deref().unwrap_or(""));
        api.replace(clone.metadata.name.as_deref().unwrap_or(""), &clone, &PostParams::default())
    }

    pub fn delete(&self, revision: &ControllerRevision) -> Result<(), crate::client::Error> {
        let api =
            Api::<ControllerRevision>::namespaced(&self.client, revision.metadata.namespace.as_deref().unwrap_or(""));
        api.delete(revision.metadata.name.as_deref().unwrap_or(""), &DeleteParams::default())?;
        Ok(())
    }
}
