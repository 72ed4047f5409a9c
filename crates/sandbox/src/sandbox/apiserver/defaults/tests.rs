use serde_json::{Value, json};

use super::{apply, pod_qos_class, prepare_update};
use crate::sandbox::storage::resources::{RESOURCES, ResourceType};

fn resource(group: &str, kind: &str) -> &'static ResourceType {
    RESOURCES.iter().find(|r| r.group == group && r.kind == kind).expect("served kind")
}

fn defaulted(group: &str, kind: &str, mut object: Value) -> Value {
    apply(resource(group, kind), &mut object);
    object
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "default",
        "uid": "0b6d5f2c-1d2e-4c2b-9a51-6f0a3c1e2d4f",
        "creationTimestamp": "2025-05-01T10:00:00Z",
        "generation": 1,
    })
}

/// A pod template with one container and whatever extra pod-spec fields are given.
fn template(extra: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "app", "image": "nginx:1.27"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"metadata": {"labels": {"app": "web"}}, "spec": spec})
}

/// The defaulted pod spec of `template(json!({}))`.
fn defaulted_template_spec() -> Value {
    json!({
        "containers": [{
            "name": "app",
            "image": "nginx:1.27",
            "imagePullPolicy": "IfNotPresent",
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }],
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    })
}

#[test]
fn minimal_deployment_reads_back_as_from_kube_apiserver() {
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("web"),
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]},
            },
        },
    });
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("web"),
        "spec": {
            "progressDeadlineSeconds": 600,
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                "type": "RollingUpdate",
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "image": "nginx:1.27",
                        "imagePullPolicy": "IfNotPresent",
                        "name": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
    });
    assert_eq!(defaulted("apps", "Deployment", deployment), want);
}

#[test]
fn deployment_keeps_what_is_set() {
    let deployment = json!({
        "metadata": metadata("web"),
        "spec": {
            "replicas": 0,
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 0,
            "template": template(json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 0})),
        },
    });
    let got = defaulted("apps", "Deployment", deployment);
    assert_eq!(got["spec"]["replicas"], 0);
    assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(got["spec"]["revisionHistoryLimit"], 0);
    assert_eq!(got["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 0);

    let partial = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 3}}}});
    let got = defaulted("apps", "Deployment", partial);
    assert_eq!(
        got["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": "25%"}})
    );
}

#[test]
fn resource_lists_round_up_to_milli_units_in_canonical_form() {
    let deployment = json!({"spec": {"template": template(json!({
        "overhead": {"cpu": "0.25"},
        "resources": {"limits": {"memory": "1.5Gi"}},
        "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1024Mi"}}}}}}],
    }))}});
    let mut deployment = deployment;
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "0.0001", "memory": "1000000"}, "limits": {"cpu": 2, "example.com/x": "1n"}});
    let got = defaulted("apps", "Deployment", deployment);
    let spec = &got["spec"]["template"]["spec"];
    assert_eq!(spec["containers"][0]["resources"]["requests"], json!({"cpu": "1m", "memory": "1M"}));
    assert_eq!(spec["containers"][0]["resources"]["limits"], json!({"cpu": "2", "example.com/x": "1m"}));
    assert_eq!(spec["overhead"], json!({"cpu": "250m"}));
    assert_eq!(spec["resources"]["limits"], json!({"memory": "1536Mi"}));
    assert_eq!(
        spec["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"]["requests"],
        json!({"storage": "1Gi"})
    );
}

#[test]
fn pod_requests_default_to_limits_but_template_requests_do_not() {
    let resources = json!({"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}});
    let pod = json!({
        "metadata": metadata("p"),
        "spec": {
            "containers": [{"name": "a", "image": "busybox", "resources": resources}],
            "initContainers": [{"name": "i", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
        },
    });
    let got = defaulted("", "Pod", pod);
    assert_eq!(got["spec"]["containers"][0]["resources"]["requests"], json!({"cpu": "100m", "memory": "128Mi"}));
    assert_eq!(got["spec"]["initContainers"][0]["resources"]["requests"], json!({"cpu": "1"}));
    assert_eq!(got["spec"]["enableServiceLinks"], true);
    assert_eq!(got["spec"]["containers"][0]["imagePullPolicy"], "Always");

    let rs = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "busybox:1", "resources": {"limits": {"cpu": "1"}}}]}}}});
    let got = defaulted("apps", "ReplicaSet", rs);
    let spec = &got["spec"]["template"]["spec"];
    assert_eq!(spec["containers"][0]["resources"], json!({"limits": {"cpu": "1"}}));
    assert!(spec.get("enableServiceLinks").is_none());
    assert_eq!(got["spec"]["replicas"], 1);
}

