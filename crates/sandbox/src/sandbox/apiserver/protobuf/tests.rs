//! The decoder against hand-encoded protobuf bytes.

use serde_json::json;

use super::*;

/// The decoder, its error as the text of the 400 answer.
fn decode_body(body: &[u8]) -> Result<Value, String> {
    super::decode_body(body).map_err(|e| e.to_string())
}

/// A minimal protobuf encoder for the tests.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn varint(mut self, number: u32, value: u64) -> Enc {
        self.key(number, WIRE_VARINT);
        self.raw_varint(value);
        self
    }

    fn bytes(mut self, number: u32, value: &[u8]) -> Enc {
        self.key(number, WIRE_LEN);
        self.raw_varint(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    fn str(self, number: u32, value: &str) -> Enc {
        self.bytes(number, value.as_bytes())
    }

    fn msg(self, number: u32, value: Enc) -> Enc {
        self.bytes(number, &value.0)
    }

    fn fixed32(mut self, number: u32, value: u32) -> Enc {
        self.key(number, WIRE_32);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    fn fixed64(mut self, number: u32, value: u64) -> Enc {
        self.key(number, WIRE_64);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A `map<string, ...>` entry whose value is a byte string or a message.
    fn entry(self, number: u32, key: &str, value: &[u8]) -> Enc {
        self.msg(number, Enc::default().str(1, key).bytes(2, value))
    }

    fn key(&mut self, number: u32, wire: u8) {
        self.raw_varint(u64::from(number) << 3 | u64::from(wire));
    }

    fn raw_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }
}

/// The `k8s\0` + `runtime.Unknown` envelope around an object message.
fn envelope(api_version: &str, kind: &str, object: Enc) -> Vec<u8> {
    let unknown = Enc::default().msg(1, Enc::default().str(1, api_version).str(2, kind)).msg(2, object);
    [MAGIC.to_vec(), unknown.0].concat()
}

fn decode(api_version: &str, kind: &str, object: Enc) -> Value {
    decode_body(&envelope(api_version, kind, object)).unwrap()
}

#[test]
fn tables_are_sorted_and_reference_existing_messages() {
    assert!(MESSAGES.windows(2).all(|w| w[0].name < w[1].name));
    for message in MESSAGES {
        for field in message.fields {
            if let Kind::Msg(index) = field.kind {
                assert!(index < MESSAGES.len(), "{}.{}", message.name, field.json);
            }
        }
    }
    let deployment = &MESSAGES[message_index("k8s.io.api.apps.v1.DeploymentSpec").unwrap()];
    let replicas = deployment.fields.iter().find(|f| f.json == "replicas").unwrap();
    assert_eq!((replicas.number, replicas.kind, replicas.omit_zero), (1, Kind::I32, false));
}

#[test]
fn envelope_type_meta_and_nested_messages() {
    let container = Enc::default().str(1, "nginx").str(2, "nginx:1.27");
    let template = Enc::default().msg(1, Enc::default()).msg(2, Enc::default().msg(2, container));
    let spec = Enc::default()
        .varint(1, 0) // replicas: a pointer, an explicit 0 stays
        .msg(2, Enc::default().msg(1, Enc::default().str(1, "app").str(2, "web")))
        .msg(3, template)
        .varint(5, 0) // minReadySeconds: a Go value field, 0 is omitted
        .varint(7, 0); // paused: false is omitted
    let metadata = Enc::default().str(1, "web").str(2, "").str(3, "default").str(6, "").varint(7, 0);
    let object = decode("apps/v1", "Deployment", Enc::default().msg(1, metadata).msg(2, spec).msg(3, Enc::default()));
    assert_eq!(
        object,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
            },
            "status": {},
        })
    );
}

#[test]
fn multi_byte_and_negative_varints() {
    // ContainerPort.containerPort (int32) = 300, hostPort = -1 (ten-byte two's complement varint).
    let port = Enc::default().varint(3, 300).varint(2, -1i64 as u64);
    let container = Enc::default().str(1, "c").msg(6, port);
    let pod = decode("v1", "Pod", Enc::default().msg(2, Enc::default().msg(2, container)));
    assert_eq!(pod["spec"]["containers"][0]["ports"], json!([{"containerPort": 300, "hostPort": -1}]));
}

