//! The controller's in-memory view, after the event-handling half of upstream v1.36's
//! `device_taint_eviction.go` (`handleClaimChange`, `handleSliceChange`, `handleRuleChange`,
//! `handlePodChange`, `claimEvictionTime`, `podEvictionTime`): the ResourceSlices by pool, the
//! allocated ResourceClaims with the time their devices' NoExecute taints evict their users,
//! the DeviceTaintRules that evict, and when each pod is to be deleted.
//!
//! It makes no request and queues nothing itself: each change leaves [`Action`]s that the
//! controller carries out (queue a pod, emit the cancellation Event, queue a rule's status), so
//! that the rules can be tested without a server and a rule's `None` effect can be simulated on
//! a copy (`maybeUpdateRuleStatus`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceRequestAllocationResult, DeviceTaint, ResourceClaim, ResourceSlice,
};
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;

use crate::controllers::resourceclaimutil::{is_for_pod, is_reserved_for_pod, name as claim_name, tolerates_taint};

/// `resourceapi.DeviceTaintEffectNoExecute`.
pub const NO_EXECUTE: &str = "NoExecute";

/// `ruleStatusPeriod`: the shortest time between two status updates of a DeviceTaintRule while
/// its eviction is in progress.
pub const RULE_STATUS_PERIOD: Duration = Duration::from_secs(10);

/// A namespaced object at one UID (`tainteviction.NamespacedObject`): a pod, or a rule (no
/// namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The object's UID.
    pub uid: String,
}

impl ObjectRef {
    /// `newObject`.
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectRef {
        ObjectRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}", self.name)?;
        } else {
            write!(f, "{}/{}", self.namespace, self.name)?;
        }
        write!(f, " (UID {})", self.uid)
    }
}

/// Where a NoExecute taint comes from (`trackedTaint`): a DeviceTaintRule, or the `index`th
/// taint of a device in a ResourceSlice. Two are equal when they point at the same object
/// instance, as upstream compares pointers: a newer copy of a slice or rule is another reason.
#[derive(Debug, Clone)]
pub enum TrackedTaint {
    /// The taint of an evicting DeviceTaintRule that selects the device.
    Rule(Arc<DeviceTaintRule>),
    /// A taint in a ResourceSlice.
    Slice {
        /// The slice.
        slice: Arc<ResourceSlice>,
        /// The device's name in the slice.
        device: String,
        /// The taint's index among the device's taints.
        index: usize,
    },
}

impl PartialEq for TrackedTaint {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TrackedTaint::Rule(a), TrackedTaint::Rule(b)) => Arc::ptr_eq(a, b),
            (
                TrackedTaint::Slice { slice: a, device: da, index: ia },
                TrackedTaint::Slice { slice: b, device: db, index: ib },
            ) => Arc::ptr_eq(a, b) && da == db && ia == ib,
            _ => false,
        }
    }
}

impl TrackedTaint {
    /// `deviceTaint`: the taint itself (a rule's as a device taint).
    pub fn taint(&self) -> Option<DeviceTaint> {
        match self {
            TrackedTaint::Rule(rule) => {
                let taint = &rule.spec.taint;
                Some(DeviceTaint {
                    key: taint.key.clone(),
                    value: taint.value.clone(),
                    effect: taint.effect.clone(),
                    time_added: taint.time_added.clone(),
                })
            }
            TrackedTaint::Slice { slice, device, index } => {
                devices(slice).iter().find(|d| &d.name == device)?.taints.as_ref()?.get(*index).cloned()
            }
        }
    }

    /// The rule it comes from, if it does.
    pub fn rule(&self) -> Option<&Arc<DeviceTaintRule>> {
        match self {
            TrackedTaint::Rule(rule) => Some(rule),
            TrackedTaint::Slice { .. } => None,
        }
    }

    /// `trackedTaint.Compare`: rules first, by name; then slice taints by driver, pool, device
    /// and taint index.
    pub fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (TrackedTaint::Rule(a), TrackedTaint::Rule(b)) => a.metadata.name.cmp(&b.metadata.name),
            (TrackedTaint::Rule(_), TrackedTaint::Slice { .. }) => Ordering::Less,
            (TrackedTaint::Slice { .. }, TrackedTaint::Rule(_)) => Ordering::Greater,
            (
                TrackedTaint::Slice { slice: a, device: da, index: ia },
                TrackedTaint::Slice { slice: b, device: db, index: ib },
            ) => (&a.spec.driver, &a.spec.pool.name, da, ia).cmp(&(&b.spec.driver, &b.spec.pool.name, db, ib)),
        }
    }
}

impl fmt::Display for TrackedTaint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrackedTaint::Rule(rule) => write!(f, "DeviceTaintRule {}", ObjectRef::of(&rule.metadata)),
            TrackedTaint::Slice { slice, device, index } => write!(
                f,
                "ResourceSlice {} {}/{}/{device} taint #{index}",
                ObjectRef::of(&slice.metadata),
                slice.spec.driver,
                slice.spec.pool.name
            ),
        }
    }
}

/// When eviction starts and every taint that causes it (`evictionAndReason`), the reasons
/// sorted by [`TrackedTaint::compare`].
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// When the pods are to be deleted.
    pub when: Timestamp,
    /// The taints that evict.
    pub reasons: Vec<TrackedTaint>,
}

impl fmt::Display for Eviction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reasons: Vec<String> = self.reasons.iter().map(ToString::to_string).collect();
        write!(f, "{} ({})", self.when, reasons.join(", "))
    }
}

