//! The Service CIDR controller (`service-cidr-controller`), after upstream v1.36's
//! `pkg/controller/servicecidrs`: every ServiceCIDR gets the finalizer
//! `networking.k8s.io/service-cidr-finalizer` and a `Ready=True` condition (server-side apply,
//! field manager `service-cidr-controller`, forced; since v1.36 only when the condition's
//! status, reason or message differ, so its `lastTransitionTime` stays). A ServiceCIDR being deleted keeps its
//! finalizer, with `Ready=False`/`Terminating`, while an IPAddress the kube-apiserver allocated
//! from it is contained in no other ServiceCIDR; once none is, the finalizer goes 10 s after the
//! deletion began (so that the apiservers' allocators have seen it). IPAddress events requeue
//! the ServiceCIDRs containing the address, a new ServiceCIDR those it overlaps.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
use serde_json::{Value, json};

use crate::apimachinery::net::Cidr;
use crate::client::{Api, Client, Patch, PostParams};
use crate::controllers::finalizerutil::has_finalizer;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `ServiceCIDRProtectionFinalizer`.
pub const SERVICE_CIDR_PROTECTION_FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// `deletionGracePeriod`: how long after a deletion began the finalizer may go.
const DELETION_GRACE_PERIOD: Duration = Duration::from_secs(10);
/// `networkingapiv1.LabelManagedBy` and `ipallocator.ControllerName`: only the addresses the
/// kube-apiserver's allocators manage count.
const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const IP_ALLOCATOR: &str = "ipallocator.k8s.io";
/// `networkingapiv1.LabelIPAddressFamily`.
const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";
const TERMINATING_MESSAGE: &str =
    "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";
const READY_MESSAGE: &str = "Kubernetes Service CIDR is ready";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workers; upstream runs five.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 5 }
    }
}

