use serde_json::{Value, json};

/// The patch's result, its error as the text kube-apiserver answers.
fn apply(target: &Value, patch: &Value, api_version: &str, kind: &str) -> Result<Value, String> {
    super::apply(target, patch, api_version, kind).map_err(|e| e.to_string())
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web"},
            "finalizers": ["a", "b"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u1"}]
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "imagePullPolicy": "IfNotPresent",
                            "env": [{"name": "MODE", "value": "prod"}, {"name": "LOG", "value": "info"}],
                            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}]
                        },
                        {"name": "sidecar", "image": "sidecar:1"}
                    ],
                    "tolerations": [{"key": "k1", "operator": "Exists"}],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        },
        "status": {
            "replicas": 1,
            "conditions": [
                {"type": "Available", "status": "True"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
            ]
        }
    })
}

fn patch_deployment(patch: Value) -> Value {
    apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap()
}

fn pod_spec(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array().unwrap().iter().map(|item| item[key].as_str().unwrap_or_default().to_string()).collect()
}

#[test]
fn container_merged_by_name_keeps_the_others() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "sidecar:2"}]}}}
    }));
    let containers = &pod_spec(&patched)["containers"];
    assert_eq!(names(containers, "name"), ["app", "sidecar"]);
    assert_eq!(containers[1], json!({"name": "sidecar", "image": "sidecar:2"}));
    assert_eq!(containers[0], pod_spec(&deployment())["containers"][0]);
}

#[test]
fn env_merged_by_name() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "LOG", "value": "debug"}, {"name": "EXTRA", "value": "1"}]}
        ]}}}
    }));
    let env = &pod_spec(&patched)["containers"][0]["env"];
    assert_eq!(
        *env,
        json!([
            {"name": "MODE", "value": "prod"},
            {"name": "LOG", "value": "debug"},
            {"name": "EXTRA", "value": "1"}
        ])
    );
}

#[test]
fn new_items_come_before_the_remaining_original_ones() {
    // kube-apiserver puts items new to a merged list first, unless `$setElementOrder` says
    // otherwise.
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "NEW", "value": "x"}]}]}}}
    }));
    assert_eq!(names(&pod_spec(&patched)["containers"][0]["env"], "name"), ["NEW", "MODE", "LOG"]);
}

#[test]
fn ports_merged_by_container_port() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "ports": [{"containerPort": 80, "name": "web", "protocol": "TCP"}]}
        ]}}}
    }));
    assert_eq!(
        pod_spec(&patched)["containers"][0]["ports"],
        json!([{"containerPort": 80, "name": "web", "protocol": "TCP"}, {"containerPort": 443, "name": "https"}])
    );
}

#[test]
fn conditions_merged_by_type() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
        ]}
    });
    let patch =
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "reason": null}]}});
    let patched = apply(&pod, &patch, "v1", "Pod").unwrap();
    assert_eq!(patched["status"]["phase"], "Running");
    assert_eq!(
        patched["status"]["conditions"],
        json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}])
    );
    // The same holds for the workload kinds' statuses.
    let patched = patch_deployment(json!({"status": {"conditions": [{"type": "Progressing", "status": "False"}]}}));
    assert_eq!(
        patched["status"]["conditions"][1],
        json!({"type": "Progressing", "status": "False", "reason": "NewReplicaSetAvailable"})
    );
}

#[test]
fn owner_references_merged_by_uid() {
    // What the garbage collector sends to drop one owner.
    let patched = patch_deployment(json!({
        "metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}], "uid": "d-uid"}
    }));
    assert_eq!(patched["metadata"]["ownerReferences"], json!([]));
    assert_eq!(patched["metadata"]["uid"], "d-uid");
    // Adoption adds a reference and keeps the existing one.
    let patched = patch_deployment(json!({
        "metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u2", "controller": true}
        ]}
    }));
    assert_eq!(names(&patched["metadata"]["ownerReferences"], "uid"), ["u2", "u1"]);
    // A reference with the same uid is updated in place.
    let patched =
        patch_deployment(json!({"metadata": {"ownerReferences": [{"uid": "u1", "blockOwnerDeletion": true}]}}));
    assert_eq!(patched["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], true);
    assert_eq!(patched["metadata"]["ownerReferences"][0]["name"], "owner");
}

#[test]
fn finalizers_take_the_union() {
    let patched = patch_deployment(json!({"metadata": {"finalizers": ["b", "c"]}}));
    assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let patched = patch_deployment(json!({"metadata": {"finalizers": ["c"]}}));
    assert_eq!(patched["metadata"]["finalizers"], json!(["c", "a", "b"]));
}

#[test]
fn delete_from_primitive_list() {
    let patched = patch_deployment(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}));
    assert_eq!(patched["metadata"]["finalizers"], json!(["b"]));
    let patched = patch_deployment(json!({"metadata": {
        "$setElementOrder/finalizers": ["b", "c"],
        "$deleteFromPrimitiveList/finalizers": ["a"],
        "finalizers": ["c"]
    }}));
    assert_eq!(patched["metadata"]["finalizers"], json!(["b", "c"]));
}

