use super::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn revision(name: &str, number: i64, created: Option<&str>, data: Value) -> Arc<ControllerRevision> {
    Arc::new(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            creation_timestamp: created.map(|t| Time(t.parse().expect("a timestamp"))),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    })
}

fn template(spec: Value) -> PodTemplateSpec {
    serde_json::from_value(spec).expect("a template")
}

#[test]
fn fnv1_matches_the_reference_vectors() {
    // FNV-1 (multiply, then xor), not FNV-1a.
    assert_eq!(fnv32(&[b""]), 0x811c_9dc5);
    assert_eq!(fnv32(&[b"a"]), 0x050c_5d7e);
    assert_eq!(fnv32(&[b"foobar"]), 0x31f0_b262);
    assert_eq!(fnv32(&[b"foo", b"bar"]), fnv32(&[b"foobar"]));
}

#[test]
fn the_patch_holds_the_fields_go_always_writes() {
    let t = template(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx:1.27"}],
            "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}]
        }
    }));
    let patch = template_patch(&t);
    assert_eq!(
        gojson::marshal(&patch),
        concat!(
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"web"}},"#,
            r#""spec":{"containers":[{"image":"nginx:1.27","name":"nginx","resources":{}}],"#,
            r#""volumes":[{"ephemeral":{"volumeClaimTemplate":{"metadata":{},"#,
            r#""spec":{"accessModes":["ReadWriteOnce"],"resources":{}}}},"name":"scratch"}]}}}}"#
        )
    );
}

#[test]
fn hashes_follow_the_data_and_the_collision_count() {
    let data = json!({"spec": {"template": {"$patch": "replace"}}});
    let bytes = gojson::marshal(&data).into_bytes();
    let expected = safe_encode_string(&fnv32(&[&bytes]).to_string());
    assert_eq!(hash_revision(&data, None), expected);
    let with_zero = safe_encode_string(&fnv32(&[&bytes, b"0"]).to_string());
    assert_eq!(hash_revision(&data, Some(0)), with_zero);
    assert_ne!(hash_revision(&data, Some(1)), with_zero);
    let other = json!({"spec": {"template": {"$patch": "replace", "metadata": {}}}});
    assert_ne!(hash_revision(&other, Some(0)), with_zero);
}

#[test]
fn names_are_cut_to_fit() {
    assert_eq!(revision_name("web", "abc"), "web-abc");
    let long = "x".repeat(300);
    assert_eq!(revision_name(&long, "abc").len(), 223 + 4);
}

#[test]
fn a_new_revision_is_labelled_and_owned() {
    let parent = ObjectMeta { name: Some("web".into()), namespace: Some("ns".into()), ..Default::default() };
    let owner = OwnerReference { kind: "StatefulSet".into(), name: "web".into(), ..Default::default() };
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let data = template_patch(&template(json!({"spec": {"containers": [{"name": "c", "image": "i"}]}})));
    let revision = new_revision(&parent, owner, Some(&labels), data.clone(), 3, Some(0));
    let hash = hash_revision(&data, Some(0));
    assert_eq!(revision.metadata.name, Some(format!("web-{hash}")));
    assert_eq!(revision.metadata.namespace.as_deref(), Some("ns"));
    let labels = revision.metadata.labels.clone().unwrap();
    assert_eq!((labels["app"].as_str(), &labels[HASH_LABEL]), ("web", &hash));
    assert_eq!(revision.revision, 3);
    assert_eq!(revision.metadata.owner_references.unwrap()[0].kind, "StatefulSet");
}

#[test]
fn revisions_sort_by_number_then_age_then_name() {
    let mut revisions = vec![
        revision("c", 2, Some("2026-01-01T00:00:02Z"), json!(1)),
        revision("b", 1, Some("2026-01-01T00:00:05Z"), json!(1)),
        revision("a", 2, Some("2026-01-01T00:00:02Z"), json!(1)),
        revision("d", 2, Some("2026-01-01T00:00:01Z"), json!(1)),
    ];
    sort_revisions(&mut revisions);
    let names: Vec<_> = revisions.iter().map(|r| r.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["b", "d", "a", "c"]);
    assert_eq!(next_revision(&revisions), 3);
    assert_eq!(next_revision(&[]), 1);
}

