//! Upstream's `TestController_canDeleteCIDR`, `TestController_ipToCidrs` and
//! `TestController_cidrToCidrs` cases, both families.

use super::*;

fn cidr(name: &str, cidrs: &[&str]) -> Arc<ServiceCIDR> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"cidrs": cidrs}})).expect("a ServiceCIDR"),
    )
}

fn default_cidr() -> Arc<ServiceCIDR> {
    cidr("kubernetes", &["192.168.0.0/24", "2001:db2::/64"])
}

fn address(ip: &str) -> Arc<IPAddress> {
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let labels = json!({LABEL_IP_FAMILY: family, LABEL_MANAGED_BY: IP_ALLOCATOR});
    Arc::new(serde_json::from_value(json!({"metadata": {"name": ip, "labels": labels}})).expect("an IPAddress"))
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names.dedup();
    names
}

fn containing(cidrs: &[Arc<ServiceCIDR>], ip: &str) -> Vec<String> {
    sorted(containing_address(cidrs, ip.parse().expect("an IP")))
}

fn unrelated() -> Vec<Arc<ServiceCIDR>> {
    vec![cidr("unrelated", &["10.0.0.0/24"]), cidr("unrelated2", &["10.0.0.0/16"])]
}

/// A case: its name, the ServiceCIDRs, the addresses, whether `kubernetes` may go.
type Case = (&'static str, Vec<Arc<ServiceCIDR>>, Vec<&'static str>, bool);

#[test]
fn can_delete_cidr() {
    let cases: Vec<Case> = vec![
        ("empty", vec![], vec![], true),
        ("CIDR and no IPs", vec![default_cidr()], vec![], true),
        ("CIDR with IPs", vec![default_cidr()], vec!["192.168.0.24"], false),
        ("CIDR without IPs", vec![default_cidr()], vec!["192.168.1.24"], true),
        ("IPv4 subnet address", vec![default_cidr()], vec!["192.168.0.0"], true),
        ("IPv4 broadcast address", vec![default_cidr()], vec!["192.168.0.255"], true),
        ("IPv6 last address", vec![default_cidr()], vec!["2001:0db2::ffff:ffff:ffff:ffff"], false),
        (
            "same range overlapping",
            vec![default_cidr(), cidr("overlapping", &["192.168.0.0/24", "2001:db2::/64"])],
            vec!["192.168.0.23"],
            true,
        ),
        (
            "smaller range overlapping",
            vec![default_cidr(), cidr("overlapping", &["192.168.0.0/26", "2001:db2::/64"])],
            vec!["192.168.0.23"],
            true,
        ),
        (
            "smaller range overlapping, IP orphan",
            vec![default_cidr(), cidr("overlapping", &["192.168.0.0/28", "2001:db2::/64"])],
            vec!["192.168.0.23"],
            false,
        ),
        (
            "larger range overlapping",
            vec![default_cidr(), cidr("overlapping", &["192.168.0.0/16", "2001:db2::/64"])],
            vec!["192.168.0.23"],
            true,
        ),
        (
            "IPv6 covered by a larger range",
            vec![default_cidr(), cidr("overlapping", &["192.168.0.0/16", "2001:db2::/48"])],
            vec!["2001:db2::1"],
            true,
        ),
        (
            "IPv6 not covered",
            vec![default_cidr(), cidr("overlapping", &["192.168.255.0/26", "2001:db2:a:b::/64"])],
            vec!["2001:db2::1"],
            false,
        ),
    ];
    for (name, cidrs, ips, want) in cases {
        let addresses: Vec<_> = ips.into_iter().map(address).collect();
        assert_eq!(can_delete(&default_cidr(), &cidrs, &addresses), want, "{name}");
    }
}

#[test]
fn unmanaged_addresses_do_not_block() {
    let mut foreign = (*address("192.168.0.24")).clone();
    foreign.metadata.labels.as_mut().expect("labels").insert(LABEL_MANAGED_BY.into(), "someone-else".into());
    assert!(can_delete(&default_cidr(), &[default_cidr()], &[Arc::new(foreign.clone())]));
    assert_eq!(managed_address(&foreign), None);
}

