use super::*;

/// Templates as kube-apiserver stores them (defaulted, quantities canonical), shared with the Go
/// driver in `tools/pod-template-hash/`.
const CASES: &str = include_str!("../../../../../../tools/pod-template-hash/cases.json");

fn cases() -> Vec<(String, PodTemplateSpec, Option<i32>)> {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("cases.json parses");
    cases
        .into_iter()
        .map(|case| {
            let name = case["name"].as_str().expect("case name").to_string();
            let template = serde_json::from_value(case["template"].clone()).expect("a PodTemplateSpec");
            let count = case["collisionCount"].as_i64().map(|c| c as i32);
            (name, template, count)
        })
        .collect()
}

#[test]
fn dump_for_debugging() {
    let Ok(dir) = std::env::var("POD_TEMPLATE_HASH_DUMP") else { return };
    for (name, template, count) in cases() {
        let text = format!("{name} {}\n{}\n", compute_hash(&template, count), spew_text(&template));
        std::fs::write(format!("{dir}/{name}.txt"), text).expect("writable dump directory");
    }
}

/// The hashes upstream computes for `cases.json`: printed by the Go driver in
/// `tools/pod-template-hash/driver` (go-spew and `k8s.io/utils/dump` as kube-controller-manager
/// v1.36.2 vendors them, the Kubernetes 1.36 `core/v1` and `meta/v1` struct declarations,
/// apimachinery's `ParseQuantity`, upstream's `ComputeHash` steps), run as its README says. The
/// `stored-*` templates are what a kube-apiserver v1.36.2 stored, and their hashes are also the
/// `pod-template-hash` upstream's kube-controller-manager v1.36.2 gave their Deployments'
/// ReplicaSets (and the `controller-revision-hash` of DaemonSets with the same template).
const GOLDEN: &[(&str, &str)] = &[
    ("minimal", "7cd5cff77d"),
    ("minimal-collision-0", "79d5b7ddf4"),
    ("minimal-collision-1", "d9777846c"),
    ("minimal-collision-max", "cb4764c54"),
    ("empty", "85748b7f68"),
    ("resources", "8f5dd587d"),
    ("big-quantities", "84995f7487"),
    ("env-ports-probes", "7545f965d8"),
    ("volumes", "5d4d5bf9bb"),
    ("scheduling", "6c44659949"),
    ("metadata-and-security", "75d74587f7"),
    ("metadata-fields", "54fd4bf9b8"),
    ("stored-plain", "6d56c9fb65"),
    ("stored-env", "648d974b7c"),
    ("stored-projected", "776dcd5fbc"),
    ("stored-podcert", "596955bd5b"),
    ("stored-init", "5789b799fb"),
    ("stored-ephemeral", "6469f48c7b"),
    ("stored-hostname", "56bb5c476"),
    ("stored-html", "7fcd88649"),
];

#[test]
fn matches_upstream_for_every_case() {
    let cases = cases();
    assert_eq!(cases.len(), GOLDEN.len(), "every case has a golden hash");
    for ((name, template, count), (golden_name, golden)) in cases.iter().zip(GOLDEN) {
        assert_eq!(name, golden_name);
        assert_eq!(&compute_hash(template, *count), golden, "case {name}");
    }
}

fn template(value: Value) -> PodTemplateSpec {
    serde_json::from_value(value).expect("a PodTemplateSpec")
}

fn minimal() -> Value {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("cases.json parses");
    cases[0]["template"].clone()
}

