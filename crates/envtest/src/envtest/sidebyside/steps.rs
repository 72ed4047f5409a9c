//! [`Steps`]: what a scenario does to the cluster and waits for, on either side.

use serde_json::json;

use super::*;

/// What a scenario's steps work with.
pub struct Steps<'a> {
    /// A cluster admin.
    pub client: Client,
    pub(super) plane: &'a ControlPlane,
    /// The metrics APIs, once a scenario asked for them.
    pub(super) metrics_apis: Option<MetricsApis>,
    /// The simulated nodes (kubelets) of this run.
    pub nodes: &'a SimulatedNodes,
    /// The namespaces whose objects and Events are compared.
    pub namespaces: Vec<String>,
    /// Cluster-scoped objects compared too (API paths, e.g. a ClusterRole's).
    pub cluster_objects: Vec<String>,
    pub(super) compare_nodes: bool,
    pub(super) ca_pem: String,
    /// What earlier checkpoints learnt, for objects naming objects since deleted.
    pub(super) remembered: std::cell::RefCell<Remembered>,
    pub(super) checkpoints: Vec<Snapshot>,
    pub(super) manager: &'a mut OwnedProcess,
}

impl Steps<'_> {
    /// Waits until the controller manager has made the scenario namespace usable (its default
    /// ServiceAccount) and every node schedulable (not-ready taint removed).
    pub(super) fn ready(&mut self, nodes: &[String]) -> Result<(), Error> {
        let account = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default");
        let root_ca = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/kube-root-ca.crt");
        self.wait("the default ServiceAccount and kube-root-ca.crt", |s| {
            Ok((s.get(&account)?.is_some() && s.get(&root_ca)?.is_some()).then_some(()))
        })?;
        self.wait("every node Ready and schedulable", |s| {
            let listed = s.list("/api/v1/nodes")?;
            Ok((listed.iter().filter(|n| node_usable(n)).count() == nodes.len()).then_some(()))
        })
    }

    /// Polls `check` until it gives a value; fails after `STEP_TIMEOUT` or when the
    /// controller manager exits.
    pub fn wait<T>(
        &mut self,
        what: &str,
        mut check: impl FnMut(&Steps) -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if let Some(status) = self.manager.exited() {
                return Err(Error::ManagerExited { status, output: self.manager.log_tail(20) });
            }
            if let Some(value) = check(self)? {
                return Ok(value);
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: what.to_string(), timeout: STEP_TIMEOUT });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Records the state once it has settled.
    pub fn checkpoint(&mut self, label: &str) -> Result<(), Error> {
        let started = Instant::now();
        let mut last = self.snapshot(label)?;
        let mut quiet_since = Instant::now();
        let settled = loop {
            std::thread::sleep(SETTLE_POLL);
            let next = self.snapshot(label)?;
            if next != last {
                last = next;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= SETTLE_QUIET {
                break true;
            }
            if started.elapsed() > SETTLE_LIMIT {
                break false;
            }
        };
        last.settled = settled;
        self.checkpoints.push(last);
        Ok(())
    }

    pub(super) fn snapshot(&self, label: &str) -> Result<Snapshot, Error> {
        let mut objects = Vec::new();
        let mut events = Vec::new();
        for ns in &self.namespaces {
            if let Some(namespace) = self.get(&format!("/api/v1/namespaces/{ns}"))? {
                objects.push(namespace);
            }
            for (prefix, resource, kind) in COMPARED_KINDS {
                for mut item in self.list(&format!("{prefix}/namespaces/{ns}/{resource}"))? {
                    item["kind"] = json!(kind);
                    objects.push(item);
                }
            }
            events.extend(self.list(&format!("/api/v1/namespaces/{ns}/events"))?);
        }
        for path in &self.cluster_objects {
            objects.extend(self.get(path)?);
        }
        for mut csr in self.list(CSRS)? {
            csr["kind"] = json!("CertificateSigningRequest");
            objects.push(summarise_csr(csr));
        }
        if self.compare_nodes {
            for mut node in self.list("/api/v1/nodes")? {
                node["kind"] = json!("Node");
                objects.push(node);
            }
            let node_events = self.list("/api/v1/namespaces/default/events")?;
            events.extend(node_events.into_iter().filter(|e| e["involvedObject"]["kind"] == "Node"));
        }
        Ok(normalise_remembering(label, objects, events, &self.ca_pem, &mut self.remembered.borrow_mut()))
    }

    /// GETs an object; `None` when it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Value>, Error> {
        Ok(JsonApi(&self.client).get(path)?)
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, Error> {
        Ok(JsonApi(&self.client).list(path)?)
    }

    /// POSTs `object` to the collection at `path`.
    pub fn create(&self, path: &str, object: Value) -> Result<Value, Error> {
        Ok(JsonApi(&self.client).create(path, &object)?)
    }

    /// A JSON merge patch.
    pub fn patch(&self, path: &str, patch: Value) -> Result<Value, Error> {
        Ok(JsonApi(&self.client).patch(path, &patch)?)
    }

    /// PUT of a whole object (e.g. a subresource such as a CSR's `approval`).
    pub fn replace(&self, path: &str, object: Value) -> Result<Value, Error> {
        Ok(JsonApi(&self.client).replace(path, &object)?)
    }

    /// DELETE with a propagation policy (`None`: the kind's default).
    pub fn delete(&self, path: &str, propagation: Option<&str>) -> Result<(), Error> {
        Ok(JsonApi(&self.client).delete(path, propagation)?)
    }

    /// Pods in `namespace` matching `selector` and not being deleted.
    pub fn live_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Value>, Error> {
        let pods = self.list(&format!("/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"))?;
        Ok(pods.into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect())
    }

    /// Waits for exactly `count` live pods matching `selector`, all Running and Ready.
    pub fn wait_pods_ready(&mut self, namespace: &str, selector: &str, count: usize) -> Result<Vec<Value>, Error> {
        self.wait(&format!("{count} ready pods {selector} in {namespace}"), |s| {
            let pods = s.live_pods(namespace, selector)?;
            let ready = pods.iter().all(|p| p["status"]["phase"] == "Running" && condition(p, "Ready") == Some("True"));
            Ok((pods.len() == count && ready).then_some(pods))
        })
    }

    /// Serves the metrics APIs from annotations (`kcm_envtest::envtest`'s aggregated metrics API
    /// server), for as long as the run lasts.
    pub fn serve_metrics_apis(&mut self) -> Result<(), Error> {
        self.metrics_apis = Some(self.plane.serve_metrics_apis()?);
        Ok(())
    }

    /// Waits until kube-apiserver's watch cache of `collection` has caught up with `written`
    /// (an object as a write returned it): a list at its resourceVersion with `NotOlderThan`
    /// is served only then, and the cache hands the change to its watches (the controller
    /// manager's informers) as it does so.
    ///
    /// Each kind has its own cache, fed by its own etcd watch, so a controller can see a
    /// second write (a DaemonSet) before a first of another kind (its node's taint): a race
    /// either binary can lose. A scenario whose outcome depends on that order calls this
    /// between the two writes.
    pub fn wait_cached(&mut self, collection: &str, written: &Value) -> Result<(), Error> {
        let name = written["metadata"]["name"]
            .as_str()
            .ok_or_else(|| Error::Scenario("the written object has no name".into()))?;
        let version = written["metadata"]["resourceVersion"]
            .as_str()
            .ok_or_else(|| Error::Scenario("the written object has no version".into()))?;
        let path = format!(
            "{collection}?fieldSelector=metadata.name={name}&resourceVersion={version}&resourceVersionMatch=NotOlderThan"
        );
        // A cache more than a few seconds behind answers 504 ("Too large resource version").
        self.wait(&format!("the watch cache of {collection} at {name}'s write"), |s| {
            match s.client.get_json::<Value>(&path) {
                Ok(_) => Ok(Some(())),
                Err(e) if e.code() == Some(504) => Ok(None),
                Err(source) => Err(JsonApiError::Api { what: format!("GET {path}"), source }.into()),
            }
        })
    }

    /// Waits until `path` no longer exists.
    pub fn wait_gone(&mut self, path: &str) -> Result<(), Error> {
        self.wait(&format!("{path} to be gone"), |s| Ok(s.get(path)?.is_none().then_some(())))
    }
}

