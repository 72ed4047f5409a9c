//! Side-by-side scenario of the `servicecidrs` controller: `servicecidr`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "servicecidr",
    summary: "a ServiceCIDR made Ready, a Service given an IP of it, the ServiceCIDR deleted and kept \
                  (Terminating) while the IP is used, then gone once the Service is",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: service_cidr,
}];

pub(super) const SERVICE_CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";

/// The Ready condition of a ServiceCIDR: `(status, reason)`.
pub(super) fn service_cidr_ready(steps: &Steps, name: &str) -> Result<Option<(String, String)>, Error> {
    let Some(cidr) = steps.get(&format!("{SERVICE_CIDRS}/{name}"))? else { return Ok(None) };
    let conditions = cidr["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready");
    let text = |c: &Value, field: &str| c[field].as_str().unwrap_or_default().to_string();
    Ok(ready.map(|c| (text(c, "status"), text(c, "reason"))))
}

pub(super) fn service_cidr(steps: &mut Steps) -> Result<(), Error> {
    // The default ServiceCIDR and the new one are compared too.
    steps.cluster_objects = ["kubernetes", "extra"].map(|n| format!("{SERVICE_CIDRS}/{n}")).to_vec();
    steps.create(SERVICE_CIDRS, json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}}))?;
    steps.wait("extra Ready", |s| Ok(service_cidr_ready(s, "extra")?.filter(|(status, _)| status == "True")))?;
    steps.checkpoint("ready")?;
    let service = json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.200.0.10", "ports": [{"port": 80}]}});
    steps.create("/api/v1/namespaces/sbs/services", service)?;
    steps.checkpoint("used")?;
    steps.delete(&format!("{SERVICE_CIDRS}/extra"), None)?;
    steps.wait("extra Terminating", |s| {
        Ok(service_cidr_ready(s, "extra")?.filter(|(_, reason)| reason == "Terminating"))
    })?;
    steps.checkpoint("blocked")?;
    steps.delete("/api/v1/namespaces/sbs/services/web", None)?;
    steps.wait_gone(&format!("{SERVICE_CIDRS}/extra"))
}