#[test]
fn string_and_bytes_maps() {
    let secret = Enc::default()
        .msg(1, Enc::default().str(1, "creds").msg(11, Enc::default().str(1, "team").str(2, "a")))
        .entry(2, "password", b"s3cr\xffet")
        .entry(2, "empty", b"")
        .str(3, "Opaque");
    let object = decode("v1", "Secret", secret);
    assert_eq!(object["metadata"], json!({"name": "creds", "labels": {"team": "a"}}));
    assert_eq!(object["data"], json!({"password": "czNjcv9ldA==", "empty": ""}));
    assert_eq!(object["type"], "Opaque");

    let config_map = Enc::default().msg(1, Enc::default().str(1, "cm")).entry(2, "k", b"v").entry(3, "bin", &[0, 1, 2]);
    let object = decode("v1", "ConfigMap", config_map);
    assert_eq!(object["data"], json!({"k": "v"}));
    assert_eq!(object["binaryData"], json!({"bin": "AAEC"}));
}

#[test]
fn time_and_micro_time() {
    let created = Enc::default().varint(1, 1_700_000_000).varint(2, 123_456_789);
    let metadata = Enc::default().str(1, "x").msg(8, created).msg(9, Enc::default());
    let object = decode("v1", "ConfigMap", Enc::default().msg(1, metadata));
    // Time drops the nanoseconds; an empty Time (deletionTimestamp here) is the zero time: left out.
    assert_eq!(object["metadata"], json!({"name": "x", "creationTimestamp": "2023-11-14T22:13:20Z"}));

    let renew = Enc::default().varint(1, 1_700_000_000).varint(2, 123_456_789);
    let lease = decode("coordination.k8s.io/v1", "Lease", Enc::default().msg(2, Enc::default().msg(4, renew)));
    assert_eq!(lease["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
}

#[test]
fn int_or_string_and_quantity() {
    let by_number = Enc::default().varint(1, 0).varint(2, 8080);
    let by_name = Enc::default().varint(1, 1).str(3, "http");
    let spec = Enc::default()
        .msg(1, Enc::default().str(1, "a").varint(3, 80).msg(4, by_number))
        .msg(1, Enc::default().str(1, "b").varint(3, 81).msg(4, by_name));
    let service = decode("v1", "Service", Enc::default().msg(2, spec));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "a", "port": 80, "targetPort": 8080}, {"name": "b", "port": 81, "targetPort": "http"}])
    );

    let quantity = |q: &str| Enc::default().str(1, q).0;
    let quota = Enc::default().entry(1, "pods", &quantity("10")).entry(1, "requests.cpu", &quantity("500m"));
    let object = decode("v1", "ResourceQuota", Enc::default().msg(2, quota));
    assert_eq!(object["spec"], json!({"hard": {"pods": "10", "requests.cpu": "500m"}}));
}

#[test]
fn raw_extension_and_string_slice_messages() {
    let revision = Enc::default().msg(2, Enc::default().str(1, r#"{"spec":{"a":1}}"#)).varint(3, 4);
    let object = decode("apps/v1", "ControllerRevision", revision);
    assert_eq!(object["data"], json!({"spec": {"a": 1}}));
    assert_eq!(object["revision"], 4);

    let extra = Enc::default().str(1, "scopes").msg(2, Enc::default().str(1, "a").str(1, "b"));
    let spec = Enc::default().str(3, "alice").msg(5, extra);
    let review = decode("authorization.k8s.io/v1", "SubjectAccessReview", Enc::default().msg(2, spec));
    assert_eq!(review["spec"], json!({"user": "alice", "extra": {"scopes": ["a", "b"]}}));
}

#[test]
fn packed_and_unpacked_repeated_scalars() {
    let mut packed = Enc::default();
    packed.raw_varint(1000);
    packed.raw_varint(2000);
    let security = Enc::default().varint(4, 5).bytes(4, &packed.0);
    let pod = decode("v1", "Pod", Enc::default().msg(2, Enc::default().msg(14, security)));
    assert_eq!(pod["spec"]["securityContext"]["supplementalGroups"], json!([5, 1000, 2000]));
}

#[test]
fn unknown_fields_are_skipped() {
    let metadata = Enc::default().varint(900, 7).fixed32(901, 1).fixed64(902, 2).str(903, "x").str(1, "ns");
    let object = decode("v1", "Namespace", Enc::default().msg(1, metadata).str(77, "future"));
    assert_eq!(object, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}));
}

