//! The node IPAM controller (`node-ipam-controller`) with upstream v1.33's range allocator:
//! `cmd/kube-controller-manager/app/core.go` (`startNodeIpamController`),
//! `pkg/controller/nodeipam/node_ipam_controller.go` and `ipam/range_allocator.go`.
//!
//! With `--allocate-node-cidrs`, every Node without `spec.podCIDRs` gets one block of each
//! `--cluster-cidr` (IPv4 and/or IPv6), patched in as `spec.podCIDR` + `spec.podCIDRs`. Blocks
//! that nodes already have are occupied first, from a fresh list of all Nodes when the
//! controller starts, i.e. when this process becomes the leader (as upstream, which builds the
//! allocator then), so nothing another leader handed out before is handed out twice; a CIDR that
//! does not fit the cluster CIDRs stops the start, as upstream. The blocks of
//! `--service-cluster-ip-range` that overlap a cluster CIDR are never handed out. A node the
//! cache shows without blocks is read from the API server before a block is reserved for it,
//! so a cache that lags behind this controller's own patch never leads to a second block
//! (which kube-apiserver would merge into `podCIDRs` and refuse). A deleted
//! Node's blocks go back to the pool. When a range is full the node gets a `CIDRNotAvailable`
//! Event (source `cidrAllocator`) and is retried with backoff; like upstream's range allocator
//! (unlike its cloud allocator) no node condition is set.

pub mod cidrset;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;
use serde_json::json;

use crate::apimachinery::net::Cidr;
use crate::client::{self, Api, Client, ListParams, Patch, PostParams};
use crate::controllers::nodeutil::record_node_status_change;
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

use cidrset::{CidrSet, CidrSetError};

/// `cidrUpdateWorkers`.
const CIDR_UPDATE_WORKERS: usize = 30;
/// `cidrUpdateRetries`: tries of the Node patch before giving up on this sync.
const CIDR_UPDATE_RETRIES: usize = 3;
/// `nodePollInterval` and `apiserverStartupGracePeriod`: how the first list of Nodes is retried.
const NODE_POLL_INTERVAL: Duration = Duration::from_secs(10);
const APISERVER_STARTUP_GRACE_PERIOD: Duration = Duration::from_secs(600);

/// Why the allocator could not be built or started, or a node's sync failed. API errors are
/// kept whole, so that a conflict or a server's `Retry-After` reaches the queue with its kind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cluster CIDR and its node mask make no CIDR set.
    #[error("{0}")]
    CidrSet(#[from] CidrSetError),
    /// A node's `podCIDRs` entry does not parse.
    #[error("failed to parse node {node}, CIDR {cidr}")]
    ParseCidr {
        /// The node.
        node: String,
        /// The entry.
        cidr: String,
    },
    /// A node's `podCIDRs` has more entries than there are cluster CIDRs.
    #[error(
        "node:{node} has an allocated cidr: {cidr} at index:{index} that does not exist in cluster cidrs configuration"
    )]
    NoClusterCidr {
        /// The node.
        node: String,
        /// The entry.
        cidr: String,
        /// Its index.
        index: usize,
    },
    /// A node's block could not be marked used.
    #[error("failed to mark cidr[{cidr}] at idx [{index}] as occupied for node: {node}: {source}")]
    Occupy {
        /// The block.
        cidr: Cidr,
        /// Its index.
        index: usize,
        /// The node.
        node: String,
        /// Why.
        source: CidrSetError,
    },
    /// A node's block could not be given back.
    #[error("error when releasing CIDR {cidr}: {source}")]
    Release {
        /// The block as the node has it.
        cidr: String,
        /// Why.
        source: CidrSetError,
    },
    /// The Nodes could not be listed within the API server's startup grace period.
    #[error(
        "failed to list all nodes in {grace:?}, cannot proceed without updating CIDR map: {source}",
        grace = APISERVER_STARTUP_GRACE_PERIOD
    )]
    ListNodes {
        /// The last list's error.
        source: client::Error,
    },
    /// The node could not be read before reserving its blocks.
    #[error("failed while getting node {node} for updating Node.Spec.PodCIDRs: {source}")]
    GetNode {
        /// The node.
        node: String,
        /// The read's error.
        source: client::Error,
    },
    /// A cluster CIDR has no block left.
    #[error("failed to allocate cidr from cluster cidr at idx:{index}: {source}")]
    Allocate {
        /// The cluster CIDR's index.
        index: usize,
        /// Why.
        source: CidrSetError,
    },
    /// The node's patch failed at every try.
    #[error("failed to patch node CIDR: {source}")]
    Patch {
        /// The last try's error.
        source: client::Error,
    },
}