#[test]
fn equal_revisions_have_equal_data() {
    let a = revision("a", 1, None, json!({"spec": {"x": 1}}));
    let b = revision("b", 2, None, json!({"spec": {"x": 1}}));
    let c = revision("c", 3, None, json!({"spec": {"x": 2}}));
    assert!(equal_revision(&a, &b));
    assert!(!equal_revision(&a, &c));
    let all = [a.clone(), b, c];
    assert_eq!(find_equal_revisions(&all, &a).len(), 2);
    // Hash labels are not compared (v1.34): numeric ones that differ leave equal data equal.
    let mut x = (*a).clone();
    let mut y = (*a).clone();
    x.metadata.labels = Some(BTreeMap::from([(HASH_LABEL.to_string(), "245".to_string())]));
    y.metadata.labels = Some(BTreeMap::from([(HASH_LABEL.to_string(), "246".to_string())]));
    assert!(equal_revision(&x, &y));
}

#[test]
fn a_statefulset_revision_is_named_as_upstream_names_it() {
    // A StatefulSet's template as kube-apiserver defaulted it, and the revision upstream's
    // controller made of it: `web-8548c5986d` by v1.36.2 (HTML characters, an ephemeral claim
    // template without metadata and a resource field's divisor included).
    let t = template(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [{"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"divisor": "0", "resource": "limits.cpu"}}}],
                "image": "nginx:1.27<x>", "imagePullPolicy": "IfNotPresent", "name": "c", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "terminationGracePeriodSeconds": 30,
            "volumes": [{"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}}}, "name": "e"}]
        }
    }));
    let patch = template_patch(&t);
    assert_eq!(hash_revision(&patch, Some(0)), "8548c5986d");
    // v1.33.5 wrote both zero creation times as null and named the same template `web-7d8d9758b`.
    let mut v133 = patch.clone();
    v133["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
    let claim = &mut v133["spec"]["template"]["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"];
    claim["metadata"]["creationTimestamp"] = Value::Null;
    assert_eq!(hash_revision(&v133, Some(0)), "7d8d9758b");
}

/// Upstream's `pkg/controller/statefulset/testdata` (v1.36.2): the same StatefulSet's revision
/// as v1.33 and as v1.34 wrote it.
fn upstream_revision(version: &str) -> ControllerRevision {
    let text = match version {
        "1.33.0" => include_str!("../statefulset/testdata/compatibility_revision_1.33.0.json"),
        _ => include_str!("../statefulset/testdata/compatibility_revision_1.34.0.json"),
    };
    serde_json::from_str(text).expect("a ControllerRevision")
}

#[test]
fn upstream_compatibility_revisions_hash_to_their_names() {
    for (version, hash) in [("1.33.0", "c77f6d978"), ("1.34.0", "776999688b")] {
        let revision = upstream_revision(version);
        assert_eq!(revision.metadata.labels.as_ref().unwrap()[HASH_LABEL], hash);
        assert_eq!(hash_revision(data_of(&revision).unwrap(), Some(0)), hash, "{version}");
    }
    // The set's template makes the v1.34 bytes, whichever version stored the set.
    for set in [
        include_str!("../statefulset/testdata/compatibility_set_1.33.0.json"),
        include_str!("../statefulset/testdata/compatibility_set_1.34.0.json"),
    ] {
        let set: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_str(set).expect("a StatefulSet");
        let patch = template_patch(&set.spec.expect("a spec").template);
        assert_eq!(Some(&patch), data_of(&upstream_revision("1.34.0")));
        assert_eq!(hash_revision(&patch, Some(0)), "776999688b");
    }
    // The hash labels differ, the data too: the revisions are not equal.
    assert!(!equal_revision(&upstream_revision("1.33.0"), &upstream_revision("1.34.0")));
}

/// Templates a kube-apiserver v1.36.2 stored (created through it with the `PodCertificateRequest`
/// and `GenericWorkload` gates on, so that every field v1.34–v1.36 added is set somewhere), and
/// what upstream's kube-controller-manager v1.36.2 made of them: the revision data of a
/// DaemonSet and a StatefulSet with that template, and the StatefulSet revision's hash.
const UPSTREAM_V1_36_2: &str = include_str!("testdata/upstream_v1.36.2.json");

#[test]
fn revisions_match_upstream_v1_36_2() {
    let cases: Vec<Value> = serde_json::from_str(UPSTREAM_V1_36_2).expect("the fixture parses");
    assert_eq!(cases.len(), 8);
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let patch = template_patch(&template(case["template"].clone()));
        assert_eq!(patch, case["revisionData"], "{name}");
        assert_eq!(hash_revision(&patch, Some(0)), case["statefulSetRevisionHash"], "{name}");
    }
}