#[test]
fn delete_from_an_absent_primitive_list_is_skipped() {
    // As kube-apiserver v1.36.2 answers it (checked on the real server): nothing is added, so
    // a finalizer deleted twice (a retried patch) stays deleted.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let patched = apply(&cm, &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}), "v1", "ConfigMap");
    assert_eq!(patched.unwrap()["metadata"]["finalizers"], Value::Null);
}

#[test]
fn tolerations_are_replaced() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}}
    }));
    assert_eq!(pod_spec(&patched)["tolerations"], json!([{"key": "k2", "operator": "Exists"}]));
}

#[test]
fn patch_delete_removes_a_container() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [{"$patch": "delete", "name": "sidecar"}]}}}
    }));
    assert_eq!(names(&pod_spec(&patched)["containers"], "name"), ["app"]);
}

#[test]
fn patch_delete_on_a_map_leaves_it_empty() {
    let patched = patch_deployment(json!({"spec": {"strategy": {"$patch": "delete"}}}));
    assert_eq!(patched["spec"]["strategy"], json!({}));
}

#[test]
fn patch_replace_on_a_map() {
    // `kubectl rollout undo` replaces the whole template.
    let template =
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "app:0"}]}});
    let mut replacement = template.clone();
    replacement["$patch"] = json!("replace");
    let patched = patch_deployment(json!({"spec": {"template": replacement}}));
    assert_eq!(patched["spec"]["template"], template);
    assert_eq!(patched["spec"]["replicas"], 1);
}

#[test]
fn patch_replace_in_a_list() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": "only:1"}, {"$patch": "replace"}]}}}
    }));
    assert_eq!(pod_spec(&patched)["containers"], json!([{"name": "only", "image": "only:1"}]));
}

#[test]
fn patch_merge_and_unknown_directives_are_refused() {
    let err = apply(&deployment(), &json!({"spec": {"strategy": {"$patch": "merge"}}}), "apps/v1", "Deployment");
    assert_eq!(err.unwrap_err(), "unknown patch type: merge in map: map[$patch:merge]");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "merging lists cannot yet be specified in the patch");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "$patch": "drop"}]}}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "unknown patch type: drop in map: map[$patch:drop name:app]");
}

#[test]
fn retain_keys_switches_strategy_to_recreate() {
    // What `kubectl apply` sends.
    let patched = patch_deployment(json!({
        "spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}
    }));
    assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
    // A plain null does it too.
    let patched = patch_deployment(json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}));
    assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn retain_keys_must_list_the_patched_fields() {
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "invalid patch format of retainKeys");
    let patch = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "invalid patch format of retainKeys");
}

#[test]
fn retain_keys_switches_a_volume_source() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"volumes": [
            {"name": "data", "$retainKeys": ["configMap", "name"], "configMap": {"name": "settings"}}
        ]}}}
    }));
    assert_eq!(pod_spec(&patched)["volumes"], json!([{"name": "data", "configMap": {"name": "settings"}}]));
}

#[test]
fn set_element_order_reorders_the_list() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}}}
    }));
    assert_eq!(names(&pod_spec(&patched)["containers"], "name"), ["sidecar", "app"]);
    // With a new item, placed where the order says.
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "extra"}],
            "containers": [{"name": "extra", "image": "extra:1"}]
        }}}
    }));
    assert_eq!(names(&pod_spec(&patched)["containers"], "name"), ["app", "sidecar", "extra"]);
}

