//! Server-side printing: `meta.k8s.io/v1` `Table` answers for `Accept:
//! application/json;as=Table;g=meta.k8s.io;v=v1`, as `kubectl get` asks for. Mirrors
//! kube-apiserver's `asTable` (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/response.go),
//! the printers' `TableGenerator.GenerateTable` (pkg/printers/tablegenerator.go, always `Wide`
//! on the server: kubectl hides priority-1 columns itself) and, for kinds without a printer,
//! `rest.NewDefaultTableConvertor` (Name and Created At).

pub mod duration;
mod others;
mod printers;

use std::cell::Cell;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::storage::resources::ResourceType;
use crate::server::http::Request;

pub use printers::{Column, Row, printer_for};

/// `metav1.TableOptions.IncludeObject`: what each row carries as its `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// `None`: no object.
    Nothing,
    /// `Metadata` (the default): the object as a `PartialObjectMetadata`.
    Metadata,
    /// `Object`: the whole object.
    Object,
}

/// How a table answer is asked for: the Table's group version and the request's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRequest {
    /// `meta.k8s.io/v1beta1` rather than `meta.k8s.io/v1`.
    pub v1beta1: bool,
    /// What each row's `object` holds (`includeObject`).
    pub include_object: IncludeObject,
}

impl TableRequest {
    /// The request's `includeObject` option, validated as `ValidateTableOptions` does.
    pub fn from_request(request: &Request, v1beta1: bool) -> ApiResult<TableRequest> {
        let include_object = match request.query_param("includeObject").unwrap_or_default() {
            "" | "Metadata" => IncludeObject::Metadata,
            "None" => IncludeObject::Nothing,
            "Object" => IncludeObject::Object,
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unable to convert to Table as requested: includeObject: Unsupported value: {other:?}: \
                     supported values: \"Metadata\", \"None\", \"Object\""
                )));
            }
        };
        Ok(TableRequest { v1beta1, include_object })
    }

    fn api_version(&self) -> &'static str {
        if self.v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" }
    }

    /// Renders an answer (one object or a list; a `Status` passes through) as a Table.
    /// `headers`: with column definitions (a watch sends them with its first event only).
    pub fn render(&self, resource: &ResourceType, body: Value, headers: bool, now: Timestamp) -> Value {
        if body["kind"] == "Status" {
            return body;
        }
        let printer = printer_for(resource.group, resource.kind);
        let is_list = body.get("items").is_some_and(Value::is_array);
        let objects: Vec<&Value> =
            if is_list { body["items"].as_array().into_iter().flatten().collect() } else { vec![&body] };
        let rows: Vec<Value> = objects
            .iter()
            .map(|object| {
                let row = match printer {
                    Some(printer) => (printer.row)(object, now),
                    None => default_row(object),
                };
                self.row_json(resource, row, object)
            })
            .collect();
        let mut metadata = serde_json::Map::new();
        let list_meta = &body["metadata"];
        let mut copy = |field: &str| {
            if let Some(value) = list_meta.get(field).filter(|v| !v.is_null() && *v != "") {
                metadata.insert(field.into(), value.clone());
            }
        };
        copy("resourceVersion");
        if is_list {
            copy("continue");
            copy("remainingItemCount");
        }
        let columns = match (headers, printer) {
            (false, _) => Value::Null,
            (true, Some(printer)) => Value::Array(printer.columns.iter().map(Column::to_json).collect()),
            (true, None) => Value::Array(DEFAULT_COLUMNS.iter().map(Column::to_json).collect()),
        };
        // The default convertor appends to a nil slice: an empty list has `rows: null`.
        let rows = if rows.is_empty() && printer.is_none() { Value::Null } else { Value::Array(rows) };
        json!({
            "kind": "Table",
            "apiVersion": self.api_version(),
            "metadata": metadata,
            "columnDefinitions": columns,
            "rows": rows,
        })
    }

    fn row_json(&self, resource: &ResourceType, row: Row, object: &Value) -> Value {
        let object = match self.include_object {
            IncludeObject::Nothing => Value::Null,
            // Converted to the resource's version, as `asTable` does: list items get their
            // kind and apiVersion, which clients need to decode the row's object.
            IncludeObject::Object => {
                let mut object = object.clone();
                if let Some(fields) = object.as_object_mut() {
                    fields.insert("kind".into(), json!(resource.kind));
                    fields.insert("apiVersion".into(), json!(resource.group_version()));
                }
                object
            }
            IncludeObject::Metadata => json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": self.api_version(),
                "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }),
        };
        let mut json = json!({"cells": row.cells, "object": object});
        if !row.conditions.is_empty() {
            json["conditions"] = Value::Array(row.conditions);
        }
        json
    }
}

/// A watch's table rendering: the column definitions go with the first event only, as the
/// watch encoder sets `NoHeaders` after its first object (handlers/response.go).
#[derive(Debug)]
pub struct WatchTable {
    /// The table options of the watch request.
    pub request: TableRequest,
    headers_sent: Cell<bool>,
}

impl WatchTable {
    /// A rendering that has not sent the column definitions yet.
    pub fn new(request: TableRequest) -> WatchTable {
        WatchTable { request, headers_sent: Cell::new(false) }
    }

    /// One event's object as a Table: the column definitions with the first call only.
    pub fn render(&self, resource: &ResourceType, object: Value) -> Value {
        let headers = !self.headers_sent.replace(true);
        self.request.render(resource, object, headers, Timestamp::now())
    }
}

/// `rest.defaultTableConvertor`'s columns.
const DEFAULT_COLUMNS: &[Column] = &[
    Column::new("Name", "string", "name", printers::NAME_DOC, 0),
    Column::new("Created At", "date", "", printers::CREATED_DOC, 0),
];

/// `rest.defaultTableConvertor`'s row: the name and the creation time in RFC 3339 (UTC); an
/// object without one shows Go's zero time.
fn default_row(object: &Value) -> Row {
    let created = match duration::timestamp(object.pointer("/metadata/creationTimestamp")) {
        Some(at) => at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => "0001-01-01T00:00:00Z".to_string(),
    };
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    Row::new(vec![json!(name), json!(created)])
}

#[cfg(test)]
mod tests;