/// `servicecidrs.NewController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("ipaddresses");
    let controller = Arc::new(ServiceCidrs {
        client: context.client.clone(),
        field_manager: context.name,
        recorder: context.recorder.clone(),
        cidrs: context.informers.informer::<ServiceCIDR>(),
        addresses: context.informers.informer::<IPAddress>(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.cidrs.add_handler(move |event: &Event<ServiceCIDR>| handler.on_cidr_event(event));
    let handler = controller.clone();
    controller.addresses.add_handler(move |event: &Event<IPAddress>| handler.on_address_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.sync(key))
}

/// Upstream's `Controller`.
struct ServiceCidrs {
    client: Client,
    /// `controllerName`, the controller's name: the field manager of its status applies.
    field_manager: &'static str,
    recorder: EventRecorder,
    cidrs: Arc<Informer<ServiceCIDR>>,
    addresses: Arc<Informer<IPAddress>>,
    queue: WorkQueue<String>,
}

fn name_of(cidr: &ServiceCIDR) -> &str {
    cidr.metadata.name.as_deref().unwrap_or_default()
}

/// The prefixes of a ServiceCIDR that parse (`netip.ParsePrefix` succeeding).
fn prefixes(cidr: &ServiceCIDR) -> Vec<Cidr> {
    cidr.spec.iter().flat_map(|s| s.cidrs.iter().flatten()).filter_map(|c| Cidr::parse(c).ok()).collect()
}

/// `servicecidr.OverlapsPrefix`: the names of the ServiceCIDRs with a prefix overlapping `prefix`.
fn overlapping(cidrs: &[Arc<ServiceCIDR>], prefix: &Cidr) -> Vec<String> {
    matching(cidrs, |p| p.overlaps(prefix))
}

/// `servicecidr.ContainsPrefix`: the names of the ServiceCIDRs with a prefix containing `prefix`.
fn containing_prefix(cidrs: &[Arc<ServiceCIDR>], prefix: &Cidr) -> Vec<String> {
    matching(cidrs, |p| p.contains_prefix(prefix))
}

/// `servicecidr.ContainsAddress`: the names of the ServiceCIDRs that could have allocated `ip`.
fn containing_address(cidrs: &[Arc<ServiceCIDR>], ip: IpAddr) -> Vec<String> {
    matching(cidrs, |p| p.contains_service_ip(ip))
}

/// One name per matching prefix, as upstream's helpers list them.
fn matching(cidrs: &[Arc<ServiceCIDR>], test: impl Fn(&Cidr) -> bool) -> Vec<String> {
    cidrs
        .iter()
        .flat_map(|cidr| prefixes(cidr).into_iter().filter(|p| test(p)).map(|_| name_of(cidr).to_string()))
        .collect()
}

/// Whether `names` is exactly the one ServiceCIDR `name` (upstream's "only this one" test).
fn only(names: &[String], name: &str) -> bool {
    names.len() == 1 && names[0] == name
}

/// The address of an IPAddress the kube-apiserver's allocators manage.
fn managed_address(address: &IPAddress) -> Option<IpAddr> {
    let labels = address.metadata.labels.as_ref()?;
    if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(IP_ALLOCATOR) {
        return None;
    }
    address.metadata.name.as_deref()?.parse().ok()
}

/// `canDeleteCIDR` over the cached objects: deletable when each prefix lies in another
/// ServiceCIDR, or when no managed address of the prefix's family is contained only in it.
fn can_delete(cidr: &ServiceCIDR, all: &[Arc<ServiceCIDR>], addresses: &[Arc<IPAddress>]) -> bool {
    let name = name_of(cidr);
    let own = prefixes(cidr);
    let has_parent = own.iter().all(|prefix| {
        let parents = containing_prefix(all, prefix);
        !(parents.is_empty() || only(&parents, name))
    });
    if has_parent {
        log::info!("Deleting ServiceCIDR contained in other ServiceCIDR ServiceCIDR=\"{name}\"");
        return true;
    }
    for prefix in &own {
        let family = if prefix.is_ipv6() { "IPv6" } else { "IPv4" };
        let of_family = addresses.iter().filter(|a| {
            a.metadata.labels.as_ref().and_then(|l| l.get(LABEL_IP_FAMILY)).map(String::as_str) == Some(family)
        });
        for ip in of_family.filter_map(|a| managed_address(a)) {
            if only(&containing_address(all, ip), name) {
                log::info!("Deleting ServiceCIDR blocked by IP address IPAddress=\"{ip}\"");
                return false;
            }
        }
    }
    log::info!("Deleting ServiceCIDR no longer have orphan IPs ServiceCIDR=\"{name}\"");
    true
}

/// The Ready condition's status, reason and message: True with no reason, or False with
/// `Terminating`.
fn ready_condition(ready: bool) -> (&'static str, &'static str, &'static str) {
    if ready { ("True", "", READY_MESSAGE) } else { ("False", "Terminating", TERMINATING_MESSAGE) }
}

/// `updateConditionIfNeeded`'s test: the cached ServiceCIDR already has this Ready condition
/// (same status, reason and message), which is then not applied again.
fn ready_up_to_date(cidr: &ServiceCIDR, ready: bool) -> bool {
    let (status, reason, message) = ready_condition(ready);
    let conditions = cidr.status.as_ref().and_then(|s| s.conditions.as_ref());
    let current = conditions.and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    current.is_some_and(|c| c.status == status && c.reason == reason && c.message == message)
}

/// The status apply configuration of `updateConditionIfNeeded`
/// (`ServiceCIDRStatus().WithConditions(...)`); v1.36 sets the reason even when empty.
fn ready_apply(name: &str, ready: bool, now: Timestamp) -> Value {
    let (status, reason, message) = ready_condition(ready);
    let condition = json!({
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now.round(jiff::Unit::Second).unwrap_or(now).strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    });
    json!({
        "kind": "ServiceCIDR",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": name},
        "status": {"conditions": [condition]},
    })
}

/// How much of the deletion grace period is left at `now`.
fn grace_left(cidr: &ServiceCIDR, now: Timestamp) -> Option<Duration> {
    let deleted = cidr.metadata.deletion_timestamp.as_ref()?.0;
    let passed = now.duration_since(deleted);
    let left = jiff::SignedDuration::try_from(DELETION_GRACE_PERIOD).ok()? - passed;
    left.is_positive().then(|| left.unsigned_abs())
}

impl ServiceCidrs {
    /// `addServiceCIDR`, `updateServiceCIDR`, `deleteServiceCIDR`: a new one also requeues
    /// those it overlaps, whose deletion it may unblock.
    fn on_cidr_event(&self, event: &Event<ServiceCIDR>) {
        let cidr = event.object();
        self.queue.add(name_of(cidr).to_string());
        if let Event::Added(cidr) = event {
            let all = self.cidrs.store().list();
            let names: BTreeSet<String> = prefixes(cidr).iter().flat_map(|p| overlapping(&all, p)).collect();
            names.into_iter().for_each(|name| self.queue.add(name));
        }
    }

    /// `addIPAddress` / `deleteIPAddress`: the ServiceCIDRs containing the address.
    fn on_address_event(&self, event: &Event<IPAddress>) {
        if matches!(event, Event::Updated { .. }) {
            return;
        }
        let Some(ip) = managed_address(event.object()) else { return };
        let all = self.cidrs.store().list();
        let names: BTreeSet<String> = containing_address(&all, ip).into_iter().collect();
        names.into_iter().for_each(|name| self.queue.add(name));
    }

    /// `sync`.
    fn sync(&self, name: &String) -> SyncResult {
        let started = Instant::now();
        log::debug!("syncing ServiceCIDR ServiceCIDR=\"{name}\"");
        let result = self.sync_cidr(name);
        log::debug!("Finished syncing ServiceCIDR) ServiceCIDR=\"{name}\" elapsed=\"{:?}\"", started.elapsed());
        result
    }

    fn sync_cidr(&self, name: &str) -> SyncResult {
        let Some(cidr) = self.cidrs.store().get(name) else {
            log::debug!("ServiceCIDR no longer exist ServiceCIDR=\"{name}\"");
            return Ok(());
        };
        if cidr.metadata.deletion_timestamp.is_some() {
            return self.sync_deleting(&cidr);
        }
        self.add_finalizer_if_needed(&cidr)?;
        if let Err(e) = self.update_condition_if_needed(&cidr, true) {
            log::info!("error updating default ServiceCIDR status error=\"{}\"", e.message());
            let message = "The ServiceCIDR Status can not be set to Ready=True";
            self.recorder.event_for(cidr.as_ref(), EventType::Warning, "KubernetesServiceCIDRError", message);
            return Err(e);
        }
        Ok(())
    }

    /// The deleting branch of `sync`: blocked (status says why), waiting out the grace period,
    /// or done (finalizer removed).
    fn sync_deleting(&self, cidr: &ServiceCIDR) -> SyncResult {
        let name = name_of(cidr);
        let all = self.cidrs.store().list();
        if !can_delete(cidr, &all, &self.addresses.store().list()) {
            return self.update_condition_if_needed(cidr, false);
        }
        if let Some(left) = grace_left(cidr, Timestamp::now()) {
            self.queue.add_after(name.to_string(), left);
            return Ok(());
        }
        self.remove_finalizer_if_needed(cidr)
    }

    /// `updateConditionIfNeeded`: the Ready condition applied unless already there.
    fn update_condition_if_needed(&self, cidr: &ServiceCIDR, ready: bool) -> SyncResult {
        let name = name_of(cidr);
        if ready_up_to_date(cidr, ready) {
            log::trace!("ServiceCIDR condition already up to date ServiceCIDR=\"{name}\" conditionType=\"Ready\"");
            return Ok(());
        }
        self.apply_status(name, ready)
    }

    fn apply_status(&self, name: &str, ready: bool) -> SyncResult {
        let patch = Patch::Apply(ready_apply(name, ready, Timestamp::now()));
        let params =
            PostParams { field_manager: Some(self.field_manager.to_string()), force: true, ..PostParams::default() };
        Api::<ServiceCIDR>::cluster(&self.client).patch_status(name, &patch, &params).map(drop).map_err(SyncError::from)
    }

    /// `addServiceCIDRFinalizerIfNeeded`: a strategic merge patch adding the finalizer.
    fn add_finalizer_if_needed(&self, cidr: &ServiceCIDR) -> SyncResult {
        if has_finalizer(&cidr.metadata, SERVICE_CIDR_PROTECTION_FINALIZER) {
            return Ok(());
        }
        self.patch_finalizers(cidr, json!({"metadata": {"finalizers": [SERVICE_CIDR_PROTECTION_FINALIZER]}}))?;
        log::debug!("Added protection finalizer to ServiceCIDR ServiceCIDR=\"{}\"", name_of(cidr));
        Ok(())
    }

    /// `removeServiceCIDRFinalizerIfNeeded`: `$deleteFromPrimitiveList` of the finalizer.
    fn remove_finalizer_if_needed(&self, cidr: &ServiceCIDR) -> SyncResult {
        if !has_finalizer(&cidr.metadata, SERVICE_CIDR_PROTECTION_FINALIZER) {
            return Ok(());
        }
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [SERVICE_CIDR_PROTECTION_FINALIZER]}});
        self.patch_finalizers(cidr, patch)?;
        log::debug!("Removed protection finalizer from ServiceCIDRs ServiceCIDR=\"{}\"", name_of(cidr));
        Ok(())
    }

    /// A finalizer patch; a ServiceCIDR already gone is no error.
    fn patch_finalizers(&self, cidr: &ServiceCIDR, patch: Value) -> SyncResult {
        let api = Api::<ServiceCIDR>::cluster(&self.client);
        match api.patch(name_of(cidr), &Patch::Strategic(patch), &PostParams::default()) {
            Ok(written) => {
                self.cidrs.mutation(written);
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(SyncError::from(e)),
        }
    }
}

#[cfg(test)]
mod tests;
