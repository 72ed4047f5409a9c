//! Upstream's `EndpointSet` (`k8s.io/endpointslice/util/endpointset.go`): EndpointSlice
//! endpoints by identity (addresses, hostname, target namespace and name), so that an existing
//! endpoint is matched with its desired version whatever its conditions or node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};

/// `hashEndpoint`'s inputs: what identifies an endpoint. Ordered, so that the set pops
/// endpoints in a stable order (upstream pops in map order).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct EndpointKey {
    addresses: Vec<String>,
    hostname: String,
    namespace: String,
    name: String,
}

impl EndpointKey {
    fn of(endpoint: &Endpoint) -> EndpointKey {
        let mut addresses = endpoint.addresses.clone();
        addresses.sort();
        let target = endpoint.target_ref.as_ref();
        EndpointKey {
            addresses,
            hostname: endpoint.hostname.clone().unwrap_or_default(),
            namespace: target.and_then(|t| t.namespace.clone()).unwrap_or_default(),
            name: target.and_then(|t| t.name.clone()).unwrap_or_default(),
        }
    }
}

/// A set of endpoints by identity; inserting an endpoint with the identity of one in the set
/// replaces it.
#[derive(Debug, Clone, Default)]
pub struct EndpointSet {
    items: BTreeMap<EndpointKey, Endpoint>,
}

impl EndpointSet {
    /// Adds `endpoint`, replacing the one with its identity.
    pub fn insert(&mut self, endpoint: Endpoint) {
        self.items.insert(EndpointKey::of(&endpoint), endpoint);
    }

    /// The endpoint of the set with the identity of `endpoint`.
    pub fn get(&self, endpoint: &Endpoint) -> Option<&Endpoint> {
        self.items.get(&EndpointKey::of(endpoint))
    }

    /// Takes the endpoint with the identity of `endpoint` out of the set.
    pub fn remove(&mut self, endpoint: &Endpoint) -> Option<Endpoint> {
        self.items.remove(&EndpointKey::of(endpoint))
    }

    /// `PopAny`: takes one endpoint out (the first by identity).
    pub fn pop(&mut self) -> Option<Endpoint> {
        self.items.pop_first().map(|(_, endpoint)| endpoint)
    }

    /// How many endpoints the set holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the set holds no endpoints.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// `semanticIgnoreResourceVersion` on a target reference.
fn same_target(a: Option<&ObjectReference>, b: Option<&ObjectReference>) -> bool {
    let strip = |r: Option<&ObjectReference>| r.map(|r| ObjectReference { resource_version: None, ..r.clone() });
    strip(a) == strip(b)
}

/// `EndpointsEqualBeyondHash`: node, zone, the three conditions and the target reference
/// (ignoring its resourceVersion) are the same.
pub fn endpoints_equal_beyond_hash(a: &Endpoint, b: &Endpoint) -> bool {
    let conditions = |e: &Endpoint| {
        let c = e.conditions.clone().unwrap_or_default();
        (c.ready, c.serving, c.terminating)
    };
    a.node_name == b.node_name
        && a.zone == b.zone
        && conditions(a) == conditions(b)
        && same_target(a.target_ref.as_ref(), b.target_ref.as_ref())
}

/// `NewPortMapKey`: the same key for the same set of ports, whatever their order.
pub fn port_map_key(ports: &[EndpointPort]) -> String {
    let mut parts: Vec<String> = ports.iter().map(|p| serde_json::to_string(p).unwrap_or_default()).collect();
    parts.sort();
    parts.join(",")
}