#[test]
fn unset_fields_of_v1_36_are_rendered_as_nil() {
    // go-spew prints every field, so the fields 1.34–1.36 added change every hash.
    let text = spew_text(&template(minimal()));
    for field in [
        " HostnameOverride:(*string)<nil> SchedulingGroup:(*v1.PodSchedulingGroup)<nil>}",
        " RestartPolicy:(*v1.ContainerRestartPolicy)<nil> RestartPolicyRules:([]v1.ContainerRestartRule)<nil> ",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
}

#[test]
fn collision_count_changes_the_hash() {
    let t = template(minimal());
    let hashes: Vec<String> = [None, Some(0), Some(1), Some(2)].iter().map(|c| compute_hash(&t, *c)).collect();
    for (i, a) in hashes.iter().enumerate() {
        for b in &hashes[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // A negative count is written as its uint32 bits, as Go's conversion does.
    assert_ne!(compute_hash(&t, Some(-1)), compute_hash(&t, Some(1)));
}

#[test]
fn empty_lists_and_maps_hash_like_absent_ones() {
    let mut with_empties = minimal();
    with_empties["metadata"]["annotations"] = serde_json::json!({});
    with_empties["spec"]["containers"][0]["command"] = serde_json::json!([]);
    with_empties["spec"]["containers"][0]["env"] = serde_json::json!([]);
    with_empties["spec"]["tolerations"] = serde_json::json!([]);
    with_empties["spec"]["nodeSelector"] = serde_json::json!({});
    assert_eq!(compute_hash(&template(with_empties), None), "7cd5cff77d");
}

#[test]
fn quantities_hash_by_their_canonical_form() {
    let with = |cpu: &str, memory: &str| {
        let mut t = minimal();
        t["spec"]["containers"][0]["resources"] = serde_json::json!({"requests": {"cpu": cpu, "memory": memory}});
        compute_hash(&template(t), None)
    };
    // kube-apiserver stores "0.5" as "500m" and "1.5Gi" as "1536Mi"; the hash follows.
    assert_eq!(with("0.5", "1.5Gi"), with("500m", "1536Mi"));
    assert_eq!(with("1000m", "1024Mi"), with("1", "1Gi"));
    assert_ne!(with("500m", "1536Mi"), with("501m", "1536Mi"));
}

#[test]
fn any_field_change_changes_the_hash() {
    let base = compute_hash(&template(minimal()), None);
    let mut image = minimal();
    image["spec"]["containers"][0]["image"] = "nginx:1.26".into();
    let mut label = minimal();
    label["metadata"]["labels"]["extra"] = "x".into();
    let mut grace = minimal();
    grace["spec"]["terminationGracePeriodSeconds"] = 31.into();
    for changed in [image, label, grace] {
        assert_ne!(compute_hash(&template(changed), None), base);
    }
}

#[test]
fn safe_encoding_maps_each_digit_into_upstream_alphabet() {
    // Each character's code point modulo 27 indexes "bcdfghjklmnpqrstvwxz2456789".
    assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
}

#[test]
fn fnv32a_matches_the_reference_vectors() {
    let hash = |bytes: &[u8]| {
        let mut h = Fnv32a::new();
        h.write(bytes);
        h.sum32()
    };
    assert_eq!(hash(b""), 0x811c_9dc5);
    assert_eq!(hash(b"a"), 0xe40c_292c);
    assert_eq!(hash(b"foobar"), 0xbf9c_f968);
}

fn parsed(s: &str) -> GoQuantity {
    parse_quantity(s).expect("a quantity")
}

#[test]
fn parse_quantity_keeps_canonical_text_as_upstream_does() {
    let q = parsed("100m");
    assert_eq!((q.value, q.scale, q.text.as_str(), q.format), (100, -3, "100m", "DecimalSI"));
    let q = parsed("1Gi");
    assert_eq!((q.value, q.scale, q.text.as_str(), q.format), (1 << 30, 0, "1Gi", "BinarySI"));
    // Binary mantissas divisible by 8 do not keep their text (`value&0x07 != 0`).
    let q = parsed("1536Mi");
    assert_eq!((q.value, q.text.as_str()), (1536 << 20, ""));
    let q = parsed("12e6");
    assert_eq!((q.value, q.scale, q.text.as_str(), q.format), (12, 6, "12e6", "DecimalExponent"));
    let q = parsed("0");
    assert_eq!((q.value, q.text.as_str(), q.format), (0, "0", "DecimalSI"));
    // Not canonical: a fraction, or trailing zeros in the mantissa.
    assert_eq!(parsed("0.5").text, "");
    assert_eq!(parsed("1000").text, "");
}

#[test]
fn parse_quantity_takes_the_inf_dec_path_for_large_values() {
    let q = parsed("1Pi");
    let dec = q.dec.expect("inf.Dec path");
    // 2^50 × 10^9 at scale 9, as 64-bit words.
    assert_eq!((dec.negative, dec.words.as_slice(), dec.scale), (false, &[2882303761517117440u64, 61035][..], 9));
    assert_eq!(q.format, "BinarySI");
    // Binary values cap at 2^63-1 (scale 0).
    let q = parsed("9Ei");
    let dec = q.dec.expect("inf.Dec path");
    assert_eq!((dec.words.as_slice(), dec.scale), (&[i64::MAX as u64][..], 0));
    let dec = parsed("-1Pi").dec.expect("inf.Dec path");
    assert!(dec.negative);
}
