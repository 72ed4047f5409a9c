//! Label selectors as kube-apiserver parses them, and `metav1.LabelSelector` in both forms.

use serde_json::json;

use super::*;

fn labels(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("test labels are an object")
}

fn selects(selector: &str, set: Value) -> bool {
    Selector::parse(selector).expect("test selector parses").matches(labels(set))
}

fn parse_error(selector: &str) -> String {
    Selector::parse(selector).expect_err("test selector is invalid").to_string()
}

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
    with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
    is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', \
    '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
    '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

// --- label selector: grammar and semantics ---

#[test]
fn empty_selector_matches_everything() {
    for text in ["", "   ", "\t\n"] {
        let selector = Selector::parse(text).expect("empty parses");
        assert!(selector.is_empty());
        assert!(selector.matches(Map::new()));
        assert!(selector.matches_object(&json!({"metadata": {"labels": {"a": "b"}}})));
    }
}

#[test]
fn equality_operators() {
    for selector in ["app=web", "app==web", " app = web "] {
        assert!(selects(selector, json!({"app": "web"})), "{selector}");
        assert!(!selects(selector, json!({"app": "db"})), "{selector}");
        assert!(!selects(selector, json!({})), "{selector}");
    }
    assert!(selects("app=", json!({"app": ""})));
    assert!(!selects("app=", json!({})));
}

#[test]
fn not_equals_matches_absent_key() {
    assert!(selects("app!=web", json!({"app": "db"})));
    assert!(!selects("app!=web", json!({"app": "web"})));
    assert!(selects("app!=web", json!({})));
}

#[test]
fn set_operators() {
    assert!(selects("env in (prod, dev)", json!({"env": "dev"})));
    assert!(!selects("env in (prod,dev)", json!({"env": "qa"})));
    assert!(!selects("env in (prod,dev)", json!({})));
    assert!(selects("env notin (prod,dev)", json!({"env": "qa"})));
    assert!(!selects("env notin (prod,dev)", json!({"env": "prod"})));
    assert!(selects("env notin (prod,dev)", json!({})));
}

#[test]
fn empty_values_in_sets() {
    assert!(selects("x in ()", json!({"x": ""})));
    assert!(selects("x in (,a)", json!({"x": ""})));
    assert!(selects("x in (a,)", json!({"x": ""})));
    assert!(selects("x in (a,,b)", json!({"x": ""})));
    assert!(!selects("x in (a,b)", json!({"x": ""})));
    // Upstream's own example.
    let selector = Selector::parse("x in (foo,,baz),y,z notin ()").expect("parses");
    assert!(selector.matches(labels(json!({"x": "", "y": "1"}))));
    assert!(!selector.matches(labels(json!({"x": "", "y": "1", "z": ""}))));
}

#[test]
fn exists_and_does_not_exist() {
    assert!(selects("app", json!({"app": ""})));
    assert!(!selects("app", json!({"other": "x"})));
    assert!(selects("!app", json!({"other": "x"})));
    assert!(!selects("!app", json!({"app": "x"})));
    assert!(selects(" ! app ", json!({})));
}

#[test]
fn greater_and_less_than() {
    assert!(selects("replicas>3", json!({"replicas": "4"})));
    assert!(!selects("replicas>3", json!({"replicas": "3"})));
    assert!(selects("replicas<3", json!({"replicas": "2"})));
    assert!(!selects("replicas < 3", json!({"replicas": "3"})));
    assert!(!selects("replicas>3", json!({"replicas": "many"})));
    assert!(!selects("replicas>3", json!({})));
    // Integers with a sign parse, but the value must still be a label value.
    assert!(parse_error("replicas>+3").starts_with("unable to parse requirement: values[0][replicas]: "));
}

#[test]
fn requirements_are_anded() {
    let selector = "app=web,tier notin (db),!legacy,version>1";
    assert!(selects(selector, json!({"app": "web", "tier": "front", "version": "2"})));
    assert!(!selects(selector, json!({"app": "web", "version": "2", "legacy": "yes"})));
    assert!(!selects(selector, json!({"app": "web", "tier": "db", "version": "2"})));
}

#[test]
fn keywords_are_identifiers_as_keys_and_values() {
    assert!(selects("in=notin", json!({"in": "notin"})));
    assert!(selects("a in (in,notin)", json!({"a": "notin"})));
    assert!(selects("notin notin (in)", json!({"notin": "x"})));
}

#[test]
fn prefixed_keys() {
    assert!(selects("app.kubernetes.io/name=web", json!({"app.kubernetes.io/name": "web"})));
    assert!(selects("!example.com/x", json!({})));
}

