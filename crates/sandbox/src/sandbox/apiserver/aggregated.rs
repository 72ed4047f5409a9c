//! The aggregated APIs a cluster with metrics-server and the custom/external metrics adapters
//! registered serves, answered in-process from the store by [`crate::sandbox::metrics_api`].

use std::sync::Arc;

use serde_json::Value;

use crate::apimachinery::errors::BoxError;
use crate::sandbox::metrics_api::{self, Answer, Source};
use crate::sandbox::storage::resources::RESOURCES;
use crate::sandbox::storage::store::Store;
use crate::server::http::Request;

/// The store as a metrics source.
struct StoreSource<'a>(&'a Store);

fn owned(objects: Vec<Arc<Value>>) -> Vec<Value> {
    objects.into_iter().map(|o| (*o).clone()).collect()
}

impl Source for StoreSource<'_> {
    fn pods(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Ok(owned(self.0.list("pods", namespace).0))
    }

    fn services(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Ok(owned(self.0.list("services", namespace).0))
    }

    fn nodes(&self) -> Result<Vec<Value>, BoxError> {
        Ok(owned(self.0.list("nodes", None).0))
    }

    fn object(&self, namespace: &str, group: &str, plural: &str, name: &str) -> Result<Option<Value>, BoxError> {
        let Some(resource) = RESOURCES.iter().find(|r| r.group == group && r.plural == plural && r.namespaced) else {
            return Ok(None);
        };
        Ok(self.0.get(resource.storage_key(), namespace, name).map(|object| {
            let mut object = (*object).clone();
            object["kind"] = resource.kind.into();
            object["apiVersion"] = resource.group_version().into();
            object
        }))
    }
}

/// The answer to a GET under one of the metrics groups, `None` for any other request.
pub fn answer(request: &Request, store: &Store) -> Option<Answer> {
    if request.method != "GET" {
        return None;
    }
    metrics_api::answer(request.path.trim_end_matches('/'), &request.query, &StoreSource(store), jiff::Timestamp::now())
}
