//! What the controller needs of the kind it manages, so that one implementation serves
//! ReplicaSets and ReplicationControllers, as upstream's `pkg/controller/replication` adapts
//! RCs to the ReplicaSet controller (`conversion.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    PodTemplateSpec, ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::Serialize;

use crate::apimachinery::errors::BoxError;
pub use crate::apimachinery::labels::Selector;
use crate::runtime::informer::Informable;

/// A status condition, in the shape both kinds share.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Condition {
    /// The condition type.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason for the status.
    pub reason: Option<String>,
    /// A human-readable message.
    pub message: Option<String>,
    /// When `status` last changed.
    pub last_transition_time: Option<Time>,
}

/// `ReplicaSetStatus` / `ReplicationControllerStatus` in one shape.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicaStatus {
    /// `replicas`: the active pods the controller owns.
    pub replicas: i32,
    /// `fullyLabeledReplicas`: pods whose labels match the template's labels.
    pub fully_labeled_replicas: i32,
    /// `readyReplicas`.
    pub ready_replicas: i32,
    /// `availableReplicas`: pods ready for at least `minReadySeconds`.
    pub available_replicas: i32,
    /// `terminatingReplicas`: pods being deleted that have not finished yet (ReplicaSets only,
    /// `None` when not tracked).
    pub terminating_replicas: Option<i32>,
    /// `observedGeneration`: the generation the status is of.
    pub observed_generation: i64,
    /// `conditions`.
    pub conditions: Vec<Condition>,
}

/// A kind of replica controller: ReplicaSet or ReplicationController.
pub trait ReplicaKind: Informable + Resource<Scope = NamespaceResourceScope> + Clone + Serialize {
    /// `ReplicaSetControllerFeatures.EnableStatusTerminatingReplicas`: whether the kind's status
    /// has `terminatingReplicas` (a ReplicaSet's has; a ReplicationController's does not).
    const STATUS_TERMINATING_REPLICAS: bool;
    /// `spec.replicas`, defaulted to 1 as the API server does.
    fn replicas(&self) -> i32;
    /// `spec.minReadySeconds` (0 when unset).
    fn min_ready_seconds(&self) -> i32;
    /// The pod selector (`spec.selector`).
    fn selector(&self) -> Result<Selector, BoxError>;
    /// The pod template (`spec.template`), if any.
    fn template(&self) -> Option<&PodTemplateSpec>;
    /// The status in the common shape.
    fn status(&self) -> ReplicaStatus;
    /// A copy with `status` as its status; fields the common shape lacks are kept.
    fn with_status(&self, status: &ReplicaStatus) -> Self;
}

fn non_zero(value: i32) -> Option<i32> {
    (value != 0).then_some(value)
}

/// Both kinds share the shape of spec, status and conditions field for field (only the types
/// differ), so one body serves both; `$selector` reads each kind's selector, `$terminating`
/// reads and `$set_terminating` writes its `terminatingReplicas` (nothing for RCs).
macro_rules! replica_kind {
    ($kind:ty, $status:ty, $condition:ident, $selector:expr, $has_terminating:expr, $terminating:expr, $set_terminating:expr) => {
        impl ReplicaKind for $kind {
            const STATUS_TERMINATING_REPLICAS: bool = $has_terminating;

            fn replicas(&self) -> i32 {
                self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
            }

            fn min_ready_seconds(&self) -> i32 {
                self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
            }

            fn selector(&self) -> Result<Selector, BoxError> {
                let select: fn(&$kind) -> Result<Selector, BoxError> = $selector;
                select(self)
            }

            fn template(&self) -> Option<&PodTemplateSpec> {
                self.spec.as_ref().and_then(|s| s.template.as_ref())
            }

            fn status(&self) -> ReplicaStatus {
                let status = self.status.clone().unwrap_or_default();
                let terminating: fn(&$status) -> Option<i32> = $terminating;
                let terminating_replicas = terminating(&status);
                let conditions = status.conditions.unwrap_or_default().into_iter().map(|c| Condition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    last_transition_time: c.last_transition_time,
                });
                ReplicaStatus {
                    replicas: status.replicas,
                    fully_labeled_replicas: status.fully_labeled_replicas.unwrap_or(0),
                    ready_replicas: status.ready_replicas.unwrap_or(0),
                    available_replicas: status.available_replicas.unwrap_or(0),
                    terminating_replicas,
                    observed_generation: status.observed_generation.unwrap_or(0),
                    conditions: conditions.collect(),
                }
            }

            fn with_status(&self, status: &ReplicaStatus) -> Self {
                let conditions: Vec<$condition> = status
                    .conditions
                    .iter()
                    .map(|c| $condition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: c.last_transition_time.clone(),
                    })
                    .collect();
                // Fields the common shape lacks are kept.
                let mut written = self.status.clone().unwrap_or_default();
                let set_terminating: fn(&mut $status, Option<i32>) = $set_terminating;
                set_terminating(&mut written, status.terminating_replicas);
                written.replicas = status.replicas;
                written.fully_labeled_replicas = non_zero(status.fully_labeled_replicas);
                written.ready_replicas = non_zero(status.ready_replicas);
                written.available_replicas = non_zero(status.available_replicas);
                written.observed_generation = Some(status.observed_generation);
                written.conditions = (!conditions.is_empty()).then_some(conditions);
                let mut object = self.clone();
                object.status = Some(written);
                object
            }
        }
    };
}

replica_kind!(
    ReplicaSet,
    ReplicaSetStatus,
    ReplicaSetCondition,
    |rs| {
        let selector = rs.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        Selector::from_label_selector(&selector).map_err(Into::into)
    },
    true,
    |s| s.terminating_replicas,
    |s, terminating| s.terminating_replicas = terminating
);

replica_kind!(
    ReplicationController,
    ReplicationControllerStatus,
    ReplicationControllerCondition,
    |rc| Ok(Selector::from_map(rc.spec.as_ref().and_then(|s| s.selector.as_ref()).unwrap_or(&BTreeMap::new()))),
    false,
    |_| None,
    |_, _| {}
);
