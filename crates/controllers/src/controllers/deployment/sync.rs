//! Upstream's `sync.go`: finding or creating the new ReplicaSet and syncing revisions, scaling
//! (proportionally during a rollout), cleaning up old ReplicaSets and the Deployment's status.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::util::{self, POD_TEMPLATE_HASH, replicas, rs_name, rs_replicas};
use super::{DeploymentController, DeploymentResult, Error, name, namespace, namespace_terminating};
use crate::client::{Api, DeleteParams, PostParams};
use crate::controllers::podutil::template_hash::compute_hash;
use crate::runtime::controller_ref::{controller_of, controller_ref};
use crate::runtime::events::EventType;

/// The new ReplicaSet, if there is one, and the old ones; shared with the informer's cache
/// (as upstream's pointers into its lister), copied only where one is written.
type NewAndOld = (Option<Arc<ReplicaSet>>, Vec<Arc<ReplicaSet>>);

fn non_zero(value: i32) -> Option<i32> {
    (value != 0).then_some(value)
}

/// A status as Go's JSON has it: zero counts and empty lists omitted.
pub(super) fn normalized(status: &DeploymentStatus) -> DeploymentStatus {
    let nz = |v: Option<i32>| v.filter(|v| *v != 0);
    DeploymentStatus {
        available_replicas: nz(status.available_replicas),
        collision_count: status.collision_count,
        conditions: status.conditions.clone().filter(|c| !c.is_empty()),
        observed_generation: status.observed_generation.filter(|g| *g != 0),
        ready_replicas: nz(status.ready_replicas),
        replicas: nz(status.replicas),
        terminating_replicas: status.terminating_replicas,
        unavailable_replicas: nz(status.unavailable_replicas),
        updated_replicas: nz(status.updated_replicas),
    }
}

