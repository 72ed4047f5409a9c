//! `widgets.example.com`: a namespaced custom resource for the tests that need one (real
//! server only: the sandbox serves no CustomResourceDefinitions), with a `/scale` subresource
//! (`spec.replicas`, `status.replicas`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm::client::{Api, PostParams};
use serde_json::{Value, json};

use super::{Cluster, eventually, from};

/// A Widget: `apiVersion`, `kind`, `metadata` and whatever `spec` it has.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Widget {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
}

impl k8s_openapi::Resource for Widget {
    const API_VERSION: &'static str = "example.com/v1";
    const GROUP: &'static str = "example.com";
    const KIND: &'static str = "Widget";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "widgets";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Widget {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A Widget named `name` with `spec`.
pub fn widget(name: &str, spec: Value) -> Widget {
    from(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}))
}

/// Defines `widgets.example.com` and waits until it is established.
pub fn define(cluster: &Cluster) {
    let definitions = Api::<CustomResourceDefinition>::cluster(&cluster.client);
    definitions.create(&definition(), &PostParams::default()).expect("CRD created");
    eventually("the CRD established", || {
        let conditions = definitions.get("widgets.example.com").ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    });
}

fn definition() -> CustomResourceDefinition {
    from(kcm_envtest::envtest::widgets_definition())
}
