use serde_json::{Value, json};

use super::apply;

fn patched(target: Value, operations: Value) -> Value {
    apply(&target, &operations).unwrap()
}

fn error(target: Value, operations: Value) -> String {
    apply(&target, &operations).unwrap_err().to_string()
}

/// RFC 6902 appendix A, where kube-apiserver agrees with the RFC.
#[test]
fn rfc6902_examples() {
    // A.1 Adding an object member
    assert_eq!(
        patched(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz", "value": "qux"}])),
        json!({"baz": "qux", "foo": "bar"})
    );
    // A.2 Adding an array element
    assert_eq!(
        patched(json!({"foo": ["bar", "baz"]}), json!([{"op": "add", "path": "/foo/1", "value": "qux"}])),
        json!({"foo": ["bar", "qux", "baz"]})
    );
    // A.3 Removing an object member
    assert_eq!(
        patched(json!({"baz": "qux", "foo": "bar"}), json!([{"op": "remove", "path": "/baz"}])),
        json!({"foo": "bar"})
    );
    // A.4 Removing an array element
    assert_eq!(
        patched(json!({"foo": ["bar", "qux", "baz"]}), json!([{"op": "remove", "path": "/foo/1"}])),
        json!({"foo": ["bar", "baz"]})
    );
    // A.5 Replacing a value
    assert_eq!(
        patched(json!({"baz": "qux", "foo": "bar"}), json!([{"op": "replace", "path": "/baz", "value": "boo"}])),
        json!({"baz": "boo", "foo": "bar"})
    );
    // A.6 Moving a value
    assert_eq!(
        patched(
            json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
            json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}])
        ),
        json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})
    );
    // A.7 Moving an array element
    assert_eq!(
        patched(
            json!({"foo": ["all", "grass", "cows", "eat"]}),
            json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}])
        ),
        json!({"foo": ["all", "cows", "eat", "grass"]})
    );
    // A.8 Testing a value: success
    let doc = json!({"baz": "qux", "foo": ["a", 2, "c"]});
    let ops = json!([
        {"op": "test", "path": "/baz", "value": "qux"},
        {"op": "test", "path": "/foo/1", "value": 2}
    ]);
    assert_eq!(patched(doc.clone(), ops), doc);
    // A.9 Testing a value: error
    assert_eq!(
        error(json!({"baz": "qux"}), json!([{"op": "test", "path": "/baz", "value": "bar"}])),
        "testing value /baz failed: test failed"
    );
    // A.10 Adding a nested member object
    assert_eq!(
        patched(json!({"foo": "bar"}), json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}])),
        json!({"foo": "bar", "child": {"grandchild": {}}})
    );
    // A.11 Ignoring unrecognized elements
    assert_eq!(
        patched(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}])),
        json!({"foo": "bar", "baz": "qux"})
    );
    // A.12 Adding to a nonexistent target
    assert_eq!(
        error(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz/bat", "value": "qux"}])),
        "add operation does not apply: doc is missing path: \"/baz/bat\": missing value"
    );
    // A.14 ~ escape ordering
    let doc = json!({"/": 9, "~1": 10});
    assert_eq!(patched(doc.clone(), json!([{"op": "test", "path": "/~01", "value": 10}])), doc);
    // A.15 Comparing strings and numbers
    assert_eq!(
        error(doc, json!([{"op": "test", "path": "/~01", "value": "10"}])),
        "testing value /~01 failed: test failed"
    );
    // A.16 Adding an array value
    assert_eq!(
        patched(json!({"foo": ["bar"]}), json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}])),
        json!({"foo": ["bar", ["abc", "def"]]})
    );
}

#[test]
fn escaped_pointers() {
    let doc = json!({"metadata": {"annotations": {"example.com/a": "1", "x~y": "2"}}});
    let ops = json!([
        {"op": "replace", "path": "/metadata/annotations/example.com~1a", "value": "3"},
        {"op": "remove", "path": "/metadata/annotations/x~0y"}
    ]);
    assert_eq!(patched(doc, ops), json!({"metadata": {"annotations": {"example.com/a": "3"}}}));
}

