//! The TTL controller (`ttl-controller`), after upstream v1.33's
//! `pkg/controller/ttl/ttl_controller.go`: it keeps the `node.alpha.kubernetes.io/ttl`
//! annotation of every Node at the number of seconds kubelets may cache Secrets and ConfigMaps,
//! from the cluster size. The size steps through overlapping intervals (0–100 nodes: 0 s,
//! 90–500: 15 s, 450–1000: 30 s, 900–2000: 60 s, more: 300 s), so a cluster moves up when it
//! outgrows its interval and down only when it falls below the interval's minimum. A Node is
//! patched only when its annotation differs; every Node update re-checks it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use parking_lot::RwLock;
use serde_json::json;

use crate::client::{Api, Client, Patch, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `v1.ObjectTTLAnnotationKey`.
pub const OBJECT_TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
/// Upstream starts the controller with 5 workers.
const WORKERS: usize = 5;

/// `ttlBoundary`: from `size_min` to `size_max` nodes the TTL is `ttl_seconds`.
struct Boundary {
    size_min: i64,
    size_max: i64,
    ttl_seconds: i32,
}

/// `ttlBoundaries`.
const TTL_BOUNDARIES: [Boundary; 5] = [
    Boundary { size_min: 0, size_max: 100, ttl_seconds: 0 },
    Boundary { size_min: 90, size_max: 500, ttl_seconds: 15 },
    Boundary { size_min: 450, size_max: 1000, ttl_seconds: 30 },
    Boundary { size_min: 900, size_max: 2000, ttl_seconds: 60 },
    Boundary { size_min: 1800, size_max: i32::MAX as i64, ttl_seconds: 300 },
];

/// The node count and the interval of cluster sizes it is in.
#[derive(Debug, Default)]
struct ClusterSize {
    node_count: i64,
    boundary_step: usize,
    desired_ttl_seconds: i32,
}

impl ClusterSize {
    /// `addNode`: one step up when the count outgrew the interval.
    fn node_added(&mut self) {
        self.node_count += 1;
        let step = self.boundary_step;
        if self.node_count > TTL_BOUNDARIES[step].size_max && step + 1 < TTL_BOUNDARIES.len() {
            self.boundary_step += 1;
            self.desired_ttl_seconds = TTL_BOUNDARIES[self.boundary_step].ttl_seconds;
        }
    }

    /// `deleteNode`: one step down when the count fell below the interval.
    fn node_deleted(&mut self) {
        self.node_count -= 1;
        let step = self.boundary_step;
        if self.node_count < TTL_BOUNDARIES[step].size_min && step > 0 {
            self.boundary_step -= 1;
            self.desired_ttl_seconds = TTL_BOUNDARIES[self.boundary_step].ttl_seconds;
        }
    }
}

/// `NewTTLController`.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("ttlcontroller");
    let controller = Arc::new(TtlController {
        client: context.client.clone(),
        nodes: context.informers.informer::<Node>(),
        size: RwLock::new(ClusterSize::default()),
    });
    let handler = controller.clone();
    let handler_queue = queue.clone();
    controller.nodes.add_handler(move |event: &Event<Node>| handler.on_node_event(event, &handler_queue));
    Controller::new().with_queue(&queue, WORKERS, move |key: &String| controller.update_node_if_needed(key))
}

/// Upstream's TTL `Controller`.
pub struct TtlController {
    client: Client,
    nodes: Arc<Informer<Node>>,
    size: RwLock<ClusterSize>,
}

/// `getIntFromAnnotation`: the annotation as an integer, if it is one.
fn ttl_annotation(node: &Node) -> Option<i32> {
    let value = node.metadata.annotations.as_ref()?.get(OBJECT_TTL_ANNOTATION)?;
    match value.parse() {
        Ok(ttl) => Some(ttl),
        Err(_) => {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            log::info!("could not convert the value {value:?} of annotation {OBJECT_TTL_ANNOTATION} of node {name}");
            None
        }
    }
}

impl TtlController {
    /// `addNode` / `updateNode` / `deleteNode`: deleted nodes are only counted.
    fn on_node_event(&self, event: &Event<Node>, queue: &WorkQueue<String>) {
        match event {
            Event::Added(node) => {
                self.size.write().node_added();
                queue.add(object_key(&node.metadata));
            }
            Event::Updated { new, .. } => queue.add(object_key(&new.metadata)),
            Event::Deleted { .. } => self.size.write().node_deleted(),
        }
    }

    /// `updateNodeIfNeeded`.
    fn update_node_if_needed(&self, key: &str) -> SyncResult {
        let Some(node) = self.nodes.store().get(key) else { return Ok(()) };
        let desired = self.size.read().desired_ttl_seconds;
        if ttl_annotation(&node) == Some(desired) {
            return Ok(());
        }
        // The two-way merge patch of the node with only this annotation changed.
        let patch = json!({"metadata": {"annotations": {OBJECT_TTL_ANNOTATION: desired.to_string()}}});
        match Api::<Node>::all(&self.client).patch(key, &Patch::Strategic(patch), &PostParams::default()) {
            Ok(_) => {
                log::debug!("changed ttl annotation of node {key} to {desired}s");
                Ok(())
            }
            Err(e) => Err(SyncError::from(e).context(format!("failed to change ttl annotation for node {key}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grown_to(count: usize) -> ClusterSize {
        let mut size = ClusterSize::default();
        for _ in 0..count {
            size.node_added();
        }
        size
    }

    #[test]
    fn the_ttl_follows_the_cluster_size_with_hysteresis() {
        let mut size = grown_to(100);
        assert_eq!(size.desired_ttl_seconds, 0);
        size.node_added();
        assert_eq!(size.desired_ttl_seconds, 15, "101 nodes outgrow the first interval");
        for _ in 0..11 {
            size.node_deleted();
        }
        assert_eq!((size.node_count, size.desired_ttl_seconds), (90, 15), "down only below the minimum");
        size.node_deleted();
        assert_eq!(size.desired_ttl_seconds, 0);
    }

    #[test]
    fn every_interval_is_reached() {
        for (count, ttl) in [(0, 0), (500, 15), (501, 30), (1001, 60), (2001, 300), (5000, 300)] {
            assert_eq!(grown_to(count).desired_ttl_seconds, ttl, "{count} nodes");
        }
        let mut size = grown_to(2001);
        for _ in 0..2001 {
            size.node_deleted();
        }
        assert_eq!((size.node_count, size.desired_ttl_seconds), (0, 0));
    }

    #[test]
    fn the_annotation_is_read_as_an_integer() {
        let node = |value: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n", "annotations": {OBJECT_TTL_ANNOTATION: value}}}))
                .unwrap()
        };
        assert_eq!(ttl_annotation(&node("15")), Some(15));
        assert_eq!(ttl_annotation(&node("soon")), None);
        assert_eq!(ttl_annotation(&Node::default()), None);
    }
}