#[test]
fn delete_options_from_any_group_version() {
    let options = Enc::default().varint(1, 0).str(4, "Foreground");
    let object = decode("apps/v1", "DeleteOptions", options);
    assert_eq!(
        object,
        json!({"apiVersion": "apps/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Foreground"})
    );
}

#[test]
fn token_request_spec() {
    let spec = Enc::default().str(1, "https://kubernetes.default.svc").varint(4, 3600);
    let object = decode("authentication.k8s.io/v1", "TokenRequest", Enc::default().msg(2, spec));
    assert_eq!(object["spec"], json!({"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}));
}

#[test]
fn bad_bodies_are_named() {
    assert_eq!(decode_body(b"").unwrap_err(), "empty data");
    assert!(decode_body(b"{\"kind\":1}").unwrap_err().contains("does not appear to be a protobuf message"));
    assert_eq!(decode_body(b"k8s\0").unwrap_err(), "empty body");
    let unknown_kind = decode_body(&envelope("v1", "Gizmo", Enc::default())).unwrap_err();
    assert!(unknown_kind.starts_with("no kind \"Gizmo\" is registered for version \"v1\""), "{unknown_kind}");
    let mut truncated = envelope("v1", "Namespace", Enc::default().msg(1, Enc::default().str(1, "ns")));
    truncated.pop();
    assert_eq!(decode_body(&truncated).unwrap_err(), "unexpected EOF");
    let wrong_wire = envelope("v1", "Namespace", Enc::default().varint(1, 3));
    assert_eq!(decode_body(&wrong_wire).unwrap_err(), "Namespace.metadata: proto: wrong wireType = 0, expected 2");
}

#[test]
fn go_duration_strings() {
    let cases = [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (1_500_000, "1.5ms"),
        (1_000_000_000, "1s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_500_000_000, "1h2m3.5s"),
        (-2_000_000_000, "-2s"),
    ];
    for (nanos, text) in cases {
        assert_eq!(go_duration(nanos), text, "{nanos}");
    }
    assert_eq!(special(Kind::Duration, &Enc::default().varint(1, 3_600_000_000_000).0).unwrap(), "1h0m0s");
}

#[test]
fn content_type_detection() {
    assert!(is_protobuf(Some("application/vnd.kubernetes.protobuf")));
    assert!(is_protobuf(Some("application/vnd.kubernetes.protobuf; charset=utf-8")));
    assert!(!is_protobuf(Some("application/json")));
    assert!(!is_protobuf(None));
}

#[test]
fn inline_structs_join_their_parent() {
    // Volume{name, volumeSource: {configMap: {localObjectReference: {name}, defaultMode}}}
    let config_map = Enc::default().msg(1, Enc::default().str(1, "settings")).varint(3, 0o644);
    let volume = Enc::default().str(1, "conf").msg(2, Enc::default().msg(19, config_map));
    // Probe{handler: {exec: {command}}, periodSeconds}
    let probe = Enc::default().msg(1, Enc::default().msg(1, Enc::default().str(1, "true"))).varint(4, 5);
    let container = Enc::default().str(1, "c").msg(10, probe);
    let pod = decode("v1", "Pod", Enc::default().msg(2, Enc::default().msg(1, volume).msg(2, container)));
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "conf", "configMap": {"name": "settings", "defaultMode": 420}}])
    );
    assert_eq!(
        pod["spec"]["containers"][0]["livenessProbe"],
        json!({"exec": {"command": ["true"]}, "periodSeconds": 5})
    );
}