/// `evictionAndReason.equal`: as upstream, two absent evictions are *not* equal, so that a
/// re-evaluation that finds none still looks at the claim's pods.
fn same_eviction(a: Option<&Eviction>, b: Option<&Eviction>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a == b)
}

/// What the controller must do after a change.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Queue the pod's work item for `when` (`evictPod`): its deletion is pending.
    Evict {
        /// The pod.
        pod: ObjectRef,
        /// When it is to be deleted.
        when: Timestamp,
    },
    /// A pending deletion was cancelled while the pod stays: emit the Normal
    /// `DeviceTaintManagerEviction` Event "Cancelling deletion" (`cancelWorkWithEvent`).
    Cancelled(ObjectRef),
    /// Queue the rule's status update after `delay` (zero: now).
    RuleStatus {
        /// The rule.
        rule: ObjectRef,
        /// How long to wait first.
        delay: Duration,
    },
}

/// The pods the controller knows (the pod informer's cache).
pub trait PodLister {
    /// The cached pod `namespace/name`.
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// Every cached pod.
    fn list(&self) -> Vec<Arc<Pod>>;
}

/// One pool's slices (`pool`): only the slices of the newest generation count.
#[derive(Debug, Clone)]
pub struct Pool {
    slices: HashMap<String, Arc<ResourceSlice>>,
    max_generation: i64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool { slices: HashMap::new(), max_generation: i64::MIN }
    }
}

fn devices(slice: &ResourceSlice) -> &[Device] {
    slice.spec.devices.as_deref().unwrap_or_default()
}

fn device_taints(device: &Device) -> &[DeviceTaint] {
    device.taints.as_deref().unwrap_or_default()
}

impl Pool {
    /// `addSlice`: adding a slice can only raise the generation.
    fn add_slice(&mut self, slice: &Arc<ResourceSlice>) {
        self.slices.insert(slice.metadata.name.clone().unwrap_or_default(), slice.clone());
        self.max_generation = self.max_generation.max(slice.spec.pool.generation);
    }

    /// `removeSlice`: removing one of the newest slices may lower the generation.
    fn remove_slice(&mut self, slice: &ResourceSlice) {
        self.slices.remove(slice.metadata.name.as_deref().unwrap_or_default());
        if slice.spec.pool.generation == self.max_generation {
            self.max_generation = self.slices.values().map(|s| s.spec.pool.generation).max().unwrap_or(i64::MIN);
        }
    }

    fn current_slices(&self) -> impl Iterator<Item = &Arc<ResourceSlice>> {
        self.slices.values().filter(|slice| slice.spec.pool.generation == self.max_generation)
    }

    /// `getTaintedDevices`: the NoExecute taints of each device of the newest slices, by device
    /// name.
    fn tainted_devices(&self) -> BTreeMap<String, Vec<DeviceTaint>> {
        let mut tainted: BTreeMap<String, Vec<DeviceTaint>> = BTreeMap::new();
        for slice in self.current_slices() {
            for device in devices(slice) {
                for taint in device_taints(device).iter().filter(|t| t.effect == NO_EXECUTE) {
                    tainted.entry(device.name.clone()).or_default().push(taint.clone());
                }
            }
        }
        tainted
    }

    /// `getDevice`: the device of that name in the newest slices, with its slice.
    fn device(&self, name: &str) -> Option<(&Arc<ResourceSlice>, &Device)> {
        self.current_slices().find_map(|slice| devices(slice).iter().find(|d| d.name == name).map(|d| (slice, d)))
    }
}

/// The devices whose NoExecute taints differ between two views of a pool (the merge walk of
/// `handleSliceChange`).
fn modified_devices(
    old: &BTreeMap<String, Vec<DeviceTaint>>,
    new: &BTreeMap<String, Vec<DeviceTaint>>,
) -> BTreeSet<String> {
    old.keys().chain(new.keys()).filter(|name| old.get(*name) != new.get(*name)).cloned().collect()
}

/// A driver's pool (`poolID`).
type PoolId = (String, String);

/// A claim's namespace and name.
type ClaimKey = (String, String);

/// An allocated claim and when its taints evict its users (`allocatedClaim`).
#[derive(Debug, Clone)]
struct AllocatedClaim {
    claim: Arc<ResourceClaim>,
    eviction: Option<Eviction>,
}

fn claim_key(claim: &ResourceClaim) -> ClaimKey {
    (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default())
}

fn allocation(claim: &ResourceClaim) -> Option<&AllocationResult> {
    claim.status.as_ref().and_then(|s| s.allocation.as_ref())
}

fn results(allocation: &AllocationResult) -> &[DeviceRequestAllocationResult] {
    allocation.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or_default()
}

fn reserved_for(claim: &ResourceClaim) -> &[k8s_openapi::api::resource::v1::ResourceClaimConsumerReference] {
    claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default()
}

/// `ruleMatchesDevice`: a rule without a selector matches nothing; each field set must match.
pub fn rule_matches_device(rule: &DeviceTaintRule, driver: &str, pool: &str, device: &str) -> bool {
    let Some(selector) = &rule.spec.device_selector else { return false };
    let matches = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    matches(&selector.driver, driver) && matches(&selector.pool, pool) && matches(&selector.device, device)
}

