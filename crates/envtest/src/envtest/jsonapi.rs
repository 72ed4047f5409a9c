//! The JSON requests the test beds make with their admin client (the side-by-side steps, the
//! chaos bed): GET (`None` on 404), the items of a list, POST, merge patch, PUT and DELETE, each
//! failure named by its method and path (`GET /api/v1/nodes: …`).

use serde_json::{Value, json};
use ureq::http::Method;

use crate::client::{self, Body, Client};

/// Why a request failed (each bed's error wraps it as it is).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request body could not be encoded.
    #[error(transparent)]
    Encode(client::Error),
    /// A request failed (`what`: its method and path).
    #[error("{what}: {source}")]
    Api {
        /// E.g. `GET /api/v1/nodes`.
        what: String,
        /// The API error.
        #[source]
        source: client::Error,
    },
    /// A request's answer is not JSON.
    #[error("{what}: {source}")]
    Decode {
        /// E.g. `POST /api/v1/namespaces`.
        what: String,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
}

/// JSON requests through a client.
#[derive(Clone, Copy)]
pub struct JsonApi<'a>(pub &'a Client);

impl JsonApi<'_> {
    /// GETs an object; `None` when it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Value>, Error> {
        match self.0.get_json::<Value>(path) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(source) => Err(Error::Api { what: format!("GET {path}"), source }),
        }
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, Error> {
        let list: Value = self.0.get_json(path).map_err(|source| Error::Api { what: format!("GET {path}"), source })?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// POSTs `object` to the collection at `path`.
    pub fn create(&self, path: &str, object: &Value) -> Result<Value, Error> {
        self.send(Method::POST, path, Some(body(object)?))
    }

    /// A JSON merge patch.
    pub fn patch(&self, path: &str, patch: &Value) -> Result<Value, Error> {
        let body = Body { content_type: "application/merge-patch+json", ..body(patch)? };
        self.send(Method::PATCH, path, Some(body))
    }

    /// PUT of a whole object (e.g. a subresource such as a CSR's `approval`).
    pub fn replace(&self, path: &str, object: &Value) -> Result<Value, Error> {
        self.send(Method::PUT, path, Some(body(object)?))
    }

    /// DELETE with a propagation policy (`None`: the kind's default).
    pub fn delete(&self, path: &str, propagation: Option<&str>) -> Result<(), Error> {
        let options = propagation
            .map(|policy| body(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})))
            .transpose()?;
        self.send(Method::DELETE, path, options).map(|_| ())
    }

    fn send(&self, method: Method, path: &str, body: Option<Body>) -> Result<Value, Error> {
        let what = format!("{method} {path}");
        let bytes = match self.0.send(method, path, body) {
            Ok(bytes) => bytes,
            Err(source) => return Err(Error::Api { what, source }),
        };
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode { what, source })
    }
}

fn body(value: &Value) -> Result<Body, Error> {
    Body::json(value).map_err(Error::Encode)
}