#[test]
fn set_element_order_must_match_the_patch_list() {
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "app"}],
        "containers": [{"name": "other", "image": "x"}]
    }}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert!(
        err.starts_with("The order in patch list:\n[map[image:x name:other]]\n doesn't match $setElementOrder list:"),
        "{err}"
    );
    let patch = json!({"spec": {"template": {"spec": {"$setElementOrder/containers": "app"}}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "expected a []interface {}, but received a string");
}

#[test]
fn kubectl_apply_patch_for_a_deployment() {
    // `kubectl apply` after changing the image, the replicas and one env var of the manifest:
    // a three-way patch with the new last-applied configuration.
    let mut live = deployment();
    let old_applied = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web","namespace":"default"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"env":[{"name":"MODE","value":"prod"},{"name":"LOG","value":"info"}],"image":"app:1","name":"app"},{"image":"sidecar:1","name":"sidecar"}]}}}}"#;
    live["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": format!("{old_applied}\n")});
    let new_applied = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web","namespace":"default"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"env":[{"name":"MODE","value":"prod"}],"image":"app:2","name":"app"},{"image":"sidecar:1","name":"sidecar"}]}}}}"#;
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{new_applied}\n")}},
        "spec": {
            "replicas": 3,
            "template": {"spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                "containers": [{
                    "$setElementOrder/env": [{"name": "MODE"}],
                    "env": [{"$patch": "delete", "name": "LOG"}],
                    "image": "app:2",
                    "name": "app"
                }]
            }}
        }
    });
    let patched = apply(&live, &patch, "apps/v1", "Deployment").unwrap();

    let mut expected = live.clone();
    expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(format!("{new_applied}\n"));
    expected["spec"]["replicas"] = json!(3);
    let app = &mut expected["spec"]["template"]["spec"]["containers"][0];
    app["image"] = json!("app:2");
    app["env"] = json!([{"name": "MODE", "value": "prod"}]);
    assert_eq!(patched, expected);
}

#[test]
fn kubectl_apply_adds_an_env_var_in_manifest_order() {
    let patched = patch_deployment(json!({
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "MODE"}, {"name": "NEW"}, {"name": "LOG"}],
                "env": [{"name": "NEW", "value": "1"}],
                "name": "app"
            }]
        }}}
    }));
    assert_eq!(names(&pod_spec(&patched)["containers"][0]["env"], "name"), ["MODE", "NEW", "LOG"]);
}

#[test]
fn scale_patch() {
    let patched = patch_deployment(json!({"spec": {"replicas": 3}}));
    let mut expected = deployment();
    expected["spec"]["replicas"] = json!(3);
    assert_eq!(patched, expected);
    let scale =
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 1}});
    let patched = apply(&scale, &json!({"spec": {"replicas": 5}}), "autoscaling/v1", "Scale").unwrap();
    assert_eq!(patched["spec"]["replicas"], 5);
}

#[test]
fn rollout_restart_and_labels() {
    let patched = patch_deployment(json!({
        "metadata": {"labels": {"app": null, "team": "x"}},
        "spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"
        }}}}
    }));
    assert_eq!(patched["metadata"]["labels"], json!({"team": "x"}));
    assert_eq!(
        patched["spec"]["template"]["metadata"]["annotations"],
        json!({"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"})
    );
}

#[test]
fn nulls_delete_and_are_not_stored() {
    let patched = patch_deployment(json!({
        "spec": {
            "paused": null,
            "strategy": {"rollingUpdate": {"maxSurge": null}},
            "template": {"spec": {"containers": [
                {"name": "new", "image": "new:1", "command": null, "$retainKeys": ["name"]}
            ]}}
        }
    }));
    assert_eq!(patched["spec"]["strategy"]["rollingUpdate"], json!({"maxUnavailable": "25%"}));
    assert!(patched["spec"].get("paused").is_none());
    assert_eq!(pod_spec(&patched)["containers"][0], json!({"name": "new", "image": "new:1"}));
}

#[test]
fn type_changes_replace() {
    let patched = patch_deployment(json!({"spec": {"strategy": "Recreate", "selector": {"matchLabels": ["x"]}}}));
    assert_eq!(patched["spec"]["strategy"], "Recreate");
    assert_eq!(patched["spec"]["selector"]["matchLabels"], json!(["x"]));
}

#[test]
fn pod_templates_of_every_workload_share_the_pod_spec_keys() {
    let container_patch = json!({"containers": [{"name": "app", "image": "app:2"}]});
    let spec = json!({"containers": [{"name": "app", "image": "app:1"}, {"name": "b", "image": "b:1"}]});
    let cases = [
        ("apps/v1", "ReplicaSet", vec!["spec", "template", "spec"]),
        ("apps/v1", "StatefulSet", vec!["spec", "template", "spec"]),
        ("apps/v1", "DaemonSet", vec!["spec", "template", "spec"]),
        ("batch/v1", "Job", vec!["spec", "template", "spec"]),
        ("v1", "ReplicationController", vec!["spec", "template", "spec"]),
        ("v1", "PodTemplate", vec!["template", "spec"]),
        ("batch/v1", "CronJob", vec!["spec", "jobTemplate", "spec", "template", "spec"]),
        ("v1", "Pod", vec!["spec"]),
    ];
    for (api_version, kind, path) in cases {
        let nest = |leaf: &Value| path.iter().rev().fold(leaf.clone(), |inner, key| json!({ *key: inner }));
        let patched = apply(&nest(&spec), &nest(&container_patch), api_version, kind).unwrap();
        let containers = path.iter().fold(&patched, |value, key| &value[*key])["containers"].clone();
        assert_eq!(containers, json!([{"name": "app", "image": "app:2"}, {"name": "b", "image": "b:1"}]), "{kind}");
    }
}

