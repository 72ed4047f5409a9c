//! The controllers against the sandbox and the real server, one module per controller in
//! `tests/controllers/`, and our binary beside upstream's (`side_by_side`).
//!
//! One test binary for all of them (as for each other group of `tests/*.rs`): every test binary
//! links the whole library, and linking dominated CI's time while each file was its own binary.
//! The tests share this process; none reads process-wide state another could change (the metric
//! registry's exact contents are checked by `workqueue_names`, its own binary for that reason).

#[macro_use]
mod harness;

#[path = "controllers/attachdetach.rs"]
mod attachdetach;
#[path = "controllers/bootstrap.rs"]
mod bootstrap;
#[path = "controllers/certificates.rs"]
mod certificates;
#[path = "controllers/clusterroleaggregation.rs"]
mod clusterroleaggregation;
#[path = "controllers/clustertrustbundlepublisher.rs"]
mod clustertrustbundlepublisher;
#[path = "controllers/cronjob.rs"]
mod cronjob;
#[path = "controllers/daemonset.rs"]
mod daemonset;
#[path = "controllers/deployment.rs"]
mod deployment;
#[path = "controllers/devicetaint.rs"]
mod devicetaint;
#[path = "controllers/disruption.rs"]
mod disruption;
#[path = "controllers/endpoints.rs"]
mod endpoints;
#[path = "controllers/ephemeral.rs"]
mod ephemeral;
#[path = "controllers/expand.rs"]
mod expand;
#[path = "controllers/gc.rs"]
mod gc;
#[path = "controllers/hpa.rs"]
mod hpa;
#[path = "controllers/job.rs"]
mod job;
#[path = "controllers/namespace.rs"]
mod namespace;
#[path = "controllers/nodeipam.rs"]
mod nodeipam;
#[path = "controllers/nodelifecycle.rs"]
mod nodelifecycle;
#[path = "controllers/pcrcleaner.rs"]
mod pcrcleaner;
#[path = "controllers/persistentvolume.rs"]
mod persistentvolume;
#[path = "controllers/podgc.rs"]
mod podgc;
#[path = "controllers/podgroupprotection.rs"]
mod podgroupprotection;
#[path = "controllers/protection.rs"]
mod protection;
#[path = "controllers/replicaset.rs"]
mod replicaset;
#[path = "controllers/resourceclaim.rs"]
mod resourceclaim;
#[path = "controllers/resourcepoolstatusrequest.rs"]
mod resourcepoolstatusrequest;
#[path = "controllers/resourcequota.rs"]
mod resourcequota;
#[path = "controllers/selinuxwarning.rs"]
mod selinuxwarning;
#[path = "controllers/serviceaccounts.rs"]
mod serviceaccounts;
#[path = "controllers/servicecidr.rs"]
mod servicecidr;
#[path = "controllers/side_by_side.rs"]
mod side_by_side;
#[path = "controllers/statefulset.rs"]
mod statefulset;
#[path = "controllers/storageversiongc.rs"]
mod storageversiongc;
#[path = "controllers/storageversionmigrator.rs"]
mod storageversionmigrator;
#[path = "controllers/ttl.rs"]
mod ttl;
#[path = "controllers/ttlafterfinished.rs"]
mod ttlafterfinished;
#[path = "controllers/vacprotection.rs"]
mod vacprotection;
#[path = "controllers/validatingadmissionpolicy.rs"]
mod validatingadmissionpolicy;