/// The state of the controller (the fields of upstream's `Controller` under its mutex).
#[derive(Clone, Default)]
pub struct Tracker {
    /// `deletePodAt`: the pending deletions.
    delete_pod_at: HashMap<ObjectRef, Eviction>,
    /// `allocatedClaims`.
    allocated_claims: HashMap<ClaimKey, AllocatedClaim>,
    /// `pools`.
    pools: HashMap<PoolId, Pool>,
    /// `evictingRules`: the DeviceTaintRules with the NoExecute effect, by name.
    evicting_rules: BTreeMap<String, Arc<DeviceTaintRule>>,
    /// `taintRuleStats`: the pods each rule (by UID) evicted since the start.
    evicted_by_rule: HashMap<String, i64>,
    /// What the changes since the last [`Tracker::take_actions`] require.
    actions: Vec<Action>,
}

impl Tracker {
    /// The actions the changes so far require, oldest first.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// The pending deletion of a pod.
    pub fn pending(&self, pod: &ObjectRef) -> Option<&Eviction> {
        self.delete_pod_at.get(pod)
    }

    /// Forgets a pod's pending deletion once it is done.
    pub fn forget(&mut self, pod: &ObjectRef) {
        self.delete_pod_at.remove(pod);
    }

    /// Counts a pod evicted because of each rule among `reasons`, and asks for their status to
    /// be updated after [`RULE_STATUS_PERIOD`] (the cache must see the deletion first).
    pub fn count_evicted(&mut self, reasons: &[TrackedTaint]) {
        for rule in reasons.iter().filter_map(TrackedTaint::rule) {
            *self.evicted_by_rule.entry(rule.metadata.uid.clone().unwrap_or_default()).or_default() += 1;
            self.actions.push(Action::RuleStatus { rule: ObjectRef::of(&rule.metadata), delay: RULE_STATUS_PERIOD });
        }
    }

    /// How many pods the rule (by UID) evicted since the start.
    pub fn evicted_by(&self, rule_uid: &str) -> i64 {
        self.evicted_by_rule.get(rule_uid).copied().unwrap_or_default()
    }

    // ---- Claims ----

    /// `handleClaimChange`: `old` and `new` as the informer gives them (`None`: added or
    /// deleted).
    pub fn claim_changed(
        &mut self,
        old: Option<&Arc<ResourceClaim>>,
        new: Option<&Arc<ResourceClaim>>,
        pods: &dyn PodLister,
    ) {
        let (old, new) = match (old, new) {
            (None, None) => return,
            (Some(old), None) => {
                self.allocated_claims.remove(&claim_key(old));
                self.handle_pods(old, pods);
                return;
            }
            (None, Some(new)) => {
                if allocation(new).is_some() {
                    self.track_allocated(new);
                    self.handle_pods(new, pods);
                }
                return;
            }
            (Some(old), Some(new)) => (old, new),
        };
        if old.metadata.uid != new.metadata.uid {
            self.claim_changed(Some(old), None, pods);
            self.claim_changed(None, Some(new), pods);
            return;
        }
        let key = claim_key(new);
        match (allocation(old).is_some(), allocation(new).is_some()) {
            (false, true) => self.track_allocated(new),
            (true, false) => {
                self.allocated_claims.remove(&key);
            }
            (true, true) => {
                // The allocation is immutable: the eviction stays, the newer claim is kept.
                let eviction = self.allocated_claims.get(&key).and_then(|c| c.eviction.clone());
                self.allocated_claims.insert(key, AllocatedClaim { claim: new.clone(), eviction });
            }
            (false, false) => return,
        }
        // `reservedFor` may have changed: then both the old and the new consumers.
        if reserved_for(old) != reserved_for(new) {
            self.handle_pods(old, pods);
        }
        self.handle_pods(new, pods);
    }

    fn track_allocated(&mut self, claim: &Arc<ResourceClaim>) {
        let eviction = self.claim_eviction_time(claim);
        self.allocated_claims.insert(claim_key(claim), AllocatedClaim { claim: claim.clone(), eviction });
    }

    /// `claimEvictionTime`: the earliest time at which an untolerated NoExecute taint of an
    /// allocated device evicts, with every such taint as reason. A toleration of the taint
    /// without `tolerationSeconds` ignores the taint; otherwise the shortest
    /// `tolerationSeconds` (negative counts as zero) is added to the taint's `timeAdded`.
    pub fn claim_eviction_time(&self, claim: &ResourceClaim) -> Option<Eviction> {
        let allocation = allocation(claim)?;
        let mut when: Option<Timestamp> = None;
        let mut reasons: Vec<TrackedTaint> = Vec::new();
        for result in results(allocation) {
            let pool = self.pools.get(&(result.driver.clone(), result.pool.clone()));
            let found = pool.and_then(|p| p.device(&result.device));
            'taints: for tracked in self.evicting_taints(result, found) {
                let Some(taint) = tracked.taint() else { continue };
                let mut toleration_seconds: Option<i64> = None;
                for toleration in result.tolerations.iter().flatten() {
                    if toleration.effect.as_deref() != Some(NO_EXECUTE) || !tolerates_taint(toleration, &taint) {
                        continue;
                    }
                    let Some(seconds) = toleration.toleration_seconds else { continue 'taints };
                    let seconds = seconds.max(0);
                    toleration_seconds = Some(toleration_seconds.map_or(seconds, |s| s.min(seconds)));
                }
                // The API server always sets `timeAdded`; a taint without one sets no time.
                let evicts_at = taint.time_added.map(|added| match toleration_seconds {
                    Some(seconds) => added.0.saturating_add(SignedDuration::from_secs(seconds)).unwrap_or(added.0),
                    None => added.0,
                });
                if !reasons.contains(&tracked) {
                    reasons.push(tracked);
                }
                if let Some(at) = evicts_at {
                    when = Some(when.map_or(at, |w| w.min(at)));
                }
            }
        }
        reasons.sort_by(TrackedTaint::compare);
        when.map(|when| Eviction { when, reasons })
    }