#[test]
fn copy_and_append() {
    let doc = json!({"spec": {"containers": [{"name": "a"}]}});
    let ops = json!([
        {"op": "copy", "from": "/spec/containers/0", "path": "/spec/containers/-"},
        {"op": "replace", "path": "/spec/containers/1/name", "value": "b"},
        {"op": "add", "path": "/spec/containers/0/image", "value": "x"}
    ]);
    assert_eq!(patched(doc, ops), json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}}));
}

#[test]
fn negative_indices_count_from_the_end() {
    let doc = json!({"a": [1, 2, 3]});
    assert_eq!(patched(doc.clone(), json!([{"op": "remove", "path": "/a/-1"}])), json!({"a": [1, 2]}));
    assert_eq!(patched(doc, json!([{"op": "add", "path": "/a/-1", "value": 9}])), json!({"a": [1, 2, 3, 9]}));
}

#[test]
fn kube_apiserver_quirks() {
    // `replace` of a missing member adds it (evanphx/json-patch v4).
    assert_eq!(
        patched(json!({"spec": {}}), json!([{"op": "replace", "path": "/spec/replicas", "value": 2}])),
        json!({"spec": {"replicas": 2}})
    );
    // The whole document cannot be the target.
    assert_eq!(
        error(json!({}), json!([{"op": "add", "path": "", "value": {}}])),
        "add operation does not apply: doc is missing path: \"\": missing value"
    );
    // `test` only looks at the document's members.
    let doc = json!({"a": {"b": 1}});
    assert_eq!(patched(doc.clone(), json!([{"op": "test", "path": "/a", "value": {"b": 1, "c": 2}}])), doc);
    assert!(apply(&doc, &json!([{"op": "test", "path": "/a", "value": {}}])).is_err());
    // A missing member tests equal to null.
    assert_eq!(patched(doc.clone(), json!([{"op": "test", "path": "/x", "value": null}])), doc);
}

#[test]
fn operation_errors() {
    let doc = json!({"a": [1], "b": "x"});
    let cases = [
        (
            json!({"op": "remove", "path": "/c"}),
            "error in remove for path: '/c': Unable to remove nonexistent key: c: missing value",
        ),
        (
            json!({"op": "add", "path": "/a/5", "value": 0}),
            "error in add for path: '/a/5': Unable to access invalid index: 5: invalid index referenced",
        ),
        (
            json!({"op": "add", "path": "/a/x", "value": 0}),
            "error in add for path: '/a/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            json!({"op": "replace", "path": "/a/3", "value": 0}),
            "replace operation does not apply: doc is missing key: /a/3: missing value",
        ),
        (
            json!({"op": "remove", "path": "/b/c"}),
            "remove operation does not apply: doc is missing path: \"/b/c\": missing value",
        ),
        (
            json!({"op": "move", "from": "/nope", "path": "/c"}),
            "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value",
        ),
        (
            json!({"op": "copy", "from": "/a/0", "path": "/x/y"}),
            "copy operation does not apply: doc is missing destination path: /x/y: missing value",
        ),
        (json!({"op": "add", "value": 1}), "add operation failed to decode path: missing value"),
        (
            json!({"op": "replace", "value": 1}),
            "replace operation failed to decode path: operation missing path field: missing value",
        ),
        (
            json!({"op": "move", "path": "/c"}),
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        (json!({"op": "frobnicate", "path": "/a"}), "Unexpected kind: frobnicate"),
        (json!({"path": "/a"}), "Unexpected kind: unknown"),
    ];
    for (operation, message) in cases {
        assert_eq!(error(doc.clone(), json!([operation])), message);
    }
}

#[test]
fn malformed_patches() {
    assert_eq!(
        error(json!({}), json!({"op": "add"})),
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    );
    assert_eq!(
        error(json!({}), json!(["add"])),
        "json: cannot unmarshal string into Go value of type jsonpatch.Operation"
    );
    assert_eq!(error(json!({}), json!([null])), "Unexpected kind: unknown");
}

#[test]
fn failed_operation_leaves_the_target_alone() {
    let doc = json!({"a": 1});
    let ops = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}]);
    assert!(apply(&doc, &ops).is_err());
    assert_eq!(doc, json!({"a": 1}));
}