#[test]
fn matches_object_reads_metadata_labels() {
    let selector = Selector::parse("app=web").expect("parses");
    assert!(selector.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
    assert!(!selector.matches_object(&json!({"metadata": {"name": "x"}})));
    assert!(Selector::parse("app!=web").expect("parses").matches_object(&json!({})));
}

#[test]
fn display_is_upstreams_string() {
    let selector = Selector::parse("z in (b,a), !y, x==1, w!=2, v>3, u<4, t notin (c), s, r=").expect("parses");
    assert_eq!(selector.to_string(), "r=,s,t notin (c),u<4,v>3,w!=2,x==1,!y,z in (a,b)");
}

// --- label selector: errors ---

#[test]
fn syntax_errors() {
    let cases = [
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a(b)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
        ("! =a", "unable to parse requirement: found '=', expected: identifier"),
        ("!!a", "unable to parse requirement: found '!', expected: identifier"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
    ];
    for (selector, message) in cases {
        assert_eq!(parse_error(selector), message, "{selector}");
    }
}

#[test]
fn gt_lt_need_integers() {
    let message = "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, \
        the value must be an integer";
    assert_eq!(parse_error("a>abc"), message);
    assert_eq!(
        parse_error("a<"),
        "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must \
         be an integer"
    );
    // A negative bound is an integer but not a label value.
    assert_eq!(
        parse_error("a>-1"),
        format!("unable to parse requirement: values[0][a]: Invalid value: \"-1\": {VALUE_RULE}")
    );
}

#[test]
fn invalid_keys() {
    assert_eq!(
        parse_error("-a"),
        format!("unable to parse requirement: <nil>: Invalid value: \"-a\": name part {NAME_RULE}")
    );
    assert_eq!(
        parse_error("a/b/c=d"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key {NAME_RULE} with an \
             optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    );
    assert_eq!(
        parse_error("/a"),
        "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".to_string()
    );
    assert_eq!(
        parse_error("a/"),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; name part \
             {NAME_RULE}"
        )
    );
    let long = "k".repeat(64);
    assert_eq!(
        parse_error(&long),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part must be no more than 63 \
             characters"
        )
    );
    assert_eq!(
        parse_error("Example.com/a"),
        "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 \
         subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end \
         with an alphanumeric character \
         (e.g. 'example.com', regex used for validation is \
         '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert!(Selector::parse(&"k".repeat(63)).is_ok());
    assert!(Selector::parse(&format!("{}/a", "p".repeat(253))).is_ok());
    assert!(parse_error(&format!("{}/a", "p".repeat(254))).contains("prefix part must be no more than 253 characters"));
    assert_eq!(
        parse_error("a\"b"),
        format!("unable to parse requirement: <nil>: Invalid value: \"a\\\"b\": name part {NAME_RULE}")
    );
}

#[test]
fn invalid_values() {
    assert_eq!(
        parse_error("a=-b"),
        format!("unable to parse requirement: values[0][a]: Invalid value: \"-b\": {VALUE_RULE}")
    );
    let long = "v".repeat(64);
    assert_eq!(
        parse_error(&format!("a in (b,{long})")),
        format!(
            "unable to parse requirement: values[1][a]: Invalid value: \"{long}\": must be no more than 63 \
             characters"
        )
    );
    // Two bad values: an aggregate, values in sorted order.
    assert_eq!(
        parse_error("a in (_y,-x)"),
        format!(
            "unable to parse requirement: [values[0][a]: Invalid value: \"-x\": {VALUE_RULE}, values[1][a]: \
             Invalid value: \"_y\": {VALUE_RULE}]"
        )
    );
    assert!(Selector::parse(&format!("a={}", "v".repeat(63))).is_ok());
}

#[test]
fn go_quoting_of_bad_values() {
    assert_eq!(quote("a\tb\u{1}é\u{a0}"), "\"a\\tb\\x01é\\u00a0\"");
    assert_eq!(go_json_list(&["<a>".to_string(), "\"".to_string()]), "[\"\\u003ca\\u003e\",\"\\\"\"]");
}

// --- metav1.LabelSelector ---

fn from_object(selector: Value) -> Result<Selector, String> {
    Selector::from_label_selector_object(&selector).map_err(|e| e.to_string())
}

#[test]
fn null_selector_matches_nothing_and_empty_everything() {
    let nothing = from_object(Value::Null).expect("null converts");
    assert!(!nothing.matches(Map::new()));
    assert!(!nothing.is_empty());
    assert_eq!(nothing.to_string(), "");
    for empty in [json!({}), json!({"matchLabels": {}, "matchExpressions": []}), json!({"matchLabels": null})] {
        let selector = from_object(empty).expect("empty converts");
        assert!(selector.is_empty());
        assert!(selector.matches(Map::new()));
    }
}

#[test]
fn match_labels_and_expressions() {
    let selector = from_object(json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "edge"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "team", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []},
        ],
    }))
    .expect("converts");
    assert!(selector.matches(labels(json!({"app": "web", "tier": "edge", "team": "a"}))));
    assert!(!selector.matches(labels(json!({"app": "web", "tier": "edge", "team": "a", "env": "prod"}))));
    assert!(!selector.matches(labels(json!({"app": "web", "tier": "edge", "team": "a", "legacy": ""}))));
    assert!(!selector.matches(labels(json!({"app": "web", "tier": "edge"}))));
    assert!(!selector.matches(labels(json!({"app": "db", "tier": "edge", "team": "a"}))));
    assert_eq!(selector.to_string(), "app=web,env notin (prod),!legacy,team,tier in (edge,front)");
}