    /// `allEvictingDeviceTaints`: the device's NoExecute taints in its slice, then the
    /// evicting rules that select the allocated device.
    fn evicting_taints(
        &self,
        result: &DeviceRequestAllocationResult,
        found: Option<(&Arc<ResourceSlice>, &Device)>,
    ) -> Vec<TrackedTaint> {
        let mut taints = Vec::new();
        if let Some((slice, device)) = found {
            for (index, taint) in device_taints(device).iter().enumerate() {
                if taint.effect == NO_EXECUTE {
                    taints.push(TrackedTaint::Slice { slice: slice.clone(), device: device.name.clone(), index });
                }
            }
        }
        for rule in self.evicting_rules.values() {
            if rule_matches_device(rule, &result.driver, &result.pool, &result.device) {
                taints.push(TrackedTaint::Rule(rule.clone()));
            }
        }
        taints
    }

    // ---- Slices ----

    /// `handleSliceChange`: the claims that use a device whose NoExecute taints changed get
    /// their eviction time again; their pods are handled when it differs.
    pub fn slice_changed(
        &mut self,
        old: Option<&Arc<ResourceSlice>>,
        new: Option<&Arc<ResourceSlice>>,
        pods: &dyn PodLister,
    ) {
        let Some(slice) = new.or(old) else { return };
        let id: PoolId = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
        let mut pool = self.pools.remove(&id).unwrap_or_default();
        let before = pool.tainted_devices();
        if let Some(old) = old {
            pool.remove_slice(old);
        }
        if let Some(new) = new {
            pool.add_slice(new);
        }
        let after = pool.tainted_devices();
        if !pool.slices.is_empty() {
            self.pools.insert(id.clone(), pool);
        }
        if before.is_empty() && after.is_empty() {
            return;
        }
        let modified = modified_devices(&before, &after);
        let affected: Vec<ClaimKey> = self
            .allocated_claims
            .iter()
            .filter(|(_, c)| allocation(&c.claim).is_some_and(|a| uses_device(a, &id, &modified)))
            .map(|(key, _)| key.clone())
            .collect();
        for key in affected {
            let Some(tracked) = self.allocated_claims.get(&key) else { continue };
            let claim = tracked.claim.clone();
            let eviction = self.claim_eviction_time(&claim);
            if same_eviction(eviction.as_ref(), tracked.eviction.as_ref()) {
                continue;
            }
            self.allocated_claims.insert(key, AllocatedClaim { claim: claim.clone(), eviction });
            self.handle_pods(&claim, pods);
        }
    }

    // ---- Rules ----

    /// `handleRuleChange`: a new rule, or a rule whose spec changed, gets its status updated at
    /// once; then every allocated claim is evaluated again.
    pub fn rule_changed(
        &mut self,
        old: Option<&Arc<DeviceTaintRule>>,
        new: Option<&Arc<DeviceTaintRule>>,
        pods: &dyn PodLister,
    ) {
        match (old, new) {
            (None, None) => return,
            (None, Some(new)) => {
                self.actions.push(Action::RuleStatus { rule: ObjectRef::of(&new.metadata), delay: Duration::ZERO })
            }
            (Some(old), None) => {
                self.evicted_by_rule.remove(old.metadata.uid.as_deref().unwrap_or_default());
                self.evicting_rules.remove(old.metadata.name.as_deref().unwrap_or_default());
            }
            (Some(old), Some(new)) => {
                if old.metadata.uid == new.metadata.uid {
                    if old.spec == new.spec {
                        return;
                    }
                    self.actions.push(Action::RuleStatus { rule: ObjectRef::of(&new.metadata), delay: Duration::ZERO });
                }
            }
        }
        if let Some(old) = old.filter(|r| r.spec.taint.effect == NO_EXECUTE) {
            self.evicting_rules.remove(old.metadata.name.as_deref().unwrap_or_default());
        }
        if let Some(new) = new.filter(|r| r.spec.taint.effect == NO_EXECUTE) {
            self.evicting_rules.insert(new.metadata.name.clone().unwrap_or_default(), new.clone());
        }
        let keys: Vec<ClaimKey> = self.allocated_claims.keys().cloned().collect();
        for key in keys {
            let Some(tracked) = self.allocated_claims.get(&key) else { continue };
            let claim = tracked.claim.clone();
            let old_eviction = tracked.eviction.clone();
            let eviction = self.claim_eviction_time(&claim);
            let same = same_eviction(eviction.as_ref(), old_eviction.as_ref());
            self.allocated_claims.insert(key, AllocatedClaim { claim: claim.clone(), eviction });
            if !same {
                self.handle_pods(&claim, pods);
            }
        }
    }

    // ---- Pods ----

    /// `handlePodChange`: a deleted pod's pending deletion is dropped without an Event; an
    /// updated pod is looked at again only when it was scheduled or its claims' statuses
    /// changed (so that the condition this controller adds does not bring it back).
    pub fn pod_changed(&mut self, old: Option<&Pod>, new: Option<&Pod>) {
        let Some(new) = new else {
            if let Some(old) = old {
                self.delete_pod_at.remove(&ObjectRef::of(&old.metadata));
            }
            return;
        };
        if let Some(old) = old
            && node_name(old) == node_name(new)
            && claim_statuses(old) == claim_statuses(new)
        {
            return;
        }
        self.handle_pod(new);
    }