/// What the range allocator is built from (upstream `CIDRAllocatorParams`).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatorParams {
    /// `--cluster-cidr`: the ranges node CIDRs come from, one per IP family.
    pub cluster_cidrs: Vec<Cidr>,
    /// The first range of `--service-cluster-ip-range`, never handed out to nodes.
    pub service_cidr: Option<Cidr>,
    /// The second range of `--service-cluster-ip-range` (dual stack), never handed out either.
    pub secondary_service_cidr: Option<Cidr>,
    /// The node mask size for each cluster CIDR.
    pub node_masks: Vec<u8>,
}

impl AllocatorParams {
    /// Fresh CIDR sets with the service ranges taken out and every block `nodes` have occupied
    /// (`NewCIDRRangeAllocator`). A node CIDR that does not fit is an error.
    fn build_sets(&self, nodes: &[Node]) -> Result<Vec<CidrSet>, Error> {
        let mut sets = Vec::with_capacity(self.cluster_cidrs.len());
        for (cidr, mask) in self.cluster_cidrs.iter().zip(&self.node_masks) {
            sets.push(CidrSet::new(*cidr, *mask)?);
        }
        for service in [&self.service_cidr, &self.secondary_service_cidr].into_iter().flatten() {
            filter_out_service_range(&mut sets, service);
        }
        for node in nodes {
            change_node_cidrs(&mut sets, node, Change::Occupy)?;
        }
        Ok(sets)
    }
}

