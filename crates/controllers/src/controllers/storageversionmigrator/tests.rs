use jiff::Timestamp;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::migrator::{is_retriable, migration_patch};
use super::resourceversion::is_resource_migratable;
use super::runner::{StorageMigratingCondition, finish_reason, status_apply, svms_for_resource};
use super::*;
use crate::client::discovery::{ApiResource, Discovery};
use crate::client::metadata::PartialObjectMetadata;

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("a time")
}

fn condition(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T10:00:00Z"})
}

fn svm(name: &str, created: &str, resource: &str, conditions: &[Value]) -> StorageVersionMigration {
    serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"resource": {"group": "example.com", "resource": resource}},
        "status": {"conditions": conditions},
    }))
    .expect("a migration")
}

fn names(svms: &[&StorageVersionMigration]) -> Vec<String> {
    svms.iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect()
}

fn widgets() -> (String, String) {
    ("example.com".to_string(), "widgets".to_string())
}

#[test]
fn a_condition_is_set_only_once() {
    let mut migration = svm("m", "2026-01-01T11:00:00Z", "widgets", &[]);
    set_status_conditions(&mut migration, MIGRATION_RUNNING, "MigrationRunning", "The migration is running", now());
    set_status_conditions(&mut migration, MIGRATION_RUNNING, "Other", "other", now());
    let set = conditions(&migration);
    assert_eq!(set.len(), 1);
    assert_eq!((set[0].reason.as_str(), set[0].status.as_str()), ("MigrationRunning", "True"));
    assert!(is_running(&migration) && !is_terminal(&migration));

    let mut finished = svm("f", "2026-01-01T11:00:00Z", "widgets", &[condition(MIGRATION_SUCCEEDED, "False")]);
    set_status_conditions(&mut finished, MIGRATION_SUCCEEDED, "StorageVersionMigrationSucceeded", "", now());
    assert_eq!(conditions(&finished)[0].status, "False", "a False condition is not replaced either");
}

#[test]
fn set_status_condition_moves_the_transition_time_only_on_a_change_of_status() {
    let mut list = vec![serde_json::from_value(condition(MIGRATION_RUNNING, "True")).expect("a condition")];
    let mut same: k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition =
        serde_json::from_value(condition(MIGRATION_RUNNING, "True")).expect("a condition");
    same.reason = "Again".into();
    set_status_condition(&mut list, same.clone(), now());
    assert_eq!(list[0].last_transition_time.0.to_string(), "2026-01-01T10:00:00Z");
    assert_eq!(list[0].reason, "Again");
    same.status = "False".into();
    set_status_condition(&mut list, same, now());
    assert_eq!(list[0].last_transition_time.0, now());
}

#[test]
fn the_oldest_waiting_migration_of_a_resource_is_promoted_unless_one_runs() {
    let migrations = [
        svm("b", "2026-01-01T11:00:00Z", "widgets", &[]),
        svm("a", "2026-01-01T11:00:00Z", "widgets", &[]),
        svm("c", "2026-01-01T10:00:00Z", "gadgets", &[]),
        svm("d", "2026-01-01T11:30:00Z", "widgets", &[condition(MIGRATION_SUCCEEDED, "True")]),
    ];
    let (clean, promote) = svms_for_resource(&migrations, &widgets());
    assert!(clean.is_empty());
    assert_eq!(promote.map(|s| s.metadata.name.clone()), Some(Some("a".to_string())), "same time: by name");

    let running = [svm("r", "2026-01-01T11:30:00Z", "widgets", &[condition(MIGRATION_RUNNING, "True")])];
    let with_running: Vec<_> = migrations.iter().cloned().chain(running.iter().cloned()).collect();
    let (_, promote) = svms_for_resource(&with_running, &widgets());
    assert!(promote.is_none(), "one at a time");
}

#[test]
fn a_finished_running_migration_is_cleaned_up() {
    let migrations = [
        svm(
            "done",
            "2026-01-01T10:00:00Z",
            "widgets",
            &[condition(MIGRATION_RUNNING, "True"), condition(MIGRATION_FAILED, "True")],
        ),
        svm("next", "2026-01-01T11:00:00Z", "widgets", &[]),
    ];
    let (clean, promote) = svms_for_resource(&migrations, &widgets());
    assert_eq!(names(&clean), ["done"]);
    assert_eq!(promote.and_then(|s| s.metadata.name.as_deref()), Some("next"));
}