#[test]
fn addresses_requeue_the_cidrs_containing_them() {
    let mut cidrs = vec![default_cidr()];
    cidrs.extend(unrelated());
    assert_eq!(containing(&[], "192.168.0.23"), Vec::<String>::new());
    assert_eq!(containing(&cidrs, "192.168.0.23"), ["kubernetes"]);
    cidrs.push(cidr("overlapping", &["192.168.0.0/24", "2001:db2::/64"]));
    cidrs.push(cidr("overlapping2", &["192.168.0.0/26", "2001:db2::/96"]));
    assert_eq!(containing(&cidrs, "192.168.0.23"), ["kubernetes", "overlapping", "overlapping2"]);
    assert_eq!(containing(&cidrs, "192.168.0.0"), Vec::<String>::new(), "the subnet address");
    assert_eq!(containing(&cidrs, "192.168.0.63"), ["kubernetes", "overlapping"], "the /26's broadcast");
    assert_eq!(containing(&cidrs, "2001:db2::"), Vec::<String>::new());
    assert_eq!(containing(&cidrs, "2001:0db2::ffff:ffff:ffff:ffff"), ["kubernetes", "overlapping"]);
}

#[test]
fn a_new_cidr_requeues_those_it_overlaps() {
    let mut cidrs = vec![default_cidr()];
    cidrs.extend(unrelated());
    cidrs.push(cidr("overlapping", &["192.168.0.0/24", "2001:db2::/64"]));
    cidrs.push(cidr("overlapping2", &["192.168.0.0/26", "2001:db2::/96"]));
    let names: Vec<String> = prefixes(&default_cidr()).iter().flat_map(|p| overlapping(&cidrs, p)).collect();
    assert_eq!(sorted(names), ["kubernetes", "overlapping", "overlapping2"]);
}

#[test]
fn the_status_applied() {
    let now: Timestamp = "2026-11-26T10:00:00.4Z".parse().expect("a time");
    let ready = ready_apply("kubernetes", true, now);
    assert_eq!(
        ready,
        json!({"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1", "metadata": {"name": "kubernetes"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
                "message": "Kubernetes Service CIDR is ready", "lastTransitionTime": "2026-11-26T10:00:00Z"}]}})
    );
    let terminating = &ready_apply("x", false, now)["status"]["conditions"][0];
    assert_eq!(terminating["reason"], "Terminating");
    assert_eq!(terminating["status"], "False");
    assert_eq!(terminating["message"], TERMINATING_MESSAGE);
}

#[test]
fn an_unchanged_ready_condition_is_not_applied_again() {
    let mut ready = (*default_cidr()).clone();
    assert!(!ready_up_to_date(&ready, true), "no condition yet");
    ready.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True", "reason": "",
        "message": "Kubernetes Service CIDR is ready", "lastTransitionTime": "2026-11-26T10:00:00Z"}]}))
        .unwrap(),
    );
    assert!(ready_up_to_date(&ready, true));
    assert!(!ready_up_to_date(&ready, false), "deleting: Terminating is applied");
    let mut terminating = ready.clone();
    terminating.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "False",
        "reason": "Terminating", "message": TERMINATING_MESSAGE, "lastTransitionTime": "2026-11-26T10:00:00Z"}]}))
        .unwrap(),
    );
    assert!(ready_up_to_date(&terminating, false));
    assert!(!ready_up_to_date(&terminating, true));
    let mut other_message = ready.clone();
    other_message.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].message = "ready".into();
    assert!(!ready_up_to_date(&other_message, true), "a different message is replaced");
}

#[test]
fn the_finalizer_waits_out_the_grace_period() {
    let mut deleting = (*default_cidr()).clone();
    let at: Timestamp = "2026-11-26T10:00:00Z".parse().expect("a time");
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
    let later = |s: i64| at.checked_add(jiff::SignedDuration::from_secs(s)).expect("a time");
    assert_eq!(grace_left(&deleting, later(4)), Some(Duration::from_secs(6)));
    assert_eq!(grace_left(&deleting, later(10)), None);
    assert_eq!(grace_left(&deleting, later(11)), None);
    assert_eq!(grace_left(&default_cidr(), later(0)), None);
}