/// `calculateStatus`: counts from the ReplicaSets and the Available condition;
/// `terminatingReplicas` too when `terminating_replicas` (the
/// `DeploymentReplicaSetTerminatingReplicas` gate) is on.
pub(super) fn calculate_status(
    all: &[Arc<ReplicaSet>],
    new_rs: Option<&Arc<ReplicaSet>>,
    d: &Deployment,
    terminating_replicas: bool,
    now: Timestamp,
) -> DeploymentStatus {
    let available = util::available_replicas_sum(all);
    let total = util::spec_replicas_sum(all);
    // More available than desired (e.g. while scaling down) is not negative unavailability.
    let unavailable = (total - available).max(0);
    let current = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation.filter(|g| *g != 0),
        replicas: non_zero(util::actual_replicas_sum(all)),
        updated_replicas: non_zero(util::actual_replicas_sum(new_rs.map(std::slice::from_ref).unwrap_or(&[]))),
        ready_replicas: non_zero(util::ready_replicas_sum(all)),
        available_replicas: non_zero(available),
        unavailable_replicas: non_zero(unavailable),
        collision_count: current.collision_count,
        conditions: current.conditions.filter(|c| !c.is_empty()),
        terminating_replicas: if terminating_replicas { util::terminating_replicas_sum(all) } else { None },
    };
    let condition = if available >= replicas(d) - util::max_unavailable(d) {
        util::new_condition(
            util::AVAILABLE,
            "True",
            util::MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    } else {
        util::new_condition(
            util::AVAILABLE,
            "False",
            util::MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    };
    util::set_condition(&mut status, condition);
    status
}

impl DeploymentController {
    /// `syncStatusOnly`: a Deployment being deleted only gets its status written.
    pub(super) fn sync_status_only(&self, d: &mut Deployment, mut rs_list: Vec<Arc<ReplicaSet>>) -> DeploymentResult {
        let (new_rs, old) = self.all_replica_sets_and_sync_revision(d, &mut rs_list, false)?;
        let all: Vec<Arc<ReplicaSet>> = old.into_iter().chain(new_rs.clone()).collect();
        self.sync_deployment_status(&all, new_rs.as_ref(), d)
    }

    /// `sync`: scaling events and paused Deployments — scale, clean up when paused, status.
    pub(super) fn sync(&self, d: &mut Deployment, mut rs_list: Vec<Arc<ReplicaSet>>) -> DeploymentResult {
        let (new_rs, mut old) = self.all_replica_sets_and_sync_revision(d, &mut rs_list, false)?;
        self.scale(d, new_rs.as_ref(), &mut old)?;
        if util::paused(d) && super::rollback::rollback_to(d).is_none() {
            self.cleanup_deployment(&old, d)?;
        }
        let all: Vec<Arc<ReplicaSet>> = old.into_iter().chain(new_rs.clone()).collect();
        self.sync_deployment_status(&all, new_rs.as_ref(), d)
    }

    /// `checkPausedConditions`: a paused or resumed Deployment gets Progressing=Unknown, so that
    /// the time it was paused does not count against its progress deadline.
    pub(super) fn check_paused_conditions(&self, d: &mut Deployment) -> DeploymentResult {
        if util::progress_deadline(d).is_none() {
            return Ok(());
        }
        let status = d.status.get_or_insert_with(Default::default);
        let reason = util::get_condition(status, util::PROGRESSING).and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(util::TIMED_OUT) {
            return Ok(());
        }
        let paused_condition_exists = reason.as_deref() == Some(util::PAUSED);
        let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let condition = if paused && !paused_condition_exists {
            util::new_condition(util::PROGRESSING, "Unknown", util::PAUSED, "Deployment is paused", Timestamp::now())
        } else if !paused && paused_condition_exists {
            util::new_condition(util::PROGRESSING, "Unknown", util::RESUMED, "Deployment is resumed", Timestamp::now())
        } else {
            return Ok(());
        };
        util::set_condition(d.status.get_or_insert_with(Default::default), condition);
        // Upstream goes on with the object as it was read, and its next status write of this
        // sync meets a Conflict; this sync goes on with the Deployment as written.
        self.update_status(d)?;
        Ok(())
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created if asked) with its
    /// revision synced, and all old ones. A new ReplicaSet that was written (created, or its
    /// annotations synced) takes the place of the one read in `rs_list`, so that a second call
    /// of the same sync (after `isScalingEvent`) does not write it again from the old copy, as
    /// upstream does (a Conflict).
    pub(super) fn all_replica_sets_and_sync_revision(
        &self,
        d: &mut Deployment,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        create: bool,
    ) -> DeploymentResult<NewAndOld> {
        let old = util::find_old_replica_sets(d, rs_list);
        let new_rs = self.new_replica_set(d, rs_list, &old, create)?;
        if let Some(rs) = &new_rs {
            match rs_list.iter_mut().find(|listed| util::rs_uid(listed) == util::rs_uid(rs)) {
                Some(listed) => *listed = rs.clone(),
                None => rs_list.push(rs.clone()),
            }
        }
        Ok((new_rs, old))
    }

    /// `getNewReplicaSet`: the existing new ReplicaSet with its annotations, minReadySeconds and
    /// revision synced (and the Deployment's revision), or a new one named
    /// `<deployment>-<pod-template-hash>` ([`generate_replica_set_name`]) when `create`; a name
    /// taken by a different template bumps `status.collisionCount`.
    fn new_replica_set(
        &self,
        d: &mut Deployment,
        rs_list: &mut [Arc<ReplicaSet>],
        old: &[Arc<ReplicaSet>],
        create: bool,
    ) -> DeploymentResult<Option<Arc<ReplicaSet>>> {
        let existing = util::find_new_replica_set(d, rs_list);
        let new_revision = (util::max_revision(old) + 1).to_string();
        let sets = Api::<ReplicaSet>::namespaced(&self.client, namespace(d));
        if let Some(existing) = existing {
            return self.sync_existing_new_replica_set(d, existing, &new_revision).map(Some);
        }
        if !create {
            return Ok(None);
        }
        let mut new_rs = self.replica_set_for(d);
        let template_rs = Arc::new(new_rs.clone());
        let all: Vec<Arc<ReplicaSet>> = old.iter().cloned().chain(std::iter::once(template_rs.clone())).collect();
        let new_replicas = util::new_rs_new_replicas(d, &all, &template_rs)?;
        util::set_rs_replicas(&mut new_rs, new_replicas);
        let annotations = new_rs.metadata.annotations.get_or_insert_with(Default::default);
        util::set_new_rs_annotations(d, annotations, &new_revision, false, util::MAX_REV_HISTORY_LENGTH);
        let mut already_exists = false;
        let created = match sets.create(&new_rs, &PostParams::default()) {
            Ok(created) => self.replica_sets.mutation(created),
            Err(e) if e.is_already_exists() => {
                // A slow cache or a hash collision: ours only if we control it with our template.
                already_exists = true;
                let Some(found) = self.replica_sets.store().get_by_name(namespace(d), rs_name(&new_rs)) else {
                    return Err(Error::ReplicaSetNotFound(rs_name(&new_rs).to_string()));
                };
                let ours = controller_of(&found.metadata).is_some_and(|r| Some(&r.uid) == d.metadata.uid.as_ref());
                let same = found
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| util::equal_ignore_hash(&util::template(d), t));
                if !(ours && same) {
                    let status = d.status.get_or_insert_with(Default::default);
                    let before = status.collision_count.unwrap_or(0);
                    status.collision_count = Some(before + 1);
                    if self.update_status(d).is_ok() {
                        log::info!(
                            "Found a hash collision for deployment {}/{} - bumping collisionCount ({before}->{}) to resolve it",
                            namespace(d),
                            name(d),
                            before + 1
                        );
                    }
                    return Err(e.into());
                }
                found
            }
            Err(e) if namespace_terminating(&e) => return Err(e.into()),
            Err(e) => {
                let message = format!("Failed to create new replica set {:?}: {}", rs_name(&new_rs), error_text(&e));
                if util::progress_deadline(d).is_some() {
                    let condition = util::new_condition(
                        util::PROGRESSING,
                        "False",
                        util::FAILED_RS_CREATE,
                        &message,
                        Timestamp::now(),
                    );
                    util::set_condition(d.status.get_or_insert_with(Default::default), condition);
                    // The bigger issue is reported below; this write's result does not matter.
                    let _ = self.update_status(d);
                }
                self.recorder.event_for(d, EventType::Warning, util::FAILED_RS_CREATE, &message);
                return Err(e.into());
            }
        };
        if !already_exists && new_replicas > 0 {
            let message = format!("Scaled up replica set {} from 0 to {new_replicas}", rs_name(&created));
            self.recorder.event_for(d, EventType::Normal, "ScalingReplicaSet", &message);
        }
        let mut needs_update = util::set_deployment_revision(d, &new_revision);
        if !already_exists && util::progress_deadline(d).is_some() {
            let message = format!("Created new replica set {:?}", rs_name(&created));
            let condition =
                util::new_condition(util::PROGRESSING, "True", util::NEW_REPLICA_SET, &message, Timestamp::now());
            util::set_condition(d.status.get_or_insert_with(Default::default), condition);
            needs_update = true;
        }
        if needs_update {
            self.update_status(d)?;
        }
        Ok(Some(created))
    }

    /// The first half of `getNewReplicaSet`: an existing new ReplicaSet.
    fn sync_existing_new_replica_set(
        &self,
        d: &mut Deployment,
        existing: Arc<ReplicaSet>,
        new_revision: &str,
    ) -> DeploymentResult<Arc<ReplicaSet>> {
        let mut rs = existing;
        // The annotations are worked out on a copy of them alone: the ReplicaSet, template and
        // all, is copied out of the cache only when they change.
        let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
        let annotations_updated =
            util::set_new_rs_annotations(d, &mut annotations, new_revision, true, util::MAX_REV_HISTORY_LENGTH);
        if rs.metadata.annotations.as_ref() != Some(&annotations) {
            Arc::make_mut(&mut rs).metadata.annotations = Some(annotations);
        }
        let min_ready = util::min_ready_seconds(d);
        let min_ready_differs = rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0) != min_ready;
        if annotations_updated || min_ready_differs {
            Arc::make_mut(&mut rs).spec.get_or_insert_with(Default::default).min_ready_seconds = Some(min_ready);
            return Ok(self.update_replica_set(&rs)?);
        }
        // The ReplicaSet's revision is the reliable one; the Deployment copies it.
        let revision =
            rs.metadata.annotations.as_ref().and_then(|a| a.get(util::REVISION)).cloned().unwrap_or_default();
        let mut needs_update = util::set_deployment_revision(d, &revision);
        let has_deadline = util::progress_deadline(d).is_some();
        let status = d.status.get_or_insert_with(Default::default);
        if has_deadline && util::get_condition(status, util::PROGRESSING).is_none() {
            let message = format!("Found new replica set {:?}", rs_name(&rs));
            let condition =
                util::new_condition(util::PROGRESSING, "True", util::FOUND_NEW_RS, &message, Timestamp::now());
            util::set_condition(status, condition);
            needs_update = true;
        }
        if needs_update {
            self.update_status(d)?;
        }
        Ok(rs)
    }

    /// The ReplicaSet `getNewReplicaSet` creates: the template with the hash label, the selector
    /// with it too, owned by the Deployment.
    fn replica_set_for(&self, d: &Deployment) -> ReplicaSet {
        let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
        let mut template = util::template(d);
        let hash = compute_hash(&template, collision_count);
        let labels = template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(Default::default);
        labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let labels = labels.clone();
        let mut selector = super::selector_of(d);
        selector.match_labels.get_or_insert_with(Default::default).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(generate_replica_set_name(name(d), &hash)),
                namespace: d.metadata.namespace.clone(),
                owner_references: Some(vec![controller_ref(d)]),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: Some(util::min_ready_seconds(d)),
                selector,
                template: Some(template),
            }),
            status: None,
        }
    }

    /// `scale`: a scaling event or a paused Deployment. The only active ReplicaSet (or the
    /// newest) takes the full size; a saturated new one leaves the old at 0; otherwise the
    /// difference is shared proportionally, the leftover going to the largest.
    pub(super) fn scale(
        &self,
        d: &Deployment,
        new_rs: Option<&Arc<ReplicaSet>>,
        old: &mut [Arc<ReplicaSet>],
    ) -> DeploymentResult {
        if let Some(target) = util::find_active_or_latest(new_rs, old) {
            if rs_replicas(&target) == replicas(d) {
                return Ok(());
            }
            self.scale_replica_set(&target, replicas(d), d, false)?;
            return Ok(());
        }
        if util::is_saturated(d, new_rs) {
            for rs in util::active(old) {
                self.scale_replica_set(&rs, 0, d, false)?;
            }
            return Ok(());
        }
        if !util::is_rolling_update(d) {
            return Ok(());
        }
        let mut all: Vec<Arc<ReplicaSet>> = old.iter().cloned().chain(new_rs.cloned()).collect();
        all = util::active(&all);
        let (sizes, _) = proportional_sizes(d, &mut all);
        for (rs, size) in all.iter().zip(sizes) {
            // Forced: the replica annotations of every ReplicaSet follow the new size.
            self.scale_replica_set(rs, size, d, true)?;
        }
        Ok(())
    }

    /// `scaleReplicaSet` (v1.36 folded `scaleReplicaSetAndRecordEvent` into it): writes the size
    /// and the replica annotations; a size change is recorded as a ScalingReplicaSet Event.
    /// Unless `force`, a ReplicaSet already of `new_scale` is left alone (its annotations too).
    pub(super) fn scale_replica_set(
        &self,
        rs: &Arc<ReplicaSet>,
        new_scale: i32,
        d: &Deployment,
        force: bool,
    ) -> DeploymentResult<(bool, Arc<ReplicaSet>)> {
        if !force && rs_replicas(rs) == new_scale {
            return Ok((false, rs.clone()));
        }
        let size_needs_update = rs_replicas(rs) != new_scale;
        let max = replicas(d) + util::max_surge(d);
        if !size_needs_update && !util::replicas_annotations_need_update(rs, replicas(d), max) {
            return Ok((false, rs.clone()));
        }
        let old_scale = rs_replicas(rs);
        let mut copy = ReplicaSet::clone(rs);
        util::set_rs_replicas(&mut copy, new_scale);
        util::set_replicas_annotations(
            copy.metadata.annotations.get_or_insert_with(Default::default),
            replicas(d),
            max,
        );
        let updated = self.update_replica_set(&copy)?;
        if size_needs_update {
            let operation = if old_scale < new_scale { "up" } else { "down" };
            let message =
                format!("Scaled {operation} replica set {} from {old_scale} to {new_scale}", rs_name(&updated));
            self.recorder.event_for(d, EventType::Normal, "ScalingReplicaSet", &message);
        }
        Ok((size_needs_update, updated))
    }

    /// `cleanupDeployment`: deletes the oldest ReplicaSets beyond revisionHistoryLimit that are
    /// fully scaled down, observed and not being deleted.
    pub(super) fn cleanup_deployment(&self, old: &[Arc<ReplicaSet>], d: &Deployment) -> DeploymentResult {
        let Some(limit) = util::revision_history_limit(d) else { return Ok(()) };
        let mut cleanable: Vec<&Arc<ReplicaSet>> =
            old.iter().filter(|rs| rs.metadata.deletion_timestamp.is_none()).collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| util::by_revision(a, b));
        let sets = Api::<ReplicaSet>::namespaced(&self.client, namespace(d));
        for rs in cleanable.into_iter().take(diff as usize) {
            let status = rs.status.clone().unwrap_or_default();
            let observed = status.observed_generation.unwrap_or(0) >= rs.metadata.generation.unwrap_or(0);
            if status.replicas != 0 || rs_replicas(rs) != 0 || !observed {
                continue;
            }
            log::debug!("Trying to cleanup replica set {} for deployment {}/{}", rs_name(rs), namespace(d), name(d));
            match sets.delete(rs_name(rs), &DeleteParams::default()) {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// `syncDeploymentStatus`: writes the calculated status when it changed.
    pub(super) fn sync_deployment_status(
        &self,
        all: &[Arc<ReplicaSet>],
        new_rs: Option<&Arc<ReplicaSet>>,
        d: &mut Deployment,
    ) -> DeploymentResult {
        let status = calculate_status(all, new_rs, d, self.terminating_replicas, Timestamp::now());
        if normalized(&d.status.clone().unwrap_or_default()) == normalized(&status) {
            return Ok(());
        }
        d.status = Some(status);
        self.update_status(d)?;
        Ok(())
    }

    /// `isScalingEvent`: an active ReplicaSet was sized for a different Deployment size.
    pub(super) fn is_scaling_event(
        &self,
        d: &mut Deployment,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> DeploymentResult<bool> {
        let (new_rs, old) = self.all_replica_sets_and_sync_revision(d, rs_list, false)?;
        let all: Vec<Arc<ReplicaSet>> = old.into_iter().chain(new_rs).collect();
        Ok(util::active(&all)
            .iter()
            .filter_map(|rs| util::int_annotation(rs, util::DESIRED_REPLICAS))
            .any(|desired| desired != replicas(d)))
    }
}

/// The proportional half of `scale`: the new size of each of `all` (sorted as upstream sorts
/// them) and the number of replicas to add overall.
pub(super) fn proportional_sizes(d: &Deployment, all: &mut [Arc<ReplicaSet>]) -> (Vec<i32>, i32) {
    let current = util::spec_replicas_sum(all);
    let allowed = if replicas(d) > 0 { replicas(d) + util::max_surge(d) } else { 0 };
    let to_add = allowed - current;
    // Scaling up favours newer ReplicaSets among equals, scaling down older ones.
    if to_add > 0 {
        all.sort_by(|a, b| util::by_size_newer(a, b));
    } else if to_add < 0 {
        all.sort_by(|a, b| util::by_size_older(a, b));
    }
    let mut added = 0;
    let mut sizes: Vec<i32> = all
        .iter()
        .map(|rs| {
            if to_add == 0 {
                return rs_replicas(rs);
            }
            let proportion = util::replica_set_proportion(rs, d, to_add, added);
            added += proportion;
            rs_replicas(rs) + proportion
        })
        .collect();
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        *first = (*first + to_add - added).max(0);
    }
    (sizes, to_add)
}

/// `replicaSetNameSeparator`.
const REPLICA_SET_NAME_SEPARATOR: &str = "-";

/// `generateReplicaSetName` (v1.36): `<deployment>-<hash>`, the Deployment's name cut so that
/// the whole fits a DNS-1123 subdomain (253 characters). v1.33 did not cut it, and the create
/// of a long-named Deployment's ReplicaSet failed.
pub(super) fn generate_replica_set_name(deployment: &str, hash: &str) -> String {
    const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
    let max = DNS1123_SUBDOMAIN_MAX_LENGTH.saturating_sub(REPLICA_SET_NAME_SEPARATOR.len() + hash.len());
    // Go slices bytes; a Deployment's name is ASCII (a DNS subdomain), so a byte is a character.
    let cut = if deployment.len() > max && max > 0 { deployment.get(..max).unwrap_or(deployment) } else { deployment };
    format!("{cut}{REPLICA_SET_NAME_SEPARATOR}{hash}")
}

/// The text of an error as Go's `err.Error()` gives it.
fn error_text(error: &crate::client::Error) -> String {
    match error {
        crate::client::Error::Api(e) if !e.message.is_empty() => e.message.clone(),
        other => other.to_string(),
    }
}
