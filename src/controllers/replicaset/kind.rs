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

pub use crate::labels::Selector;
use crate::runtime::informer::Informable;

/// A status condition, in the shape both kinds share.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<Time>,
}

/// `ReplicaSetStatus` / `ReplicationControllerStatus` in one shape.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicaStatus {
    pub replicas: i32,
    pub fully_labeled_replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
}

/// A kind of replica controller: ReplicaSet or ReplicationController.
pub trait ReplicaKind: Informable + Resource<Scope = NamespaceResourceScope> + Clone + Serialize {
    /// `spec.replicas`, defaulted to 1 as the API server does.
    fn replicas(&self) -> i32;
    fn min_ready_seconds(&self) -> i32;
    /// The pod selector (`spec.selector`).
    fn selector(&self) -> Result<Selector, String>;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn status(&self) -> ReplicaStatus;
    /// A copy with `status` as its status; fields the common shape lacks are kept.
    fn with_status(&self, status: &ReplicaStatus) -> Self;
}

fn non_zero(value: i32) -> Option<i32> {
    (value != 0).then_some(value)
}

impl ReplicaKind for ReplicaSet {
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }

    fn selector(&self) -> Result<Selector, String> {
        Selector::from_label_selector(&self.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default())
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }

    fn status(&self) -> ReplicaStatus {
        let status = self.status.clone().unwrap_or_default();
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
            observed_generation: status.observed_generation.unwrap_or(0),
            conditions: conditions.collect(),
        }
    }

    fn with_status(&self, status: &ReplicaStatus) -> Self {
        let conditions: Vec<ReplicaSetCondition> = status
            .conditions
            .iter()
            .map(|c| ReplicaSetCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: c.last_transition_time.clone(),
            })
            .collect();
        let old = self.status.clone().unwrap_or_default();
        let status = ReplicaSetStatus {
            replicas: status.replicas,
            fully_labeled_replicas: non_zero(status.fully_labeled_replicas),
            ready_replicas: non_zero(status.ready_replicas),
            available_replicas: non_zero(status.available_replicas),
            observed_generation: Some(status.observed_generation),
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..old
        };
        ReplicaSet { status: Some(status), ..self.clone() }
    }
}

impl ReplicaKind for ReplicationController {
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }

    fn selector(&self) -> Result<Selector, String> {
        Ok(Selector::from_map(self.spec.as_ref().and_then(|s| s.selector.as_ref()).unwrap_or(&BTreeMap::new())))
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }

    fn status(&self) -> ReplicaStatus {
        let status = self.status.clone().unwrap_or_default();
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
            observed_generation: status.observed_generation.unwrap_or(0),
            conditions: conditions.collect(),
        }
    }

    fn with_status(&self, status: &ReplicaStatus) -> Self {
        let conditions: Vec<ReplicationControllerCondition> = status
            .conditions
            .iter()
            .map(|c| ReplicationControllerCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: c.last_transition_time.clone(),
            })
            .collect();
        let status = ReplicationControllerStatus {
            replicas: status.replicas,
            fully_labeled_replicas: non_zero(status.fully_labeled_replicas),
            ready_replicas: non_zero(status.ready_replicas),
            available_replicas: non_zero(status.available_replicas),
            observed_generation: Some(status.observed_generation),
            conditions: (!conditions.is_empty()).then_some(conditions),
        };
        ReplicationController { status: Some(status), ..self.clone() }
    }
}
