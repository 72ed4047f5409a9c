//! A small audit log: who made which resource request, like the `user`, `verb`, `objectRef`
//! and `responseStatus.code` of kube-apiserver's audit events at the Metadata level. Tests read
//! it to check which identity a controller acts as, and how its writes were answered (e.g. how
//! many met a 409 Conflict, and whether a writer sent a copy older than its own last write).
//! A request is logged once answered (a watch once it starts).

use std::collections::VecDeque;

use parking_lot::Mutex;

/// How many requests are kept; older ones are dropped.
const CAPACITY: usize = 20_000;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// The authenticated user name, e.g. `system:serviceaccount:kube-system:replicaset-controller`.
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: String,
    /// The resource's plural, e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status`; empty for none.
    pub subresource: String,
    /// The namespace; empty for cluster-scoped requests.
    pub namespace: String,
    /// The object's name; empty for collection requests.
    pub name: String,
    /// The request's `User-Agent` header.
    pub user_agent: String,
    /// Authorization refused the request (403 Forbidden). For a refused non-resource request
    /// `resource` is empty and `name` holds the path.
    pub forbidden: bool,
    /// The HTTP status code of the answer (200 for a watch that started).
    pub code: u16,
    /// Of an update (PUT): the resourceVersion of the object sent, which the write was based
    /// on (a Conflict when it is not the stored one); empty otherwise.
    pub request_resource_version: String,
    /// Of a successful update: the resourceVersion the write produced; empty otherwise.
    pub response_resource_version: String,
}

/// The most recent requests.
#[derive(Default)]
pub struct AuditLog {
    entries: Mutex<VecDeque<AuditEntry>>,
}

impl AuditLog {
    /// Appends an entry, dropping the oldest past the capacity.
    pub fn record(&self, entry: AuditEntry) {
        let mut entries = self.entries.lock();
        if entries.len() == CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The kept entries, oldest first.
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.entries.lock().iter().cloned().collect()
    }
}

/// kube-apiserver's request verb for an HTTP method on a collection or an object.
pub fn verb(method: &str, named: bool, watch: bool) -> &'static str {
    match (method, named) {
        _ if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_follow_kube_apiserver() {
        assert_eq!(verb("GET", false, true), "watch");
        assert_eq!(verb("GET", true, false), "get");
        assert_eq!(verb("GET", false, false), "list");
        assert_eq!(verb("DELETE", false, false), "deletecollection");
        assert_eq!(verb("POST", false, false), "create");
    }

    #[test]
    fn keeps_the_most_recent_entries() {
        let log = AuditLog::default();
        for i in 0..CAPACITY + 5 {
            log.record(AuditEntry {
                user: format!("u{i}"),
                verb: "get".into(),
                resource: "pods".into(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
                user_agent: String::new(),
                forbidden: false,
                code: 200,
                request_resource_version: String::new(),
                response_resource_version: String::new(),
            });
        }
        let entries = log.entries();
        assert_eq!(entries.len(), CAPACITY);
        assert_eq!(entries[0].user, "u5");
    }
}