    /// `handlePods`: the pods the claim is reserved for (other consumers are not pods).
    fn handle_pods(&mut self, claim: &ResourceClaim, pods: &dyn PodLister) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        for consumer in reserved_for(claim) {
            if !consumer.api_group.as_deref().unwrap_or_default().is_empty() || consumer.resource != "pods" {
                continue;
            }
            let Some(pod) = pods.get(namespace, &consumer.name) else { continue };
            if pod.metadata.uid.as_deref() == Some(consumer.uid.as_str()) {
                self.handle_pod(&pod);
            }
        }
    }

    /// `handlePod`: schedules the pod's deletion, or cancels a pending one.
    fn handle_pod(&mut self, pod: &Pod) {
        let reference = ObjectRef::of(&pod.metadata);
        let Some(eviction) = self.pod_eviction_time(pod) else {
            if self.delete_pod_at.remove(&reference).is_some() {
                log::debug!("Canceled pod eviction pod=\"{reference}\"");
                self.actions.push(Action::Cancelled(reference));
            }
            return;
        };
        self.actions.push(Action::Evict { pod: reference.clone(), when: eviction.when });
        for rule in eviction.reasons.iter().filter_map(TrackedTaint::rule) {
            // Not at once: more pod changes may be coming.
            self.actions.push(Action::RuleStatus { rule: ObjectRef::of(&rule.metadata), delay: RULE_STATUS_PERIOD });
        }
        self.delete_pod_at.insert(reference, eviction);
    }

    /// `podEvictionTime`: for a scheduled pod, the earliest eviction of the allocated claims it
    /// uses that are reserved for it (and, for a template's claim, made for it), with all
    /// their reasons.
    pub fn pod_eviction_time(&self, pod: &Pod) -> Option<Eviction> {
        if node_name(pod).is_empty() {
            return None;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let entries = pod.spec.as_ref().and_then(|s| s.resource_claims.as_deref()).unwrap_or_default();
        let mut eviction: Option<Eviction> = None;
        for entry in entries {
            // Not created yet, unsupported or not needed: not tainted.
            let Ok(named) = claim_name(pod, entry) else { continue };
            let Some(name) = named.name else { continue };
            // Not allocated (or unknown): not tainted either.
            let Some(tracked) = self.allocated_claims.get(&(namespace.clone(), name)) else { continue };
            // PodGroup owners and reservations count only with DRAWorkloadResourceClaims (off).
            if named.must_check_owner && is_for_pod(pod, &tracked.claim, false).is_err() {
                continue;
            }
            if !is_reserved_for_pod(pod, &tracked.claim, false) {
                continue;
            }
            let Some(claim_eviction) = &tracked.eviction else { continue };
            eviction = Some(match eviction {
                None => claim_eviction.clone(),
                Some(current) => merge(current, claim_eviction),
            });
        }
        eviction
    }

    // ---- DeviceTaintRule status ----

    /// `countPendingPods`: the pods not being deleted whose eviction the rule (by UID) causes,
    /// and in how many namespaces they are.
    pub fn count_pending_pods(&self, rule_uid: &str, pods: &dyn PodLister) -> (i64, i64) {
        let mut count = 0;
        let mut namespaces = BTreeSet::new();
        for pod in pods.list() {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(eviction) = self.pod_eviction_time(&pod) else { continue };
            for rule in eviction.reasons.iter().filter_map(TrackedTaint::rule) {
                if rule.metadata.uid.as_deref() == Some(rule_uid) {
                    count += 1;
                    namespaces.insert(pod.metadata.namespace.clone().unwrap_or_default());
                }
            }
        }
        (count, namespaces.len() as i64)
    }

    /// `countTaintedDevices`: the devices of the newest slices the rule selects, and the
    /// allocated devices it selects.
    pub fn count_tainted_devices(&self, rule: &DeviceTaintRule) -> (i64, i64) {
        let mut in_slices = 0;
        for ((driver, pool_name), pool) in &self.pools {
            for slice in pool.current_slices() {
                in_slices +=
                    devices(slice).iter().filter(|d| rule_matches_device(rule, driver, pool_name, &d.name)).count()
                        as i64;
            }
        }
        let mut allocated = 0;
        for tracked in self.allocated_claims.values() {
            let Some(allocation) = allocation(&tracked.claim) else { continue };
            allocated +=
                results(allocation).iter().filter(|r| rule_matches_device(rule, &r.driver, &r.pool, &r.device)).count()
                    as i64;
        }
        (in_slices, allocated)
    }

    /// The simulation of `maybeUpdateRuleStatus` for a rule with the `None` effect: a copy of
    /// this state (without pending deletions or rules) in which the rule evicts.
    pub fn simulate_evicting(&self, rule: &Arc<DeviceTaintRule>, pods: &dyn PodLister) -> Tracker {
        let mut simulation = Tracker {
            allocated_claims: self.allocated_claims.clone(),
            pools: self.pools.clone(),
            ..Tracker::default()
        };
        let mut evicting = (**rule).clone();
        evicting.spec.taint.effect = NO_EXECUTE.to_string();
        simulation.rule_changed(Some(rule), Some(&Arc::new(evicting)), pods);
        simulation.actions.clear();
        simulation
    }
}

/// Joins two evictions: the earlier time, the reasons of both (each once, by
/// [`TrackedTaint::compare`]).
fn merge(current: Eviction, other: &Eviction) -> Eviction {
    let mut reasons = other.reasons.clone();
    for reason in current.reasons {
        if let Err(at) = reasons.binary_search_by(|r| r.compare(&reason)) {
            reasons.insert(at, reason);
        }
    }
    Eviction { when: current.when.min(other.when), reasons }
}

