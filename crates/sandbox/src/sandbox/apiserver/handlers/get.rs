//! GET of one object (`endpoints/handlers/get.go`'s `GetResource`).

use serde_json::Value;

use crate::sandbox::apiserver::convert;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};

/// `GetResource`: the object as served (the main resource or its `status`).
pub fn get(api: &ApiServer, target: &Target, name: &str) -> ApiResult<Value> {
    let resource = target.resource;
    let ns = target.namespace.as_deref().unwrap_or_default();
    let object = api.store.get(resource.storage_key(), ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
    let object = convert::to_external(resource, &object);
    Ok(match target.subresource.as_deref() {
        Some("status") | None => object,
        Some(_) => unreachable!("other subresources are routed to subresources::handle"),
    })
}
