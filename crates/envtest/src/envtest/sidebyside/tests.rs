use serde_json::json;

use super::*;

#[test]
fn uuids_in_messages_are_masked() {
    let text = "volume \"pvc-3d21e41b-adcc-4be5-b325-d2e4d0548655\" of ü 3d21e41b";
    assert_eq!(mask_uuids(text), "volume \"pvc-<uid>\" of ü 3d21e41b");
}

#[test]
fn conflicts_are_counted_from_both_log_formats() {
    let log = r#"I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="PUT" url="https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/replicasets/web-1/status" status="409 Conflict" milliseconds=7
I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1:36002/api/v1/pods" status="200 OK" milliseconds=7
I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="PUT" url="https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/deployments/web" status="200 OK" milliseconds=7
I1126 00:33:45.123456    4321 mod.rs:335] PUT https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/deployments/web 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] POST https://127.0.0.1:36002/api/v1/namespaces/sbs/pods 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] POST https://127.0.0.1:36002/api/v1/namespaces 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] GET https://127.0.0.1:36002/api/v1/pods 409 Conflict in 3 milliseconds"#;
    let conflicts = count_conflicts(log);
    assert_eq!(conflicts.total, 4);
    let expected: BTreeMap<String, usize> =
        [("PUT replicasets/status", 1), ("PUT deployments", 1), ("POST pods", 1), ("POST namespaces", 1)]
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect();
    assert_eq!(conflicts.by_request, expected);
}

fn pod(name: &str, node: &str, ip: &str, uid: &str) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "generateName": "web-", "namespace": "sbs", "uid": uid,
            "resourceVersion": "7", "creationTimestamp": "2025-11-26T00:33:45Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "11111111-2222-3333-4444-555555555555"}]},
           "spec": {"nodeName": node}, "status": {"podIP": ip, "startTime": "2025-11-26T00:33:46.123456Z"}})
}

#[test]
fn scenario_flags_can_take_controllers_out_of_the_selection() {
    let args =
        controller_manager_args(Side::Ours, Path::new("/k/admin.conf"), &["--controllers=-job-controller", "-v=4"]);
    let controllers: Vec<&str> = args.iter().filter_map(|a| a.strip_prefix("--controllers=")).collect();
    assert_eq!(controllers.len(), 1, "{args:?}");
    assert!(controllers[0].contains("cronjob-controller") && !controllers[0].split(',').any(|c| c == "job-controller"));
    assert_eq!(args.last().map(String::as_str), Some("-v=4"));
}

#[test]
fn cron_job_jobs_are_named_by_minute_from_the_first() {
    let objects = vec![
        json!({"kind": "CronJob", "metadata": {"name": "replace", "namespace": "sbs"},
               "status": {"active": [{"name": "replace-29928247", "resourceVersion": "417"}]}}),
        json!({"kind": "Job", "metadata": {"name": "replace-29928247", "namespace": "sbs",
               "labels": {"batch.kubernetes.io/job-name": "replace-29928247"}}}),
    ];
    let events = vec![
        json!({"type": "Normal", "reason": "SuccessfulDelete", "message": "Deleted job replace-29928246",
               "involvedObject": {"kind": "CronJob", "name": "replace"}, "source": {"component": "cronjob-controller"}}),
    ];
    let snapshot = normalise("final", objects, events, "CA");
    let job = &snapshot.objects["Job sbs/replace-<minute+1>"];
    assert_eq!(job["metadata"]["labels"]["batch.kubernetes.io/job-name"], "replace-<minute+1>");
    let active = &snapshot.objects["CronJob sbs/replace"]["status"]["active"][0];
    assert_eq!(active, &json!({"name": "replace-<minute+1>"}));
    let events: Vec<&String> = snapshot.events.iter().collect();
    assert_eq!(
        events,
        ["Normal SuccessfulDelete CronJob/replace: Deleted job replace-<minute+0> (by cronjob-controller)"]
    );
}