/// `filterOutServiceRange`: the blocks of a service range in any cluster CIDR it overlaps are
/// marked used.
fn filter_out_service_range(sets: &mut [CidrSet], service: &Cidr) {
    for set in sets.iter_mut().filter(|s| cidrset::overlaps(s.cluster(), service)) {
        if let Err(e) = set.occupy(service) {
            log::error!("error filtering out service cidr {service} from cluster cidr {}: {e}", set.cluster());
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Occupy,
    Release,
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn pod_cidrs(node: &Node) -> &[String] {
    node.spec.as_ref().and_then(|s| s.pod_cidrs.as_deref()).unwrap_or_default()
}

/// `occupyCIDRs` / `ReleaseCIDR`: the node's `podCIDRs[i]` in cluster CIDR `i`.
fn change_node_cidrs(sets: &mut [CidrSet], node: &Node, change: Change) -> Result<(), Error> {
    let name = node_name(node);
    for (index, text) in pod_cidrs(node).iter().enumerate() {
        // As upstream, the parse error itself is not reported.
        let cidr = Cidr::parse(text).map_err(|_| Error::ParseCidr { node: name.into(), cidr: text.clone() })?;
        let Some(set) = sets.get_mut(index) else {
            return Err(Error::NoClusterCidr { node: name.into(), cidr: text.clone(), index });
        };
        match change {
            Change::Occupy => {
                set.occupy(&cidr).map_err(|source| Error::Occupy { cidr, index, node: name.into(), source })?
            }
            Change::Release => set.release(&cidr).map_err(|source| Error::Release { cidr: text.clone(), source })?,
        }
    }
    Ok(())
}

/// `NewNodeIpamController` with the range allocator (`NewCIDRRangeAllocator`).
pub fn new(context: &ControllerContext<'_>, params: AllocatorParams) -> Result<Controller, Error> {
    let queue = WorkQueue::new("cidrallocator_node");
    for (service, what) in [(&params.service_cidr, "Service"), (&params.secondary_service_cidr, "Secondary Service")] {
        if service.is_none() {
            log::info!("No {what} CIDR provided. Skipping filtering out {} addresses", what.to_lowercase());
        }
    }
    // The blocks nodes have are occupied when the controller starts (`run_background`, once this
    // process leads): the list goes through the controller's own client. Until then the sets
    // only check the flags.
    let sets = params.build_sets(&[])?;
    let allocator = Arc::new(RangeAllocator {
        client: context.client.clone(),
        nodes: context.informers.informer::<Node>(),
        params,
        sets: Mutex::new(sets),
        recorder: context.recorder.clone(),
    });
    let handler = allocator.clone();
    let handler_queue = queue.clone();
    allocator.nodes.add_handler(move |event: &Event<Node>| handler.on_node_event(event, &handler_queue));
    let (workers, starter) = (allocator.clone(), allocator);
    Ok(Controller::new()
        .with_queue(&queue, CIDR_UPDATE_WORKERS, move |key: &String| workers.sync_node(key).map_err(SyncError::of))
        .on_start(move || starter.occupy_listed_nodes().map_err(Into::into)))
}

/// Upstream's `rangeAllocator`.
pub struct RangeAllocator {
    client: Client,
    nodes: Arc<Informer<Node>>,
    params: AllocatorParams,
    /// One set per cluster CIDR, in flag order; one lock so that a node's blocks of both
    /// families are taken together.
    sets: Mutex<Vec<CidrSet>>,
    recorder: EventRecorder,
}

impl RangeAllocator {
    /// The informer handlers: every change queues the node; a deletion first releases its
    /// blocks (the cache no longer has it when the key is synced).
    fn on_node_event(&self, event: &Event<Node>, queue: &WorkQueue<String>) {
        if let Event::Deleted { object, .. } = event
            && let Err(e) = change_node_cidrs(&mut self.sets.lock(), object, Change::Release)
        {
            log::error!("error while processing CIDR Release: {e}");
        }
        queue.add(object_key(&event.object().metadata));
    }

    /// Rebuilds the sets from a fresh list of Nodes (`listNodes`, retried while the API server
    /// cannot answer). The sets stay locked during each attempt, so that a deletion seen during
    /// the list is released from the new sets; not between attempts, so that a slow API server
    /// holds back no informer handler for long.
    fn occupy_listed_nodes(&self) -> Result<(), Error> {
        let deadline = Instant::now() + APISERVER_STARTUP_GRACE_PERIOD;
        loop {
            let mut sets = self.sets.lock();
            match Api::<Node>::all(&self.client).list_all(&ListParams::default()) {
                Ok((nodes, _)) => {
                    *sets = self.params.build_sets(&nodes)?;
                    return Ok(());
                }
                Err(e) if Instant::now() + NODE_POLL_INTERVAL < deadline => {
                    drop(sets);
                    log::error!("failed to list all nodes: {e}");
                    std::thread::sleep(NODE_POLL_INTERVAL);
                }
                Err(source) => return Err(Error::ListNodes { source }),
            }
        }
    }

    /// `syncNode`.
    fn sync_node(&self, key: &str) -> Result<(), Error> {
        let Some(node) = self.nodes.store().get(key) else {
            log::debug!("node {key} has been deleted");
            return Ok(());
        };
        if node.metadata.deletion_timestamp.is_some() {
            log::debug!("node {key} is being deleted");
            return change_node_cidrs(&mut self.sets.lock(), &node, Change::Release);
        }
        self.allocate_or_occupy(&node)
    }

    /// `AllocateOrOccupyCIDR`. A node the cache shows without blocks is read again from the API
    /// server before any block is reserved for it: the cache may not show yet the blocks this
    /// controller patched in a moment ago (another change, such as the TTL controller's
    /// annotation or a label, queued the node again before the watch brought the patch back),
    /// or blocks another leader handed out. Reserving and patching a block then would propose a
    /// second one: `podCIDRs` is a merge list in a strategic merge patch, so kube-apiserver
    /// would see both and refuse the update (422, "may specify no more than one CIDR for each IP
    /// family"). Upstream v1.33 trusts its lister here and logs those 422s in the same race.
    fn allocate_or_occupy(&self, cached: &Node) -> Result<(), Error> {
        if !pod_cidrs(cached).is_empty() {
            return change_node_cidrs(&mut self.sets.lock(), cached, Change::Occupy);
        }
        let name = node_name(cached);
        let fresh = Api::<Node>::all(&self.client)
            .get_opt(name)
            .map_err(|source| Error::GetNode { node: name.into(), source })?;
        let Some(node) = fresh else {
            log::debug!("node {name} has been deleted");
            return Ok(());
        };
        if !pod_cidrs(&node).is_empty() {
            log::debug!("node {name} already has allocated CIDRs {:?}; the cache is behind", pod_cidrs(&node));
            return change_node_cidrs(&mut self.sets.lock(), &node, Change::Occupy);
        }
        let allocated = {
            let mut sets = self.sets.lock();
            let mut allocated = Vec::with_capacity(sets.len());
            for index in 0..sets.len() {
                match sets[index].allocate_next() {
                    Ok(cidr) => allocated.push(cidr),
                    Err(e) => {
                        // Upstream keeps the blocks of the families before this one; each retry
                        // would then take more. Give them back.
                        release_all(&mut sets, &allocated);
                        drop(sets);
                        record_node_status_change(&self.recorder, &node, EventType::Warning, "CIDRNotAvailable");
                        return Err(Error::Allocate { index, source: e });
                    }
                }
            }
            allocated
        };
        log::debug!("putting node {name} with CIDRs {allocated:?} into the work queue");
        self.update_cidrs_allocation(&node, &allocated)
    }

    /// `updateCIDRsAllocation`: patches the reserved blocks into `node`, which the API server
    /// has just shown without any (upstream checks its lister here instead; see
    /// [`RangeAllocator::allocate_or_occupy`]).
    fn update_cidrs_allocation(&self, node: &Node, allocated: &[Cidr]) -> Result<(), Error> {
        let name = node_name(node);
        let wanted: Vec<String> = allocated.iter().map(Cidr::to_string).collect();
        let mut tries = 0;
        let error = loop {
            tries += 1;
            match patch_node_cidrs(&self.client, name, &wanted) {
                Ok(()) => {
                    log::info!("Set node PodCIDR node={name:?} podCIDRs={wanted:?}");
                    return Ok(());
                }
                Err(e) if tries >= CIDR_UPDATE_RETRIES => break e,
                Err(_) => {}
            }
        };
        let timed_out = error.is_server_timeout();
        log::error!("failed to update node {name} PodCIDR {wanted:?} after multiple attempts: {error}");
        record_node_status_change(&self.recorder, node, EventType::Warning, "CIDRAssignmentFailed");
        // A timed-out patch may still have gone through: then keep the blocks (a restart
        // returns falsely kept ones to the pool); otherwise give them back.
        if !timed_out {
            release_all(&mut self.sets.lock(), allocated);
        }
        Err(Error::Patch { source: error })
    }
}

fn release_all(sets: &mut [CidrSet], allocated: &[Cidr]) {
    for (set, cidr) in sets.iter_mut().zip(allocated) {
        if let Err(e) = set.release(cidr) {
            log::error!("error when releasing CIDR {cidr}: {e}");
        }
    }
}

/// `PatchNodeCIDRs` (component-helpers): a strategic merge patch setting `spec.podCIDR` to
/// the first block and `spec.podCIDRs` to all.
pub fn patch_node_cidrs(client: &Client, name: &str, cidrs: &[String]) -> Result<(), client::Error> {
    let patch = node_cidrs_patch(cidrs);
    log::trace!("cidrs patch bytes: {patch}");
    Api::<Node>::all(client).patch(name, &Patch::Strategic(patch), &PostParams::default()).map(|_| ())
}

/// upstream's `nodeForCIDRMergePatch`: `podCIDR` always, `podCIDRs` when not empty.
fn node_cidrs_patch(cidrs: &[String]) -> serde_json::Value {
    let mut spec = json!({"podCIDR": cidrs.first().map_or("", String::as_str)});
    if !cidrs.is_empty() {
        spec["podCIDRs"] = json!(cidrs);
    }
    json!({"spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect("a CIDR")
    }

    fn node(name: &str, cidrs: &[&str]) -> Node {
        let mut value = json!({"metadata": {"name": name}, "spec": {}});
        if !cidrs.is_empty() {
            value["spec"] = json!({"podCIDR": cidrs[0], "podCIDRs": cidrs});
        }
        serde_json::from_value(value).expect("a node")
    }

    fn params(cluster: &[&str], masks: &[u8], services: &[&str]) -> AllocatorParams {
        AllocatorParams {
            cluster_cidrs: cluster.iter().map(|c| cidr(c)).collect(),
            service_cidr: services.first().map(|c| cidr(c)),
            secondary_service_cidr: services.get(1).map(|c| cidr(c)),
            node_masks: masks.to_vec(),
        }
    }

    fn next(sets: &mut [CidrSet]) -> Vec<String> {
        sets.iter_mut().map(|s| s.allocate_next().map(|c| c.to_string()).unwrap_or_else(|e| e.to_string())).collect()
    }

    /// Upstream `TestAllocateOrOccupyCIDRSuccess` cases: the service range is skipped, existing
    /// node blocks are occupied.
    #[test]
    fn service_ranges_and_existing_node_blocks_are_not_handed_out() {
        let p = params(&["127.123.234.0/24"], &[30], &["127.123.234.0/26"]);
        let mut sets = p.build_sets(&[]).unwrap();
        assert_eq!(next(&mut sets), ["127.123.234.64/30"]);

        let p = params(&["10.0.0.0/16", "fd00::/48"], &[24, 64], &["10.0.0.0/23", "fd00::/108"]);
        let existing = [node("a", &["10.0.2.0/24", "fd00:0:0:1::/64"])];
        let mut sets = p.build_sets(&existing).unwrap();
        assert_eq!(next(&mut sets), ["10.0.3.0/24", "fd00:0:0:2::/64"]);

        // A service range in another part of the address space takes nothing.
        let p = params(&["10.244.0.0/16"], &[24], &["10.96.0.0/12"]);
        let mut sets = p.build_sets(&[]).unwrap();
        assert_eq!(next(&mut sets), ["10.244.0.0/24"]);
    }

    #[test]
    fn a_conflict_reaches_the_queue_as_a_conflict() {
        let server = crate::controllers::podutil::testing::ErrorServer::conflict();
        let client = server.client.clone();
        let informers = crate::runtime::informer::SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let params = params(&["10.0.0.0/16"], &[24], &[]);
        let allocator = RangeAllocator {
            client: client.clone(),
            nodes: informers.informer::<Node>(),
            sets: Mutex::new(params.build_sets(&[]).unwrap()),
            params,
            recorder: EventRecorder::new(client, "cidrAllocator"),
        };
        allocator.nodes.apply_for_test(node("a", &[]));
        let error = allocator.sync_node("a").unwrap_err();
        assert_eq!(
            SyncError::of(error),
            SyncError::Conflict(
                "failed while getting node a for updating Node.Spec.PodCIDRs: the test server answers 409 Conflict \
                 (409 Conflict)"
                    .into()
            )
        );
    }

    #[test]
    fn node_blocks_that_do_not_fit_stop_the_start() {
        let p = params(&["10.0.0.0/16"], &[24], &[]);
        let err = p.build_sets(&[node("a", &["10.1.0.0/24"])]).unwrap_err().to_string();
        assert!(err.contains("failed to mark cidr[10.1.0.0/24] at idx [0] as occupied for node: a"), "{err}");
        let err = p.build_sets(&[node("b", &["10.0.1.0/24", "fd00::/64"])]).unwrap_err().to_string();
        assert!(err.contains("that does not exist in cluster cidrs configuration"), "{err}");
        let err = p.build_sets(&[node("c", &["garbage"])]).unwrap_err().to_string();
        assert_eq!(err, "failed to parse node c, CIDR garbage");
    }

    #[test]
    fn released_blocks_return_to_the_pool() {
        let p = params(&["10.0.0.0/30"], &[31], &[]);
        let mut sets = p.build_sets(&[node("a", &["10.0.0.0/31"])]).unwrap();
        assert_eq!(next(&mut sets), ["10.0.0.2/31"]);
        assert!(next(&mut sets)[0].starts_with("CIDR allocation failed"));
        change_node_cidrs(&mut sets, &node("a", &["10.0.0.0/31"]), Change::Release).unwrap();
        assert_eq!(next(&mut sets), ["10.0.0.0/31"]);
    }

    #[test]
    fn the_patch_sets_both_fields() {
        let cidrs = ["10.0.1.0/24".to_string(), "fd00::/64".to_string()];
        assert_eq!(
            node_cidrs_patch(&cidrs),
            json!({"spec": {"podCIDR": "10.0.1.0/24", "podCIDRs": ["10.0.1.0/24", "fd00::/64"]}})
        );
        assert_eq!(node_cidrs_patch(&[]), json!({"spec": {"podCIDR": ""}}));
    }
}
