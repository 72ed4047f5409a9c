//! The node status updater (upstream's `statusupdater/node_status_updater.go`): writes the
//! actual state's attached volumes into each flagged node's `status.volumesAttached`, with
//! `nodeutil.PatchNodeStatus`'s strategic merge patch (the node's uid as precondition).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::Error as UpdateError;
use super::actual::ActualState;
use crate::client::{Api, Client, Error, Patch, PostParams};
use crate::runtime::informer::Informer;

pub struct NodeStatusUpdater {
    pub client: Client,
    pub nodes: Arc<Informer<Node>>,
    pub actual: Arc<ActualState>,
}

impl NodeStatusUpdater {
    /// `UpdateNodeStatuses`: every flagged node.
    pub fn update_node_statuses(&self) -> Result<(), UpdateError> {
        let failed = self
            .actual
            .volumes_to_report_attached()
            .into_iter()
            .filter(|(node, volumes)| self.process_node_volumes(node, volumes).is_err())
            .count();
        if failed > 0 { Err(UpdateError::UpdateNodes { failed }) } else { Ok(()) }
    }

    /// `UpdateNodeStatusForNode`: this node, if flagged.
    pub fn update_node_status_for_node(&self, node: &str) -> Result<(), Error> {
        match self.actual.volumes_to_report_for_node(node) {
            Some(volumes) => self.process_node_volumes(node, &volumes),
            None => Ok(()),
        }
    }

    /// `processNodeVolumes`: a node gone is skipped; a failed write flags the node again.
    fn process_node_volumes(&self, name: &str, volumes: &[(String, String)]) -> Result<(), Error> {
        let Some(node) = self.nodes.store().get(name) else {
            log::debug!("Could not update node status. Failed to find node in NodeInformer cache node={name:?}");
            return Ok(());
        };
        let uid = node.metadata.uid.clone().unwrap_or_default();
        match self.patch(name, &uid, volumes) {
            Err(e) if e.is_not_found() => {
                log::debug!("Could not update node status, node does not exist - skipping node={name:?}");
                Ok(())
            }
            Err(e) => {
                self.actual.set_node_status_update_needed(name);
                log::debug!("Could not update node status; re-marking for update node={name:?} err={e}");
                Err(e)
            }
            Ok(()) => Ok(()),
        }
    }

    fn patch(&self, name: &str, uid: &str, volumes: &[(String, String)]) -> Result<(), Error> {
        let patch = status_patch(uid, volumes);
        Api::<Node>::cluster(&self.client).patch_status(
            name,
            &Patch::Strategic(patch.clone()),
            &PostParams::default(),
        )?;
        log::debug!("Updating status for node succeeded node={name:?} patchBytes={patch}");
        Ok(())
    }
}

/// The patch: `volumesAttached` replaced (the list has no merge key), `null` when empty.
fn status_patch(uid: &str, volumes: &[(String, String)]) -> Value {
    let attached: Vec<Value> = volumes.iter().map(|(name, path)| json!({"name": name, "devicePath": path})).collect();
    let attached = if attached.is_empty() { Value::Null } else { Value::Array(attached) };
    json!({"metadata": {"uid": uid}, "status": {"volumesAttached": attached}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_replaces_the_list() {
        let volumes = vec![("kubernetes.io/csi/d^h".to_string(), String::new())];
        assert_eq!(
            status_patch("u1", &volumes),
            json!({"metadata": {"uid": "u1"}, "status": {"volumesAttached": [{"name": "kubernetes.io/csi/d^h", "devicePath": ""}]}})
        );
        assert_eq!(status_patch("u1", &[])["status"]["volumesAttached"], Value::Null);
    }
}