#[test]
fn the_definition_is_told_how_the_migration_ended() {
    assert_eq!(finish_reason(false, true), ("MigrationFailed", "The migration has failed".to_string()));
    assert_eq!(
        finish_reason(true, true),
        ("MigrationSucceeded", "The migration has succeeded and the stored versions have been updated".to_string())
    );
    assert!(finish_reason(true, false).1.ends_with("due to a generation mismatch"));

    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com", "resourceVersion": "42", "generation": 3},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"}, "versions": []},
    }))
    .expect("a definition");
    let condition = StorageMigratingCondition { status: "False", reason: "MigrationSucceeded", message: "m".into() };
    let body = status_apply(&crd, &condition, Some("v2".into()), now());
    assert_eq!(
        body,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "resourceVersion": "42"},
            "status": {
                "conditions": [{"type": "StorageMigrating", "status": "False", "lastTransitionTime": "2026-01-01T12:00:00Z",
                                "reason": "MigrationSucceeded", "message": "m", "observedGeneration": 3}],
                "storedVersions": ["v2"],
            },
        })
    );
}

fn resource(group: &str, version: &str, plural: &str, verbs: &[&str]) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        kind: "Widget".into(),
        plural: plural.into(),
        namespaced: true,
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
    }
}

#[test]
fn discovery_gives_the_preferred_version_and_whether_it_can_be_migrated() {
    let all = ["get", "list", "watch", "update", "patch"];
    let discovered = Discovery {
        all: vec![
            resource("example.com", "v2", "widgets", &all),
            resource("example.com", "v1", "widgets", &all),
            resource("example.com", "v2", "readonly", &["get", "list"]),
        ],
        failed: Default::default(),
    };
    let widgets = resource_for(&discovered, "example.com", "widgets").expect("found");
    assert_eq!(widgets.version, "v2");
    assert!(resource_for(&discovered, "example.com", "gadgets").is_none());
    assert_eq!(is_resource_migratable(&discovered, &widgets).ok(), Some(true));
    let readonly = resource_for(&discovered, "example.com", "readonly").expect("found");
    assert_eq!(is_resource_migratable(&discovered, &readonly).ok(), Some(false));
    let elsewhere = resource("other.com", "v1", "things", &all);
    assert_eq!(is_resource_migratable(&discovered, &elsewhere).ok(), Some(false), "an unknown group-version");
    let missing = resource("example.com", "v2", "gadgets", &all);
    assert!(is_resource_migratable(&discovered, &missing).is_err());
    assert_eq!(gvr_string(&widgets), "example.com/v2, Resource=widgets");
    assert_eq!(gvr_string(&resource("", "v1", "pods", &[])), "/v1, Resource=pods");
}

#[test]
fn a_migration_waits_a_minute_for_discovery() {
    assert!(within_discovery_grace(&svm("m", "2026-01-01T11:59:30Z", "widgets", &[]), now()));
    assert!(!within_discovery_grace(&svm("m", "2026-01-01T11:58:30Z", "widgets", &[]), now()));
}

#[test]
fn the_migration_patch_carries_only_type_uid_and_resource_version() {
    let object: PartialObjectMetadata = serde_json::from_value(json!({
        "metadata": {"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "17", "labels": {"a": "b"}}
    }))
    .expect("metadata");
    let patch = migration_patch(&resource("example.com", "v2", "widgets", &[]), &object);
    assert_eq!(
        patch,
        json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"uid": "u-1", "resourceVersion": "17"}})
    );
}

#[test]
fn throttling_and_server_trouble_are_retried_other_errors_fail() {
    let api = |code: u16, reason: &str| {
        crate::client::Error::Api(Box::new(crate::client::ApiError::from_response(
            code,
            json!({"kind": "Status", "code": code, "reason": reason, "message": "m"}).to_string().as_bytes(),
            None,
        )))
    };
    assert!(is_retriable(&api(429, "TooManyRequests")));
    assert!(is_retriable(&api(500, "InternalError")));
    assert!(is_retriable(&api(503, "ServiceUnavailable")));
    assert!(is_retriable(&api(504, "Timeout")));
    assert!(is_retriable(&crate::client::Error::Transport("connection reset by peer".into())));
    assert!(!is_retriable(&api(422, "Invalid")));
    assert!(!is_retriable(&api(403, "Forbidden")));
}