#[test]
fn pod_spec_nested_defaults() {
    let pod = json!({
        "metadata": metadata("p"),
        "spec": {
            "hostNetwork": true,
            "containers": [{
                "name": "a",
                "image": "registry.local:5000/app:latest",
                "ports": [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP", "hostPort": 5353}],
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "livenessProbe": {"httpGet": {"port": 8080}},
                "readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 5},
                "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
            }],
            "ephemeralContainers": [{"name": "debug", "image": "busybox@sha256:".to_string() + &"0".repeat(64)}],
            "volumes": [
                {"name": "scratch"},
                {"name": "s", "secret": {"secretName": "s"}},
                {"name": "c", "configMap": {"name": "c", "defaultMode": 256}},
                {"name": "h", "hostPath": {"path": "/var"}},
                {"name": "d", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "p", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                ]}},
                {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                {"name": "r", "rbd": {"monitors": ["m"], "image": "i"}},
            ],
        },
    });
    let got = defaulted("", "Pod", pod);
    let container = &got["spec"]["containers"][0];
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(
        container["ports"],
        json!([
            {"containerPort": 8080, "protocol": "TCP", "hostPort": 8080},
            {"containerPort": 53, "protocol": "UDP", "hostPort": 5353},
        ])
    );
    assert_eq!(container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(
        container["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(container["readinessProbe"]["grpc"], json!({"port": 9090, "service": ""}));
    assert_eq!(container["readinessProbe"]["periodSeconds"], 5);
    assert_eq!(container["startupProbe"]["failureThreshold"], 30);
    assert_eq!(container["lifecycle"]["preStop"]["httpGet"], json!({"port": 80, "path": "/quit", "scheme": "HTTP"}));
    assert_eq!(got["spec"]["ephemeralContainers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(got["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"], "File");
    let volumes = &got["spec"]["volumes"];
    assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
    assert_eq!(volumes[1]["secret"]["defaultMode"], 420);
    assert_eq!(volumes[2]["configMap"]["defaultMode"], 256);
    assert_eq!(volumes[3]["hostPath"], json!({"path": "/var", "type": ""}));
    assert_eq!(volumes[4]["downwardAPI"]["defaultMode"], 420);
    assert_eq!(volumes[4]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(volumes[5]["projected"]["defaultMode"], 420);
    assert_eq!(volumes[5]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
    assert_eq!(volumes[5]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(
        volumes[6]["ephemeral"]["volumeClaimTemplate"],
        json!({"metadata": {}, "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}})
    );
    assert_eq!(
        volumes[7]["rbd"],
        json!({"monitors": ["m"], "image": "i", "pool": "rbd", "user": "admin", "keyring": "/etc/ceph/keyring"})
    );
}

#[test]
fn pod_affinity_label_keys_merge_into_selectors_on_create_only() {
    let term = json!({
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["pod-template-hash", "absent"],
        "mismatchLabelKeys": ["tenant"],
        "topologyKey": "kubernetes.io/hostname",
    });
    let pod = json!({
        "metadata": {"name": "p", "labels": {"app": "web", "pod-template-hash": "abc", "tenant": "t1"}},
        "spec": {
            "containers": [{"name": "a", "image": "a"}],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term.clone()],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}],
                },
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"matchLabelKeys": ["app"], "topologyKey": "z"}]},
            },
        },
    });
    let mut got = defaulted("", "Pod", pod);
    let want = json!([
        {"key": "pod-template-hash", "operator": "In", "values": ["abc"]},
        {"key": "tenant", "operator": "NotIn", "values": ["t1"]},
    ]);
    let anti = &got["spec"]["affinity"]["podAntiAffinity"];
    assert_eq!(anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchExpressions"], want);
    assert_eq!(
        anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]["matchExpressions"],
        want
    );
    // Without a label selector a term matches nothing and stays so.
    assert!(
        got["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            .get("labelSelector")
            .is_none()
    );

    // Applying again changes nothing, and stored pods are not merged again.
    let once = got.clone();
    apply(resource("", "Pod"), &mut got);
    assert_eq!(got, once);
    got["metadata"]["resourceVersion"] = json!("5");
    got["metadata"]["labels"]["pod-template-hash"] = json!("def");
    let stored = got.clone();
    apply(resource("", "Pod"), &mut got);
    assert_eq!(got, stored);
}

#[test]
fn image_volumes_get_a_pull_policy_and_file_keys_are_required() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {
    "containers": [{"name": "a", "image": "a", "env": [{"name": "E", "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "env", "key": "E"}}}]}],
    "volumes": [
        {"name": "latest", "image": {"reference": "tools:latest"}},
        {"name": "pinned", "image": {"reference": "tools:1.0"}},
        {"name": "set", "image": {"reference": "tools", "pullPolicy": "Never"}},
    ]}});
    let got = defaulted("", "Pod", pod);
    let policies: Vec<&Value> = (0..3).map(|i| &got["spec"]["volumes"][i]["image"]["pullPolicy"]).collect();
    assert_eq!(policies, [&json!("Always"), &json!("IfNotPresent"), &json!("Never")]);
    assert_eq!(got["spec"]["containers"][0]["env"][0]["valueFrom"]["fileKeyRef"]["optional"], false);
}

#[test]
fn topology_spread_label_keys_merge_into_selectors_on_create() {
    let pod = json!({
        "metadata": {"name": "p", "labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": {
            "containers": [{"name": "a", "image": "a"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash", "absent"]},
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "matchLabelKeys": ["pod-template-hash"]},
            ],
        },
    });
    let got = defaulted("", "Pod", pod);
    let constraints = &got["spec"]["topologySpreadConstraints"];
    assert_eq!(
        constraints[0]["labelSelector"]["matchExpressions"],
        json!([{"key": "pod-template-hash", "operator": "In", "values": ["abc"]}])
    );
    assert!(constraints[1].get("labelSelector").is_none(), "no selector, nothing to merge into");
}

#[test]
fn templates_get_the_same_pod_spec_defaults_everywhere() {
    let want = defaulted_template_spec();
    let cases = [
        ("", "ReplicationController", json!({"spec": {"template": template(json!({}))}}), "/spec/template/spec"),
        ("", "PodTemplate", json!({"template": template(json!({}))}), "/template/spec"),
        ("apps", "ReplicaSet", json!({"spec": {"template": template(json!({}))}}), "/spec/template/spec"),
        ("apps", "StatefulSet", json!({"spec": {"template": template(json!({}))}}), "/spec/template/spec"),
        ("apps", "DaemonSet", json!({"spec": {"template": template(json!({}))}}), "/spec/template/spec"),
        ("batch", "Job", json!({"spec": {"template": template(json!({}))}}), "/spec/template/spec"),
        (
            "batch",
            "CronJob",
            json!({"spec": {"jobTemplate": {"spec": {"template": template(json!({}))}}}}),
            "/spec/jobTemplate/spec/template/spec",
        ),
    ];
    for (group, kind, object, path) in cases {
        let got = defaulted(group, kind, object);
        assert_eq!(got.pointer(path), Some(&want), "{kind}");
        // The template's metadata is written (a struct), without a zero creationTimestamp
        // (`omitzero` since v1.34).
        let metadata_path = path.trim_end_matches("/spec").to_string() + "/metadata";
        assert_eq!(got.pointer(&metadata_path).and_then(|m| m.get("creationTimestamp")), None, "{kind}");
        assert!(got.pointer(&metadata_path).is_some_and(Value::is_object), "{kind}");
    }
}

#[test]
fn service_account_alias_mirrors_the_name() {
    let cases = [
        (json!({"serviceAccountName": "builder"}), Some("builder")),
        (json!({"serviceAccount": "legacy"}), Some("legacy")),
        (json!({"serviceAccountName": "new", "serviceAccount": "old"}), Some("new")),
        (json!({"serviceAccountName": ""}), None),
    ];
    for (extra, want) in cases {
        let got = defaulted("apps", "ReplicaSet", json!({"spec": {"template": template(extra.clone())}}));
        let spec = &got["spec"]["template"]["spec"];
        assert_eq!(spec.get("serviceAccount").and_then(Value::as_str), want, "{extra}");
        if let Some(want) = want {
            assert_eq!(spec["serviceAccountName"], want, "{extra}");
        }
    }
}

#[test]
fn replication_controller_selector_and_labels_come_from_the_template() {
    let got = defaulted(
        "",
        "ReplicationController",
        json!({"metadata": {"name": "rc"}, "spec": {"template": template(json!({}))}}),
    );
    assert_eq!(got["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(got["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(got["spec"]["replicas"], 1);

    let own = json!({"metadata": {"name": "rc", "labels": {"x": "y"}}, "spec": {"selector": {"app": "web"}, "replicas": 3, "template": template(json!({}))}});
    let got = defaulted("", "ReplicationController", own);
    assert_eq!(got["metadata"]["labels"], json!({"x": "y"}));
    assert_eq!(got["spec"]["replicas"], 3);
}

#[test]
fn stateful_set_defaults() {
    let sts = json!({
        "metadata": metadata("db"),
        "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "web"}},
            "template": template(json!({})),
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    });
    let got = defaulted("apps", "StatefulSet", sts);
    let spec = &got["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
    assert_eq!(spec["persistentVolumeClaimRetentionPolicy"], json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
    assert_eq!(
        spec["volumeClaimTemplates"][0],
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"},
        })
    );

    // An explicit RollingUpdate type without parameters gets none (only an unset type does).
    let explicit = json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}});
    let got = defaulted("apps", "StatefulSet", explicit);
    assert_eq!(got["spec"]["updateStrategy"], json!({"type": "RollingUpdate"}));
    let on_delete = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
    assert_eq!(defaulted("apps", "StatefulSet", on_delete)["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
}

#[test]
fn daemon_set_defaults_and_template_generation() {
    let ds = json!({"metadata": metadata("agent"), "spec": {"template": template(json!({}))}});
    let got = defaulted("apps", "DaemonSet", ds);
    assert_eq!(
        got["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(got["spec"]["revisionHistoryLimit"], 10);
    assert!(got["spec"].get("replicas").is_none());
    assert_eq!(got["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "1");

    let ds = resource("apps", "DaemonSet");
    let mut unchanged = got.clone();
    unchanged["metadata"]["annotations"] = json!({});
    apply(ds, &mut unchanged);
    prepare_update(ds, &got, &mut unchanged);
    assert_eq!(unchanged["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "1");

    let mut changed = got.clone();
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    apply(ds, &mut changed);
    prepare_update(ds, &got, &mut changed);
    assert_eq!(changed["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "2");
}

#[test]
fn job_selector_and_labels_are_generated_from_the_uid() {
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata("pi"),
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5.34.0"}]}}},
    });
    let got = defaulted("batch", "Job", job);
    let uid = "0b6d5f2c-1d2e-4c2b-9a51-6f0a3c1e2d4f";
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid,
        "job-name": "pi",
    });
    let spec = &got["spec"];
    assert_eq!(spec["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
    assert_eq!(spec["template"]["metadata"], json!({"labels": labels}));
    assert_eq!(got["metadata"]["labels"], labels);
    for (field, value) in [
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("completions", json!(1)),
        ("manualSelector", json!(false)),
        ("parallelism", json!(1)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ("suspend", json!(false)),
    ] {
        assert_eq!(spec[field], value, "{field}");
    }
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
}

#[test]
fn job_template_labels_copy_before_generation_and_manual_selectors_stay() {
    let job = json!({
        "metadata": metadata("j"),
        "spec": {"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed", "template": template(json!({}))},
    });
    let got = defaulted("batch", "Job", job);
    // Defaulting shares the template's label map with the Job, so generated labels show in both.
    let uid = "0b6d5f2c-1d2e-4c2b-9a51-6f0a3c1e2d4f";
    let labels = json!({
        "app": "web",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "j",
        "controller-uid": uid,
        "job-name": "j",
    });
    assert_eq!(got["metadata"]["labels"], labels);
    assert_eq!(got["spec"]["template"]["metadata"]["labels"], labels);
    // Labels of its own stay the Job's.
    let own = json!({"metadata": {"name": "k", "uid": uid, "labels": {"team": "a"}}, "spec": {"template": template(json!({}))}});
    assert_eq!(defaulted("batch", "Job", own)["metadata"]["labels"], json!({"team": "a"}));
    assert!(got["spec"].get("completions").is_none());
    assert_eq!(got["spec"]["backoffLimit"], 2147483647);

    let manual = json!({
        "metadata": metadata("m"),
        "spec": {
            "manualSelector": true,
            "selector": {"matchLabels": {"app": "web"}},
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": template(json!({"restartPolicy": "Never"})),
        },
    });
    let got = defaulted("batch", "Job", manual);
    assert_eq!(got["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(got["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(got["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(got["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"], "True");
}

#[test]
fn cron_job_defaults_leave_the_job_template_spec_alone() {
    let cron = json!({
        "metadata": metadata("c"),
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": template(json!({"restartPolicy": "OnFailure"}))}}},
    });
    let got = defaulted("batch", "CronJob", cron);
    let spec = &got["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert_eq!(spec["jobTemplate"]["metadata"], json!({}));
    let job_spec = spec["jobTemplate"]["spec"].as_object().expect("job spec");
    let keys: Vec<&str> = job_spec.keys().map(String::as_str).collect();
    assert_eq!(keys, ["template"]);
}

#[test]
fn service_defaults() {
    let service = json!({
        "metadata": metadata("web"),
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]},
    });
    let got = defaulted("", "Service", service);
    assert_eq!(
        got["spec"],
        json!({
            "selector": {"app": "web"},
            "ports": [
                {"port": 80, "protocol": "TCP", "targetPort": 80},
                {"port": 53, "protocol": "UDP", "targetPort": "dns"},
            ],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ipFamilyPolicy": "SingleStack",
        })
    );

    let lb = json!({
        "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 443, "targetPort": 0}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}},
    });
    let got = defaulted("", "Service", lb);
    assert_eq!(got["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(got["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(got["spec"]["sessionAffinityConfig"], json!({"clientIP": {"timeoutSeconds": 10800}}));
    assert_eq!(got["spec"]["ports"][0]["targetPort"], 443);
    assert_eq!(
        got["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.1", "ipMode": "VIP"}, {"hostname": "lb.example"}])
    );

    let headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    assert_eq!(defaulted("", "Service", headless)["spec"]["ipFamilyPolicy"], "RequireDualStack");
    let external = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
    let got = defaulted("", "Service", external);
    assert!(got["spec"].get("ipFamilyPolicy").is_none());
    assert!(got["spec"].get("internalTrafficPolicy").is_none());
    let external_ips =
        json!({"spec": {"externalIPs": ["192.0.2.9"], "ports": [{"port": 80}], "sessionAffinityConfig": {}}});
    let got = defaulted("", "Service", external_ips);
    assert_eq!(got["spec"]["externalTrafficPolicy"], "Cluster");
    assert!(got["spec"].get("sessionAffinityConfig").is_none());
}

#[test]
fn namespace_label_and_finalizer() {
    let got = defaulted(
        "",
        "Namespace",
        json!({"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "x"}}}),
    );
    assert_eq!(got["metadata"]["labels"], json!({"kubernetes.io/metadata.name": "team"}));
    assert_eq!(got["spec"], json!({"finalizers": ["kubernetes"]}));
    assert_eq!(got["status"], json!({"phase": "Active"}));

    let own = json!({"metadata": {"name": "team"}, "spec": {"finalizers": ["example.com/keep"]}});
    assert_eq!(defaulted("", "Namespace", own)["spec"]["finalizers"], json!(["example.com/keep", "kubernetes"]));

    // Once stored (an update) or being deleted, a removed finalizer is not put back.
    let finalized = json!({
        "metadata": {"name": "team", "resourceVersion": "7", "deletionTimestamp": "2025-05-01T10:00:00Z"},
        "spec": {"finalizers": []},
        "status": {"phase": "Terminating"},
    });
    let got = defaulted("", "Namespace", finalized);
    assert_eq!(got["spec"]["finalizers"], json!([]));
    assert_eq!(got["status"]["phase"], "Terminating");
}

#[test]
fn horizontal_pod_autoscaler_defaults() {
    let hpa = json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}});
    let got = defaulted("autoscaling", "HorizontalPodAutoscaler", hpa);
    assert_eq!(got["spec"]["minReplicas"], 1);
    assert_eq!(
        got["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    assert!(got["spec"].get("behavior").is_none());

    let with_behavior =
        json!({"spec": {"maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
    let got = defaulted("autoscaling", "HorizontalPodAutoscaler", with_behavior);
    assert_eq!(
        got["spec"]["behavior"],
        json!({
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Max",
                "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15},
                ],
            },
            "scaleDown": {
                "stabilizationWindowSeconds": 60,
                "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
            },
        })
    );
    let empty = json!({"spec": {"behavior": {}}});
    let got = defaulted("autoscaling", "HorizontalPodAutoscaler", empty);
    assert!(got["spec"]["behavior"]["scaleDown"].get("stabilizationWindowSeconds").is_none());
}

#[test]
fn other_groups() {
    let binding = json!({
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "d"}],
    });
    let got = defaulted("rbac.authorization.k8s.io", "ClusterRoleBinding", binding);
    assert_eq!(got["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(got["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(got["subjects"][1]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(got["subjects"][2].get("apiGroup").is_none());

    let policy = json!({"spec": {"ingress": [{"ports": [{"port": 80}]}], "egress": [{"ports": [{"protocol": "UDP", "port": 53}]}]}});
    let got = defaulted("networking.k8s.io", "NetworkPolicy", policy);
    assert_eq!(got["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(got["spec"]["podSelector"], json!({}));
    assert_eq!(got["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(got["spec"]["egress"][0]["ports"][0]["protocol"], "UDP");

    let class = defaulted("storage.k8s.io", "StorageClass", json!({"provisioner": "x"}));
    assert_eq!(class["reclaimPolicy"], "Delete");
    assert_eq!(class["volumeBindingMode"], "Immediate");

    let driver = defaulted("storage.k8s.io", "CSIDriver", json!({"metadata": {"name": "d"}}));
    assert_eq!(
        driver["spec"],
        json!({
            "attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
            "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"],
            "requiresRepublish": false, "seLinuxMount": false,
        })
    );

    let slice = defaulted("discovery.k8s.io", "EndpointSlice", json!({"addressType": "IPv4", "ports": [{"port": 80}]}));
    assert_eq!(slice["ports"], json!([{"port": 80, "name": "", "protocol": "TCP"}]));

    let priority = defaulted("scheduling.k8s.io", "PriorityClass", json!({"value": 1000}));
    assert_eq!(priority["preemptionPolicy"], "PreemptLowerPriority");

    for (group, kind) in
        [("", "ConfigMap"), ("", "ServiceAccount"), ("policy", "PodDisruptionBudget"), ("coordination.k8s.io", "Lease")]
    {
        let object = json!({"metadata": {"name": "x"}, "spec": {}});
        assert_eq!(defaulted(group, kind, object.clone()), object, "{kind}");
    }
}

#[test]
fn core_storage_and_misc_defaults() {
    assert_eq!(defaulted("", "Secret", json!({"data": {}}))["type"], "Opaque");
    let endpoints = defaulted("", "Endpoints", json!({"subsets": [{"ports": [{"port": 80}]}]}));
    assert_eq!(endpoints["subsets"][0]["ports"][0]["protocol"], "TCP");

    let pv = defaulted(
        "",
        "PersistentVolume",
        json!({"spec": {"hostPath": {"path": "/data"}, "capacity": {"storage": "1Gi"}}}),
    );
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
    assert_eq!(pv["spec"]["hostPath"]["type"], "");
    assert_eq!(pv["status"]["phase"], "Pending");

    let claim = json!({"spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}});
    let got = defaulted("", "PersistentVolumeClaim", claim);
    assert_eq!(got["spec"]["dataSourceRef"], json!({"kind": "PersistentVolumeClaim", "name": "src"}));
    assert_eq!(got["spec"]["volumeMode"], "Filesystem");
    assert_eq!(got["status"]["phase"], "Pending");

    let limits = json!({"spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
        {"type": "Pod", "max": {"cpu": "4"}},
    ]}});
    let got = defaulted("", "LimitRange", limits);
    assert_eq!(got["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
    assert_eq!(got["spec"]["limits"][0]["defaultRequest"], json!({"cpu": "2", "memory": "64Mi"}));
    assert!(got["spec"]["limits"][1].get("default").is_none());

    let node = defaulted(
        "",
        "Node",
        json!({"spec": {"podCIDR": "10.0.1.0/24"}, "status": {"capacity": {"cpu": "4", "pods": "110"}}}),
    );
    assert_eq!(node["status"]["allocatable"], json!({"cpu": "4", "pods": "110"}));
    assert_eq!(node["spec"]["podCIDRs"], json!(["10.0.1.0/24"]));
    let node = defaulted("", "Node", json!({"spec": {"podCIDRs": ["10.0.2.0/24", "fd00::/64"]}}));
    assert_eq!(node["spec"]["podCIDR"], "10.0.2.0/24");
}

/// A representative object of each served kind, with the fields its defaults read.
fn sample(resource: &ResourceType) -> Value {
    let pod_spec = template(json!({
        "hostNetwork": true,
        "volumes": [{"name": "v"}, {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        "initContainers": [{"name": "i", "image": "busybox", "resources": {"limits": {"cpu": "1"}}, "ports": [{"containerPort": 1}]}],
    }));
    let spec = match resource.kind {
        "Pod" => pod_spec["spec"].clone(),
        "Service" => json!({"ports": [{"port": 80}], "type": "LoadBalancer", "sessionAffinity": "ClientIP"}),
        "Namespace" | "Secret" | "ServiceAccount" | "ConfigMap" => json!({}),
        "Job" => json!({"podFailurePolicy": {"rules": [{"onPodConditions": [{"type": "X"}]}]}, "template": pod_spec}),
        "CronJob" => json!({"jobTemplate": {"spec": {"template": pod_spec}}}),
        "StatefulSet" => json!({"template": pod_spec, "volumeClaimTemplates": [{"spec": {}}]}),
        "HorizontalPodAutoscaler" => json!({"behavior": {"scaleUp": {}}}),
        "PersistentVolumeClaim" => json!({"dataSourceRef": {"kind": "K", "name": "n", "apiGroup": "g"}}),
        "PersistentVolume" => json!({"azureDisk": {"diskName": "d"}, "iscsi": {}, "scaleIO": {}}),
        "LimitRange" => json!({"limits": [{"type": "Container", "max": {"cpu": "1"}}]}),
        "NetworkPolicy" => json!({"egress": [{"ports": [{}]}]}),
        "VolumeAttachment" => json!({"source": {"inlineVolumeSpec": {"hostPath": {"path": "/"}}}}),
        _ => json!({"template": pod_spec}),
    };
    json!({
        "apiVersion": resource.group_version(),
        "kind": resource.kind,
        "metadata": metadata("sample"),
        "spec": spec,
        "template": template(json!({})),
        "status": {"capacity": {"cpu": "1"}, "loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        "roleRef": {"name": "r"},
        "subjects": [{"kind": "User", "name": "u"}],
        "subsets": [{"ports": [{"port": 1}]}],
        "ports": [{"port": 1}],
    })
}

#[test]
fn defaults_are_idempotent_for_every_kind() {
    for resource in RESOURCES {
        let mut once = sample(resource);
        apply(resource, &mut once);
        let mut twice = once.clone();
        apply(resource, &mut twice);
        assert_eq!(twice, once, "{}", resource.kind);
    }
}

#[test]
fn malformed_objects_do_not_panic() {
    let shapes = [
        json!(null),
        json!([1, 2]),
        json!({"spec": "x", "metadata": 3}),
        json!({"spec": {"template": {"spec": {"containers": "x", "volumes": [1, null]}}}, "metadata": {"labels": []}}),
        json!({"spec": {"containers": [null, {"ports": [3], "resources": 5}], "ports": {"a": 1}, "strategy": 1}}),
    ];
    for resource in RESOURCES {
        for shape in &shapes {
            let mut object = shape.clone();
            apply(resource, &mut object);
            apply(resource, &mut object);
        }
    }
}

fn pod_with(containers: Value, init: Value) -> Value {
    json!({"spec": {"containers": containers, "initContainers": init}})
}

#[test]
fn qos_classes() {
    let guaranteed =
        json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "0.5", "memory": "1024Mi"}});
    let limits_only = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
    let burstable = json!({"requests": {"memory": "64Mi"}});
    let c = |resources: &Value| json!({"name": "c", "resources": resources});

    assert_eq!(pod_qos_class(&pod_with(json!([c(&json!({}))]), json!([]))), "BestEffort");
    assert_eq!(pod_qos_class(&pod_with(json!([c(&json!({"requests": {"cpu": "0"}}))]), json!(null))), "BestEffort");
    // Extended resources do not count.
    assert_eq!(
        pod_qos_class(&pod_with(json!([c(&json!({"limits": {"nvidia.com/gpu": 1}}))]), json!([]))),
        "BestEffort"
    );
    assert_eq!(pod_qos_class(&pod_with(json!([c(&guaranteed), c(&guaranteed)]), json!([]))), "Guaranteed");
    assert_eq!(pod_qos_class(&pod_with(json!([c(&burstable)]), json!([]))), "Burstable");
    assert_eq!(pod_qos_class(&pod_with(json!([c(&guaranteed)]), json!([c(&burstable)]))), "Burstable");
    assert_eq!(pod_qos_class(&pod_with(json!([c(&guaranteed), c(&json!({}))]), json!([]))), "Burstable");

    // Defaulting copies limits into requests first, which makes limits-only pods guaranteed.
    let mut pod = pod_with(json!([c(&limits_only)]), json!([]));
    assert_eq!(pod_qos_class(&pod), "Burstable");
    apply(resource("", "Pod"), &mut pod);
    assert_eq!(pod_qos_class(&pod), "Guaranteed");

    // Pod-level resources decide when set.
    let pod_level = json!({"spec": {"resources": guaranteed, "containers": [c(&burstable)]}});
    assert_eq!(pod_qos_class(&pod_level), "Guaranteed");
    let pod_level = json!({"spec": {"resources": burstable, "containers": [c(&guaranteed)]}});
    assert_eq!(pod_qos_class(&pod_level), "Burstable");
}

#[test]
fn resource_claims_get_exact_counts_and_equal_tolerations() {
    let claim = json!({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
        {"name": "one", "exactly": {"deviceClassName": "gpu", "tolerations": [{"key": "k", "effect": "NoExecute"}]}},
        {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
        {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}, {"name": "b", "deviceClassName": "gpu", "count": 2}]},
    ]}}});
    let got = defaulted("resource.k8s.io", "ResourceClaim", claim);
    let requests = &got["spec"]["devices"]["requests"];
    assert_eq!(
        requests[0]["exactly"],
        json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
            "tolerations": [{"key": "k", "effect": "NoExecute", "operator": "Equal"}]})
    );
    assert_eq!(requests[1]["exactly"], json!({"deviceClassName": "gpu", "allocationMode": "All"}));
    assert_eq!(requests[2]["firstAvailable"][0]["count"], 1);
    assert_eq!(requests[2]["firstAvailable"][1]["count"], 2);
    // The claim spec's devices and a template's metadata are structs, always written.
    let empty = defaulted("resource.k8s.io", "ResourceClaim", json!({"metadata": {"name": "e"}, "spec": {}}));
    assert_eq!(empty["spec"], json!({"devices": {}}));
    let template =
        defaulted("resource.k8s.io", "ResourceClaimTemplate", json!({"metadata": {"name": "t"}, "spec": {"spec": {}}}));
    assert_eq!(template["spec"], json!({"metadata": {}, "spec": {"devices": {}}}));
}

#[test]
fn device_taints_get_the_time_they_were_added() {
    let slice = json!({"metadata": {"name": "s"}, "spec": {"devices": [{"name": "d", "taints": [
        {"key": "k", "effect": "NoExecute"}, {"key": "l", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]}]}});
    let got = defaulted("resource.k8s.io", "ResourceSlice", slice);
    let taints = &got["spec"]["devices"][0]["taints"];
    assert!(taints[0]["timeAdded"].as_str().is_some_and(|t| t.ends_with('Z')), "{taints}");
    assert_eq!(taints[1]["timeAdded"], "2026-01-01T00:00:00Z");
}

#[test]
fn pod_level_limits_give_pod_level_requests() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "containers": [{"name": "a", "image": "a", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "b", "image": "b", "resources": {"requests": {"cpu": "250m"}, "limits": {"hugepages-2Mi": "4Mi"}}}],
    }});
    let got = defaulted("", "Pod", pod);
    assert_eq!(got["spec"]["resources"]["requests"], json!({"cpu": "750m", "memory": "1Gi", "hugepages-2Mi": "4Mi"}));
    assert_eq!(got["spec"]["resources"]["limits"], json!({"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "4Mi"}));
    // Templates are not defaulted so (SetDefaults_Pod only).
    let template = defaulted(
        "",
        "PodTemplate",
        json!({"metadata": {"name": "t"}, "template": {"spec": {
        "resources": {"limits": {"cpu": "2"}}, "containers": [{"name": "a", "image": "a"}]}}}),
    );
    assert!(template["template"]["spec"]["resources"].get("requests").is_none());
}

/// The sandbox's defaulting turns a bare Deployment template into what kube-apiserver stores:
/// the hand-written stored form of the pod-template-hash cases' `minimal` case, whose hash the
/// Deployment controller computes as upstream's does.
#[test]
fn a_defaulted_template_hashes_like_upstreams_stored_one() {
    use crate::controllers::podutil::template_hash::compute_hash;
    use crate::sandbox::storage::resources;
    const CASES: &str = include_str!("../../../../../../tools/pod-template-hash/cases.json");
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("cases.json parses");
    let mut deployment = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}
            }
        }
    });
    apply(resources::by_kind("apps/v1", "Deployment").expect("served kind"), &mut deployment);
    assert_eq!(deployment["spec"]["template"], cases[0]["template"]);
    let template = serde_json::from_value(deployment["spec"]["template"].clone()).expect("a PodTemplateSpec");
    assert_eq!(compute_hash(&template, None), "7cd5cff77d");
}