#[test]
fn label_selector_object_errors() {
    let error = |selector: Value| from_object(selector).expect_err("invalid selector");
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]})),
        "\"Equals\" is not a valid label selector operator"
    );
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    );
    assert_eq!(
        error(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]})),
        "values: Invalid value: [\"b\"]: values set must be empty for exists and does not exist"
    );
    assert_eq!(
        error(json!({"matchLabels": {"-a": "b"}})),
        format!("key: Invalid value: \"-a\": name part {NAME_RULE}")
    );
    assert_eq!(
        error(json!({"matchLabels": {"a": "-b"}})),
        format!("values[0][a]: Invalid value: \"-b\": {VALUE_RULE}")
    );
    assert_eq!(
        error(json!({"matchLabels": {"-a": "-b"}})),
        format!(
            "[key: Invalid value: \"-a\": name part {NAME_RULE}, values[0][-a]: Invalid value: \"-b\": \
             {VALUE_RULE}]"
        )
    );
    assert!(error(json!("app=web")).contains("expected an object"));
    assert!(error(json!({"matchLabels": {"a": 1}})).contains("must be a string"));
}

#[test]
fn selector_from_set() {
    let selector = Selector::from_set(&labels(json!({"app": "web", "tier": "front"})));
    assert!(selector.matches(labels(json!({"app": "web", "tier": "front", "x": "y"}))));
    assert!(!selector.matches(labels(json!({"app": "web"}))));
    assert!(Selector::from_set(&Map::new()).is_empty());
}

// --- typed metav1.LabelSelector, as controllers hold it ---

fn typed_labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn selectors_match_labels_and_expressions() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    let labels = typed_labels;
    let selector = LabelSelector {
        match_labels: Some(labels(&[("app", "web")])),
        match_expressions: Some(vec![
            LabelSelectorRequirement { key: "tier".into(), operator: "In".into(), values: Some(vec!["a".into()]) },
            LabelSelectorRequirement { key: "canary".into(), operator: "DoesNotExist".into(), values: None },
        ]),
    };
    let selector = Selector::from_label_selector(&selector).expect("valid");
    assert!(selector.matches(Some(&labels(&[("app", "web"), ("tier", "a")]))));
    assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "b")]))));
    assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "a"), ("canary", "1")]))));
    assert!(!selector.matches(None::<&BTreeMap<String, String>>));
    let bad = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: "Near".into(),
            values: None,
        }]),
        ..LabelSelector::default()
    };
    assert!(Selector::from_label_selector(&bad).is_err());
}

#[test]
fn label_selectors_print_as_gos_generated_string() {
    let selector: LabelSelector = serde_json::from_value(json!({"matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]}]}))
    .expect("a selector");
    assert_eq!(
        label_selector_go_string(Some(&selector)),
        "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{\
         LabelSelectorRequirement{Key:tier,Operator:In,Values:[x y],},},}"
    );
    assert_eq!(label_selector_go_string(None), "nil");
}

#[test]
fn the_value_a_selector_requires_of_a_key() {
    let required = |text: &str| Selector::parse(text).unwrap().required_value("hash").map(str::to_string);
    assert_eq!(required("app=web,hash=abc"), Some("abc".into()));
    assert_eq!(required("hash==abc"), Some("abc".into()));
    assert_eq!(required("hash in (abc)"), Some("abc".into()));
    for none in ["app=web", "hash in (a,b)", "hash!=abc", "hash", "!hash", ""] {
        assert_eq!(required(none), None, "{none}");
    }
}