#[test]
fn generated_names_are_numbered_by_content_and_followed_everywhere() {
    let objects = vec![
        json!({"kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "sbs", "uid": "11111111-2222-3333-4444-555555555555"}}),
        pod("web-x7k2q", "node-2", "10.244.2.5", "aaaaaaaa-2222-3333-4444-555555555555"),
        pod("web-b9zzt", "node-1", "10.244.1.7", "bbbbbbbb-2222-3333-4444-555555555555"),
    ];
    let events = vec![
        json!({"type": "Normal", "reason": "SuccessfulCreate", "message": "Created pod: web-x7k2q",
               "involvedObject": {"kind": "ReplicaSet", "name": "web"}, "source": {"component": "replicaset-controller"}}),
        json!({"type": "Normal", "reason": "SuccessfulDelete", "message": "Deleted pod: web-gn4d2",
               "involvedObject": {"kind": "ReplicaSet", "name": "web"}, "source": {"component": "replicaset-controller"}}),
    ];
    let snapshot = normalise("final", objects, events, "CA");
    let keys: Vec<&String> = snapshot.objects.keys().collect();
    assert_eq!(keys, ["Pod sbs/web-#1", "Pod sbs/web-#2", "ReplicaSet sbs/web"]);
    let first = &snapshot.objects["Pod sbs/web-#1"];
    assert_eq!(first["spec"]["nodeName"], "node-1");
    assert_eq!(first["status"]["podIP"], "ip(web-#1)");
    assert_eq!(first["status"]["startTime"], "<time>");
    assert_eq!(first["metadata"]["uid"], "uid(Pod/web-#1)");
    assert_eq!(first["metadata"]["ownerReferences"][0]["uid"], "uid(ReplicaSet/web)");
    assert!(first["metadata"].get("resourceVersion").is_none());
    let events: Vec<&String> = snapshot.events.iter().collect();
    assert_eq!(
        events,
        [
            "Normal SuccessfulCreate ReplicaSet/web: Created pod: web-#2 (by replicaset-controller)",
            "Normal SuccessfulDelete ReplicaSet/web: Deleted pod: web-* (by replicaset-controller)",
        ]
    );
}

#[test]
fn a_generated_name_is_masked_after_its_object_is_gone() {
    let claim = json!({"kind": "ResourceClaim", "metadata": {"name": "trainer-gpu-cffj8", "namespace": "sbs",
        "generateName": "trainer-gpu-", "uid": "cccccccc-2222-3333-4444-555555555555"}});
    let pod = json!({"kind": "Pod", "metadata": {"name": "trainer", "namespace": "sbs"}, "status": {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-cffj8"}]}});
    let mut remembered = Remembered::default();
    let first = normalise_remembering("a", vec![claim, pod.clone()], vec![], "CA", &mut remembered);
    let named = |s: &Snapshot| s.objects["Pod sbs/trainer"]["status"]["resourceClaimStatuses"][0].clone();
    assert_eq!(named(&first)["resourceClaimName"], "trainer-gpu-#1");
    // The claim deleted: the pod's status still names it.
    let second = normalise_remembering("b", vec![pod.clone()], vec![], "CA", &mut remembered);
    assert_eq!(named(&second)["resourceClaimName"], "trainer-gpu-*");
    let forgetful = normalise("b", vec![pod], vec![], "CA");
    assert_eq!(named(&forgetful)["resourceClaimName"], "trainer-gpu-cffj8");
}

#[test]
fn differences_name_the_path() {
    let a = json!({"status": {"replicas": 3, "conditions": [{"type": "A"}]}});
    let b = json!({"status": {"replicas": 2, "conditions": [{"type": "A"}]}, "extra": true});
    let mut out = Vec::new();
    diff_values("", &a, &b, &mut out);
    assert_eq!(
        out,
        [
            (".extra".to_string(), "<absent>".to_string(), "true".to_string()),
            (".status.replicas".to_string(), "3".to_string(), "2".to_string()),
        ]
    );
}

/// A 429 from an eviction reaches the scenario as the API's code through the step's wrapper
/// (the disruption scenario tells a budget's refusal from any other by it).
#[test]
fn an_api_errors_code_travels_through_the_steps_wrapper() {
    let api = client::Error::from(client::ApiError::from_response(429, b"", None));
    let error =
        Error::from(JsonApiError::Api { what: "POST /api/v1/namespaces/sbs/pods/web-1/eviction".into(), source: api });
    assert_eq!(error.code(), Some(429));
    assert!(error.to_string().starts_with("POST /api/v1/namespaces/sbs/pods/web-1/eviction: "));
    assert!(error.to_string().contains("(429 "), "the text is the client's, as before: {error}");
    let refused = Error::EvictionRefused { source: Box::new(error) };
    assert_eq!(refused.code(), Some(429), "found through every wrapper");
    assert!(refused.to_string().starts_with("the eviction was refused otherwise: POST "));
    assert_eq!(Error::Scenario("no pod on node-2".into()).code(), None);
}

/// A failed run is told apart from the other side's by its text, as before.
#[test]
fn runs_failing_alike_are_no_difference() {
    let run = |error: Option<Error>| Run {
        side: Side::Ours,
        error,
        checkpoints: Vec::new(),
        conflicts: Conflicts::default(),
        log: PathBuf::new(),
        elapsed: Duration::ZERO,
    };
    let timeout = || Error::Timeout { what: "web".into(), timeout: STEP_TIMEOUT };
    assert!(diff_runs(&run(Some(timeout())), &run(Some(timeout()))).is_empty());
    let differences = diff_runs(&run(None), &run(Some(timeout())));
    assert_eq!(differences.len(), 1);
    assert_eq!(differences[0].ours, "failed: timed out after 90s waiting for web");
    assert_eq!(differences[0].upstream, "finished");
}
