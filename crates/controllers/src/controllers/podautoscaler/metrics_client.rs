//! Upstream's `podautoscaler/metrics/client.go`: samples from the resource metrics API
//! (`metrics.k8s.io/v1beta1` PodMetrics), the custom metrics API (`custom.metrics.k8s.io`,
//! v1beta2 or v1beta1, whichever discovery prefers, as client-go's `AvailableAPIsGetter`) and the
//! external metrics API (`external.metrics.k8s.io/v1beta1`), read with the controller's own
//! client. Errors carry upstream's texts.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use jiff::Timestamp;
use serde_json::Value;

use super::Error;
use super::replica_calculator::{PodMetric, PodMetricsInfo};
use crate::apimachinery::duration::parse_go_duration;
use crate::client::Client;
use crate::client::url::query;
use crate::quantity::Quantity;

/// `metricServerDefaultMetricWindow`: a custom metric's window when it gives none.
const DEFAULT_METRIC_WINDOW: Duration = Duration::from_secs(60);

/// The custom metrics API's versions this client reads, in client-go's order.
const CUSTOM_VERSIONS: [&str; 2] = ["custom.metrics.k8s.io/v1beta2", "custom.metrics.k8s.io/v1beta1"];

/// Reads the three metrics APIs.
pub struct MetricsClient {
    client: Client,
    /// The custom metrics group-version chosen by discovery, and when; forgotten after
    /// `invalidate_after` (`custom_metrics.PeriodicallyInvalidate` with the sync period).
    custom_version: Mutex<Option<(Instant, String)>>,
    invalidate_after: Duration,
}

fn items(list: &Value) -> &[Value] {
    list.get("items").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn timestamp(item: &Value) -> Timestamp {
    item.get("timestamp").and_then(Value::as_str).and_then(|t| t.parse().ok()).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn milli(value: Option<&Value>) -> Option<i64> {
    Quantity::from_json(value?).map(|q| q.milli_value() as i64)
}

fn name(item: &Value) -> String {
    item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string()
}

impl MetricsClient {
    /// A metrics client sending through `client`, reading discovery again every
    /// `invalidate_after`.
    pub fn new(client: Client, invalidate_after: Duration) -> MetricsClient {
        MetricsClient { client, custom_version: Mutex::new(None), invalidate_after }
    }

    /// The custom metrics API's group-version (`PreferredVersion`), from discovery.
    fn custom_group_version(&self) -> Result<String, Error> {
        let mut cached = self.custom_version.lock();
        if let Some((at, version)) = cached.as_ref()
            && at.elapsed() < self.invalidate_after
        {
            return Ok(version.clone());
        }
        let groups: Value = self.client.get_json("/apis")?;
        let group = groups
            .get("groups")
            .and_then(Value::as_array)
            .and_then(|g| g.iter().find(|g| g.get("name").and_then(Value::as_str) == Some("custom.metrics.k8s.io")))
            .ok_or(Error::NoCustomMetricsApi)?;
        let version = choose_custom_version(group).ok_or(Error::NoKnownMetricVersions)?;
        *cached = Some((Instant::now(), version.clone()));
        Ok(version)
    }

    /// `GetResourceMetric`: each pod's usage of `resource` (of `container` only, if set).
    pub fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
        container: &str,
    ) -> Result<(PodMetricsInfo, Timestamp), Error> {
        let path = format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods{}",
            query(&[("labelSelector", Some(selector.to_string()).filter(|s| !s.is_empty()))])
        );
        let list: Value = self
            .client
            .get_json(&path)
            .map_err(|e| Error::Api(e).context("unable to fetch metrics from resource metrics API"))?;
        let items = items(&list);
        let Some(first) = items.first() else { return Err(Error::NoMetricsReturned("resource")) };
        Ok((pod_metrics(items, resource, container), timestamp(first)))
    }

    /// `GetRawMetric`: a Pods metric of every pod the selector selects.
    pub fn raw_metric(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
        metric_selector: &str,
    ) -> Result<(PodMetricsInfo, Timestamp), Error> {
        let version =
            self.custom_group_version().map_err(|e| e.context("unable to fetch metrics from custom metrics API"))?;
        let path = format!(
            "/apis/{version}/namespaces/{namespace}/pods/*/{metric}{}",
            query(&[
                ("labelSelector", Some(selector.to_string())),
                ("metricLabelSelector", Some(metric_selector.to_string()).filter(|s| !s.is_empty())),
            ])
        );
        let list: Value = self
            .client
            .get_json(&path)
            .map_err(|e| Error::Api(e).context("unable to fetch metrics from custom metrics API"))?;
        let items = items(&list);
        let Some(first) = items.first() else { return Err(Error::NoMetricsReturned("custom")) };
        let mut samples = PodMetricsInfo::with_capacity(items.len());
        for m in items {
            let window =
                m.get("windowSeconds").and_then(Value::as_u64).map_or(DEFAULT_METRIC_WINDOW, Duration::from_secs);
            let pod = m.pointer("/describedObject/name").and_then(Value::as_str).unwrap_or_default();
            let value = milli(m.get("value")).unwrap_or(0);
            samples.insert(pod.to_string(), PodMetric { timestamp: timestamp(m), window, value });
        }
        Ok((samples, timestamp(first)))
    }

    /// `GetObjectMetric`: the metric of one object, `resource` being its `plural.group`
    /// (a Namespace's own metrics have their own path).
    pub fn object_metric(
        &self,
        metric: &str,
        namespace: &str,
        resource: &str,
        object: &str,
        metric_selector: &str,
    ) -> Result<(i64, Timestamp), Error> {
        let selector = query(&[("metricLabelSelector", Some(metric_selector.to_string()).filter(|s| !s.is_empty()))]);
        let fetch = || -> Result<Value, Error> {
            let version = self.custom_group_version()?;
            let path = if resource == "namespaces" {
                format!("/apis/{version}/namespaces/{namespace}/metrics/{metric}{selector}")
            } else {
                format!("/apis/{version}/namespaces/{namespace}/{resource}/{object}/{metric}{selector}")
            };
            let list: Value = self.client.get_json(&path)?;
            match items(&list) {
                [one] => Ok(one.clone()),
                other => Err(Error::NotExactlyOneResult(other.len())),
            }
        };
        let value = fetch().map_err(|e| e.context("unable to fetch metrics from custom metrics API"))?;
        Ok((milli(value.get("value")).unwrap_or(0), timestamp(&value)))
    }

    /// `GetExternalMetric`: every value of an external metric the selector selects.
    pub fn external_metric(
        &self,
        metric: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<(Vec<i64>, Timestamp), Error> {
        let path = format!(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}{}",
            query(&[("labelSelector", Some(selector.to_string()).filter(|s| !s.is_empty()))])
        );
        let list: Value = self
            .client
            .get_json(&path)
            .map_err(|e| Error::Api(e).context("unable to fetch metrics from external metrics API"))?;
        let items = items(&list);
        let Some(first) = items.first() else { return Err(Error::NoMetricsReturned("external")) };
        Ok((items.iter().map(|m| milli(m.get("value")).unwrap_or(0)).collect(), timestamp(first)))
    }
}