/// `usesDevice`.
fn uses_device(allocation: &AllocationResult, pool: &PoolId, modified: &BTreeSet<String>) -> bool {
    results(allocation).iter().any(|r| r.driver == pool.0 && r.pool == pool.1 && modified.contains(&r.device))
}

fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

fn claim_statuses(pod: &Pod) -> &[k8s_openapi::api::core::v1::PodResourceClaimStatus] {
    pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const T0: &str = "2026-03-01T10:00:00Z";

    fn at(offset_seconds: i64) -> Timestamp {
        T0.parse::<Timestamp>().expect("time") + SignedDuration::from_secs(offset_seconds)
    }

    /// The pods of a test, by namespace and name.
    #[derive(Default)]
    struct Pods(Vec<Arc<Pod>>);

    impl PodLister for Pods {
        fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
            self.0
                .iter()
                .find(|p| {
                    p.metadata.namespace.as_deref() == Some(namespace) && p.metadata.name.as_deref() == Some(name)
                })
                .cloned()
        }

        fn list(&self) -> Vec<Arc<Pod>> {
            self.0.clone()
        }
    }

    /// A slice of pool `pool` at `generation` with devices `gpu-0` (carrying `taints`) and `gpu-1`.
    fn slice(name: &str, generation: i64, taints: Value) -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": format!("{name}-uid")},
                "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                         "pool": {"name": "pool", "generation": generation, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0", "taints": taints}, {"name": "gpu-1"}]}
            }))
            .expect("a slice"),
        )
    }

    fn no_execute(key: &str, added: &str) -> Value {
        json!({"key": key, "value": "v", "effect": "NoExecute", "timeAdded": added})
    }

    /// Claim `name` allocated `gpu-0` with `tolerations`, reserved for the pods of `reserved`
    /// (`(name, uid)`).
    fn claim(name: &str, tolerations: Value, reserved: &[(&str, &str)]) -> Arc<ResourceClaim> {
        let reserved: Vec<Value> =
            reserved.iter().map(|(pod, uid)| json!({"resource": "pods", "name": pod, "uid": uid})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid")},
                "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu"}}]}},
                "status": {
                    "allocation": {"devices": {"results": [{"request": "req", "driver": "gpu.example.com",
                        "pool": "pool", "device": "gpu-0", "tolerations": tolerations}]}},
                    "reservedFor": reserved
                }
            }))
            .expect("a claim"),
        )
    }

    fn unallocated(claim: &ResourceClaim) -> Arc<ResourceClaim> {
        let mut copy = claim.clone();
        if let Some(status) = copy.status.as_mut() {
            status.allocation = None;
        }
        Arc::new(copy)
    }

    /// Pod `name` (UID `uid`) on `node` using the claims `claims` by name.
    fn pod(name: &str, uid: &str, node: &str, claims: &[&str]) -> Arc<Pod> {
        let entries: Vec<Value> = claims.iter().map(|c| json!({"name": c, "resourceClaimName": c})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": uid},
                "spec": {"nodeName": node, "containers": [], "resourceClaims": entries}
            }))
            .expect("a pod"),
        )
    }

    fn pod_ref(name: &str, uid: &str) -> ObjectRef {
        ObjectRef { namespace: "ns".into(), name: name.into(), uid: uid.into() }
    }

    fn evict(name: &str, uid: &str, when: Timestamp) -> Action {
        Action::Evict { pod: pod_ref(name, uid), when }
    }

    /// A tracker fed with `slices`, then `pods` (as the informers would add them), then `claims`.
    fn tracker(slices: &[Arc<ResourceSlice>], pods: &Pods, claims: &[Arc<ResourceClaim>]) -> Tracker {
        let mut tracker = Tracker::default();
        for s in slices {
            tracker.slice_changed(None, Some(s), pods);
        }
        for p in &pods.0 {
            tracker.pod_changed(None, Some(p));
        }
        for c in claims {
            tracker.claim_changed(None, Some(c), pods);
        }
        tracker
    }

    fn when(tracker: &Tracker, claim: &ResourceClaim) -> Option<Timestamp> {
        tracker.claim_eviction_time(claim).map(|e| e.when)
    }

    #[test]
    fn the_eviction_time_is_the_taint_time_plus_the_shortest_toleration() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0), {"key": "info", "effect": "NoSchedule"}]))];
        let tracker = tracker(&slices, &Pods::default(), &[]);
        assert_eq!(when(&tracker, &claim("c", json!(null), &[])), Some(at(0)), "untolerated: at once");
        let short = json!([
            {"key": "broken", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
        ]);
        assert_eq!(when(&tracker, &claim("c", short, &[])), Some(at(10)), "the shortest toleration");
        let negative = json!([{"key": "broken", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5}]);
        assert_eq!(when(&tracker, &claim("c", negative, &[])), Some(at(0)), "negative counts as zero");
        let forever = json!([{"key": "broken", "operator": "Exists", "effect": "NoExecute"}]);
        assert_eq!(when(&tracker, &claim("c", forever, &[])), None, "tolerated forever: ignored");
        let effectless = json!([{"key": "broken", "operator": "Exists"}]);
        assert_eq!(when(&tracker, &claim("c", effectless, &[])), Some(at(0)), "only NoExecute tolerations count");
        let mismatch = json!([{"key": "broken", "operator": "Equal", "value": "w", "effect": "NoExecute"}]);
        assert_eq!(when(&tracker, &claim("c", mismatch, &[])), Some(at(0)), "another value");
    }

    #[test]
    fn the_earliest_untolerated_taint_decides_and_all_are_reasons() {
        let taints = json!([no_execute("late", "2026-03-01T10:00:20Z"), no_execute("early", T0), no_execute("ok", T0)]);
        let tracker = tracker(&[slice("s", 1, taints)], &Pods::default(), &[]);
        let tolerations = json!([
            {"key": "early", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"key": "ok", "operator": "Exists", "effect": "NoExecute"}
        ]);
        let eviction = tracker.claim_eviction_time(&claim("c", tolerations, &[])).expect("an eviction");
        assert_eq!(eviction.when, at(20));
        let indexes: Vec<usize> = eviction
            .reasons
            .iter()
            .map(|r| match r {
                TrackedTaint::Slice { index, .. } => *index,
                TrackedTaint::Rule(_) => usize::MAX,
            })
            .collect();
        assert_eq!(indexes, vec![0, 1], "the tolerated-forever taint is no reason");
    }

    #[test]
    fn a_scheduled_pod_reserved_by_its_claim_is_evicted() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0)]))];
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"]), pod("idle", "u2", "", &["c"])]);
        let mut tracker = tracker(&slices, &pods, &[claim("c", json!(null), &[("web", "u1"), ("idle", "u2")])]);
        assert_eq!(tracker.take_actions(), vec![evict("web", "u1", at(0))], "the unscheduled pod stays");
        assert!(tracker.pending(&pod_ref("web", "u1")).is_some());

        // A pod of the same name but another UID is not the one the claim is reserved for.
        let other = Pods(vec![pod("web", "u9", "node-a", &["c"])]);
        let tracker2 = tracker_with_claim(&slices, &other, claim("c", json!(null), &[("web", "u1")]));
        assert!(tracker2.pending(&pod_ref("web", "u9")).is_none());
        // Nor is a pod that names a claim not reserved for it.
        let unreserved = tracker_with_claim(&slices, &pods, claim("c", json!(null), &[]));
        assert!(unreserved.pending(&pod_ref("web", "u1")).is_none());
    }

    fn tracker_with_claim(slices: &[Arc<ResourceSlice>], pods: &Pods, claim: Arc<ResourceClaim>) -> Tracker {
        let mut tracker = tracker(slices, pods, &[claim]);
        tracker.take_actions();
        tracker
    }

    #[test]
    fn a_template_claim_counts_only_for_the_pod_that_owns_it() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0)]))];
        let templated = |owner: &str| -> Arc<ResourceClaim> {
            let mut c = (*claim("web-gpu-x", json!(null), &[("web", "u1")])).clone();
            c.metadata.owner_references = Some(vec![
                serde_json::from_value(
                    json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner, "controller": true}),
                )
                .expect("an owner"),
            ]);
            Arc::new(c)
        };
        let web: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"nodeName": "node-a", "containers": [],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x"}]}
        }))
        .expect("a pod");
        let pods = Pods(vec![Arc::new(web)]);
        assert!(tracker_with_claim(&slices, &pods, templated("u1")).pending(&pod_ref("web", "u1")).is_some());
        assert!(tracker_with_claim(&slices, &pods, templated("u7")).pending(&pod_ref("web", "u1")).is_none());
    }

    #[test]
    fn only_the_newest_generation_of_a_pool_taints() {
        let old = slice("s-old", 1, json!([no_execute("broken", T0)]));
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"])]);
        let mut tracker = tracker(std::slice::from_ref(&old), &pods, &[claim("c", json!(null), &[("web", "u1")])]);
        assert_eq!(tracker.take_actions(), vec![evict("web", "u1", at(0))]);

        // A newer generation without the taint replaces the old slice's view: cancelled.
        let new = slice("s-new", 2, json!(null));
        tracker.slice_changed(None, Some(&new), &pods);
        assert_eq!(tracker.take_actions(), vec![Action::Cancelled(pod_ref("web", "u1"))]);
        assert!(tracker.pending(&pod_ref("web", "u1")).is_none());

        // The newer slice gone, the old generation counts again.
        tracker.slice_changed(Some(&new), None, &pods);
        assert_eq!(tracker.take_actions(), vec![evict("web", "u1", at(0))]);

        // An older generation added later changes nothing.
        tracker.slice_changed(None, Some(&slice("s-older", 0, json!(null))), &pods);
        assert!(tracker.take_actions().is_empty());
    }

    #[test]
    fn a_taint_that_goes_before_its_time_cancels_the_deletion() {
        let tainted = slice("s", 1, json!([no_execute("broken", T0)]));
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"])]);
        let tolerations =
            json!([{"key": "broken", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
        let mut tracker = tracker(std::slice::from_ref(&tainted), &pods, &[claim("c", tolerations, &[("web", "u1")])]);
        assert_eq!(tracker.take_actions(), vec![evict("web", "u1", at(300))]);

        // A change of another device's taints does not touch the claim.
        let other = slice("s", 1, json!([no_execute("broken", T0)]));
        tracker.slice_changed(Some(&tainted), Some(&other), &pods);
        assert!(tracker.take_actions().is_empty(), "the same taint: nothing to do");

        let untainted = slice("s", 1, json!(null));
        tracker.slice_changed(Some(&other), Some(&untainted), &pods);
        assert_eq!(tracker.take_actions(), vec![Action::Cancelled(pod_ref("web", "u1"))]);
        // Taken again: nothing left to cancel.
        tracker.slice_changed(Some(&untainted), Some(&untainted), &pods);
        assert!(tracker.take_actions().is_empty());
    }

    #[test]
    fn a_deallocated_claim_cancels_and_a_deleted_pod_drops_silently() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0)]))];
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"]), pod("db", "u2", "node-a", &["d"])]);
        let (c, d) = (claim("c", json!(null), &[("web", "u1")]), claim("d", json!(null), &[("db", "u2")]));
        let mut tracker = tracker(&slices, &pods, &[c.clone(), d.clone()]);
        tracker.take_actions();

        tracker.claim_changed(Some(&c), Some(&unallocated(&c)), &pods);
        assert_eq!(tracker.take_actions(), vec![Action::Cancelled(pod_ref("web", "u1"))]);

        tracker.pod_changed(Some(&pods.0[1]), None);
        assert!(tracker.take_actions().is_empty(), "no Event for a pod that is gone");
        assert!(tracker.pending(&pod_ref("db", "u2")).is_none());
    }

    #[test]
    fn pod_updates_count_only_when_scheduled_or_claims_change() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0)]))];
        let pending = pod("web", "u1", "", &["c"]);
        let pods = Pods(vec![pending.clone()]);
        let mut tracker = tracker(&slices, &pods, &[claim("c", json!(null), &[("web", "u1")])]);
        assert!(tracker.take_actions().is_empty(), "not scheduled yet");
        let scheduled = pod("web", "u1", "node-a", &["c"]);
        tracker.pod_changed(Some(&pending), Some(&scheduled));
        assert_eq!(tracker.take_actions(), vec![evict("web", "u1", at(0))]);
        // A status change (the DisruptionTarget condition) does not queue it again.
        let mut conditioned = (*scheduled).clone();
        conditioned.status = Some(
            serde_json::from_value(json!({"conditions": [{"type": "DisruptionTarget", "status": "True"}]}))
                .expect("status"),
        );
        tracker.pod_changed(Some(&scheduled), Some(&conditioned));
        assert!(tracker.take_actions().is_empty());
    }

    #[test]
    fn a_pod_with_several_claims_goes_at_the_earliest_time() {
        let slices = [slice("s", 1, json!([no_execute("broken", T0)]))];
        let pods = Pods(vec![pod("web", "u1", "node-a", &["a", "b"])]);
        let tolerate = |seconds: i64| {
            json!([{"key": "broken", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": seconds}])
        };
        let tracker = tracker_with_claims(
            &slices,
            &pods,
            &[claim("a", tolerate(50), &[("web", "u1")]), claim("b", tolerate(20), &[("web", "u1")])],
        );
        let eviction = tracker.pending(&pod_ref("web", "u1")).expect("pending");
        assert_eq!(eviction.when, at(20));
        assert_eq!(eviction.reasons.len(), 1, "the same taint of the same device, by compare");
    }

    fn tracker_with_claims(slices: &[Arc<ResourceSlice>], pods: &Pods, claims: &[Arc<ResourceClaim>]) -> Tracker {
        let mut tracker = tracker(slices, pods, claims);
        tracker.take_actions();
        tracker
    }

    fn rule(name: &str, effect: &str, device: Option<&str>) -> Arc<DeviceTaintRule> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": format!("{name}-uid"), "generation": 1},
                "spec": {"deviceSelector": {"driver": "gpu.example.com", "device": device},
                         "taint": {"key": "maintenance", "effect": effect, "timeAdded": T0}}
            }))
            .expect("a rule"),
        )
    }

    #[test]
    fn an_evicting_rule_taints_the_devices_it_selects() {
        let slices = [slice("s", 1, json!(null))];
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"])]);
        let mut tracker = tracker_with_claims(&slices, &pods, &[claim("c", json!(null), &[("web", "u1")])]);
        let other = rule("other", "NoExecute", Some("gpu-1"));
        tracker.rule_changed(None, Some(&other), &pods);
        let status_now =
            |r: &DeviceTaintRule| Action::RuleStatus { rule: ObjectRef::of(&r.metadata), delay: Duration::ZERO };
        assert_eq!(tracker.take_actions(), vec![status_now(&other)], "another device: only the status");

        let maintenance = rule("maintenance", "NoExecute", Some("gpu-0"));
        tracker.rule_changed(None, Some(&maintenance), &pods);
        let later = Action::RuleStatus { rule: ObjectRef::of(&maintenance.metadata), delay: RULE_STATUS_PERIOD };
        assert_eq!(tracker.take_actions(), vec![status_now(&maintenance), evict("web", "u1", at(0)), later]);
        assert_eq!(tracker.count_pending_pods("maintenance-uid", &pods), (1, 1));

        tracker.rule_changed(Some(&maintenance), None, &pods);
        assert_eq!(tracker.take_actions(), vec![Action::Cancelled(pod_ref("web", "u1"))]);
    }

    #[test]
    fn a_rule_without_effect_is_simulated_on_a_copy() {
        let slices = [slice("s", 1, json!(null))];
        let pods = Pods(vec![pod("web", "u1", "node-a", &["c"])]);
        let mut tracker = tracker_with_claims(&slices, &pods, &[claim("c", json!(null), &[("web", "u1")])]);
        let dry = rule("dry", "None", None);
        tracker.rule_changed(None, Some(&dry), &pods);
        tracker.take_actions();
        assert!(tracker.pending(&pod_ref("web", "u1")).is_none(), "None does not evict");
        let simulation = tracker.simulate_evicting(&dry, &pods);
        assert_eq!(simulation.count_pending_pods("dry-uid", &pods), (1, 1));
        assert_eq!(simulation.count_tainted_devices(&dry), (2, 1), "both published devices, one allocated");
        assert!(tracker.pending(&pod_ref("web", "u1")).is_none(), "the real state is untouched");
    }
}