/// Whether a Node (JSON) is Ready and free of the node lifecycle's `node.kubernetes.io/` taints
/// (not-ready, unreachable), so that pods land on it.
pub fn node_usable(node: &Value) -> bool {
    let taints = node["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
    condition(node, "Ready") == Some("True")
        && !taints.iter().any(|t| t["key"].as_str().is_some_and(|k| k.starts_with("node.kubernetes.io/")))
}

/// The status of condition `type` of an object.
pub fn condition<'v>(object: &'v Value, type_: &str) -> Option<&'v str> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?["status"].as_str()
}

/// The namespaced kinds compared: API prefix, resource, kind.
pub(super) const COMPARED_KINDS: &[(&str, &str, &str)] = &[
    ("/api/v1", "pods", "Pod"),
    ("/api/v1", "replicationcontrollers", "ReplicationController"),
    ("/api/v1", "services", "Service"),
    ("/api/v1", "endpoints", "Endpoints"),
    ("/api/v1", "configmaps", "ConfigMap"),
    ("/api/v1", "secrets", "Secret"),
    ("/api/v1", "serviceaccounts", "ServiceAccount"),
    ("/api/v1", "resourcequotas", "ResourceQuota"),
    ("/apis/apps/v1", "deployments", "Deployment"),
    ("/apis/apps/v1", "replicasets", "ReplicaSet"),
    ("/apis/apps/v1", "daemonsets", "DaemonSet"),
    ("/apis/discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
    ("/apis/batch/v1", "jobs", "Job"),
    ("/apis/batch/v1", "cronjobs", "CronJob"),
    ("/apis/apps/v1", "statefulsets", "StatefulSet"),
    ("/apis/apps/v1", "controllerrevisions", "ControllerRevision"),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("/apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("/apis/resource.k8s.io/v1", "resourceclaims", "ResourceClaim"),
    ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate"),
];