#[test]
fn service_node_and_service_account_lists() {
    let service = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
    let patched = apply(&service, &json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}), "v1", "Service");
    assert_eq!(patched.unwrap()["spec"]["ports"], json!([{"port": 80, "targetPort": 9090}, {"port": 443}]));

    let node = json!({
        "spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.1.1.1"}, {"type": "Hostname", "address": "n1"}]}
    });
    let patch = json!({
        "spec": {"podCIDRs": ["fd00::/64"], "taints": [{"key": "b", "effect": "NoExecute"}]},
        "status": {"addresses": [{"type": "Hostname", "address": "node-1"}]}
    });
    let patched = apply(&node, &patch, "v1", "Node").unwrap();
    assert_eq!(patched["spec"]["podCIDRs"], json!(["fd00::/64", "10.0.0.0/24"]));
    assert_eq!(patched["spec"]["taints"], json!([{"key": "b", "effect": "NoExecute"}]));
    assert_eq!(
        patched["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "10.1.1.1"}, {"type": "Hostname", "address": "node-1"}])
    );

    let sa = json!({"secrets": [{"name": "s1"}], "imagePullSecrets": [{"name": "p1"}]});
    let patch = json!({"secrets": [{"name": "s2"}], "imagePullSecrets": [{"name": "p2"}]});
    let patched = apply(&sa, &patch, "v1", "ServiceAccount").unwrap();
    assert_eq!(patched["secrets"], json!([{"name": "s2"}, {"name": "s1"}]));
    assert_eq!(patched["imagePullSecrets"], json!([{"name": "p2"}]));
}

#[test]
fn kinds_without_merge_keys_merge_maps_and_replace_lists() {
    let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let patched = apply(&cm, &json!({"data": {"b": null, "c": "3"}}), "v1", "ConfigMap").unwrap();
    assert_eq!(patched["data"], json!({"a": "1", "c": "3"}));
    let role = json!({"rules": [{"verbs": ["get"]}, {"verbs": ["list"]}]});
    let patched = apply(&role, &json!({"rules": [{"verbs": ["watch"]}]}), "rbac.authorization.k8s.io/v1", "Role");
    assert_eq!(patched.unwrap()["rules"], json!([{"verbs": ["watch"]}]));
}

#[test]
fn unknown_kinds_are_refused() {
    let err = apply(&json!({}), &json!({}), "example.com/v1", "Widget").unwrap_err();
    assert_eq!(err, "strategic merge patch is not supported for Widget");
}

#[test]
fn malformed_patches_are_refused() {
    let err = apply(&deployment(), &json!([1]), "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "json: cannot unmarshal array into Go value of type map[string]interface {}");
    assert_eq!(apply(&deployment(), &Value::Null, "apps/v1", "Deployment").unwrap(), deployment());

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "map: map[image:x] does not contain declared merge key: name");

    let patch = json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "invalid patch format of primitive list");

    let patch = json!({"metadata": {"finalizers": [1]}});
    let err = apply(&deployment(), &patch, "apps/v1", "Deployment").unwrap_err();
    assert_eq!(err, "list element types are not identical: [[a b] [1]]");

    let pod = json!({"metadata": {"finalizers": []}});
    let err = apply(&pod, &json!({"metadata": {"finalizers": [["x"]]}}), "v1", "Pod").unwrap_err();
    assert_eq!(err, "lists of lists are not supported");
}

#[test]
fn top_level_replace_and_delete() {
    let patched = patch_deployment(json!({"$patch": "replace", "metadata": {"name": "web"}, "spec": {"replicas": 2}}));
    assert_eq!(patched, json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}}));
    assert_eq!(patch_deployment(json!({"$patch": "delete"})), json!({}));
}

#[test]
fn directives_in_a_value_for_an_absent_key_are_dropped_with_their_maps() {
    // A release (`$patch: delete` of an owner reference) on an object that has none leaves an
    // empty list, as kube-apiserver's `removeDirectives` does.
    let mut original = deployment();
    original["metadata"].as_object_mut().unwrap().remove("ownerReferences");
    let patch = json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}]},
        "spec": {"template": {"spec": {"nodeSelector": {"$patch": "replace", "a": "b"}}}}});
    let patched = apply(&original, &patch, "apps/v1", "Deployment").unwrap();
    assert_eq!(patched["metadata"]["ownerReferences"], json!([]));
    assert!(pod_spec(&patched).get("nodeSelector").is_none());
}