/// client-go's `chooseVersion`: the group's preferred version if this client reads it, else
/// the first of its versions that it does.
fn choose_custom_version(group: &Value) -> Option<String> {
    fn known(v: Option<&Value>) -> Option<String> {
        v.and_then(Value::as_str).filter(|gv| CUSTOM_VERSIONS.contains(gv)).map(str::to_string)
    }
    known(group.pointer("/preferredVersion/groupVersion")).or_else(|| {
        let versions = group.get("versions").and_then(Value::as_array)?;
        versions.iter().find_map(|v| known(v.get("groupVersion")))
    })
}

/// `getPodMetrics` / `getContainerMetrics`: a pod's sum over its containers, skipped when
/// one lacks the resource; or the one container's value.
pub fn pod_metrics(items: &[Value], resource: &str, container: &str) -> PodMetricsInfo {
    let mut samples = PodMetricsInfo::with_capacity(items.len());
    for m in items {
        let containers = m.get("containers").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let usage = |c: &Value| milli(c.get("usage").and_then(|u| u.get(resource)));
        let value = if container.is_empty() {
            let values: Option<Vec<i64>> = containers.iter().map(usage).collect();
            values.filter(|v| !v.is_empty()).map(|v| v.iter().sum())
        } else {
            let found = containers.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(container));
            if found.is_none() {
                log::debug!("Missing container metric container={container} pod={}", name(m));
            }
            found.and_then(usage)
        };
        let Some(value) = value else { continue };
        let window =
            m.get("window").and_then(Value::as_str).and_then(|w| parse_go_duration(w).ok()).unwrap_or_default();
        samples.insert(name(m), PodMetric { timestamp: timestamp(m), window, value });
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_custom_metrics_version_follows_discovery() {
        let group = |preferred: &str, versions: &[&str]| {
            let versions: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": v})).collect();
            json!({"name": "custom.metrics.k8s.io", "preferredVersion": {"groupVersion": preferred}, "versions": versions})
        };
        let v1beta1 = "custom.metrics.k8s.io/v1beta1";
        let v1beta2 = "custom.metrics.k8s.io/v1beta2";
        assert_eq!(choose_custom_version(&group(v1beta1, &[v1beta2, v1beta1])).as_deref(), Some(v1beta1));
        assert_eq!(choose_custom_version(&group("custom.metrics.k8s.io/v2", &[v1beta2])).as_deref(), Some(v1beta2));
        assert_eq!(choose_custom_version(&group("custom.metrics.k8s.io/v2", &[])), None);
    }

    #[test]
    fn pod_metrics_sum_containers_or_pick_one() {
        let items = vec![
            json!({"metadata": {"name": "a"}, "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
                   "containers": [{"name": "app", "usage": {"cpu": "250m", "memory": "1Mi"}},
                                  {"name": "side", "usage": {"cpu": "50m", "memory": "1Mi"}}]}),
            json!({"metadata": {"name": "b"}, "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
                   "containers": [{"name": "app", "usage": {"memory": "1Mi"}}]}),
            json!({"metadata": {"name": "c"}, "containers": []}),
        ];
        let cpu = pod_metrics(&items, "cpu", "");
        assert_eq!(cpu.len(), 1);
        assert_eq!(cpu["a"].value, 300);
        assert_eq!(cpu["a"].window, Duration::from_secs(15));
        assert_eq!(pod_metrics(&items, "cpu", "side")["a"].value, 50);
        assert_eq!(pod_metrics(&items, "memory", "")["b"].value, 1_048_576_000);
    }
}
