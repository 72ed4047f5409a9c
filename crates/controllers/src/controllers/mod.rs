//! The controllers, one module (or folder) each, as upstream's `pkg/controller/<name>`, plus the
//! helpers several of them share (`podutil`, `nodeutil`, `endpointutil`, `jobutil`, `history`,
//! `volumeutil`, `resourceclaimutil`, `finalizerutil`, `syncmetrics`). A controller exports a
//! constructor taking a [`crate::runtime::controller::ControllerContext`] and a plain config
//! struct; the table in `crate::app::controllers` names it and builds it from the flags.

pub mod attachdetach;
pub mod bootstrap;
pub mod certificates;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemon;
pub mod deployment;
pub mod devicetainteviction;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod endpointutil;
pub mod ephemeral;
pub mod expand;
pub mod finalizerutil;
pub mod garbagecollector;
pub mod history;
pub mod job;
pub mod jobutil;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod nodeutil;
pub mod persistentvolume;
pub mod podautoscaler;
pub mod podgc;
pub mod podgroupprotection;
pub mod podutil;
pub mod pvcprotection;
pub mod pvprotection;
pub mod replicaset;
pub mod resourceclaim;
pub mod resourceclaimutil;
pub mod resourcepoolstatusrequest;
pub mod resourcequota;
pub mod root_ca_publisher;
pub mod selinuxwarning;
pub mod serviceaccount;
pub mod servicecidrs;
pub mod statefulset;
pub mod storageversiongc;
pub mod storageversionmigrator;
pub mod syncmetrics;
pub mod tainteviction;
pub mod ttl;
pub mod ttlafterfinished;
pub mod vacprotection;
pub mod validatingadmissionpolicystatus;
pub mod volumeutil;

#[cfg(test)]
pub(crate) mod testutil;
