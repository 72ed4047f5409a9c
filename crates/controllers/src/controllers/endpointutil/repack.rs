//! Upstream's `RepackSubsets` (`pkg/api/v1/endpoints/util.go`): the canonical form of an
//! Endpoints object's subsets, one subset per distinct set of addresses with every port those
//! addresses serve. An address that is not ready on any port counts as not ready there.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};

/// An `EndpointPort` as a map key (Go uses the struct itself).
type PortKey = (Option<String>, i32, Option<String>, Option<String>);

fn port_key(port: &EndpointPort) -> PortKey {
    (port.name.clone(), port.port, port.protocol.clone(), port.app_protocol.clone())
}

/// The sentinel port upstream maps port-less subsets to.
const NO_PORT: PortKey = (None, -1, None, None);

/// Addresses by identity (`addressKey`: IP and target UID); the first occurrence is kept.
#[derive(Default)]
struct Addresses {
    all: Vec<EndpointAddress>,
    index: HashMap<(String, String), usize>,
}

impl Addresses {
    fn intern(&mut self, address: &EndpointAddress) -> usize {
        let uid = address.target_ref.as_ref().and_then(|r| r.uid.clone()).unwrap_or_default();
        let all = &mut self.all;
        *self.index.entry((address.ip.clone(), uid)).or_insert_with(|| {
            all.push(address.clone());
            all.len() - 1
        })
    }
}

/// `LessEndpointAddress`: by IP, then target UID (no target first).
pub fn compare_addresses(a: &EndpointAddress, b: &EndpointAddress) -> Ordering {
    a.ip.as_bytes().cmp(b.ip.as_bytes()).then_with(|| {
        let uid = |x: &EndpointAddress| x.target_ref.as_ref().map(|r| r.uid.clone().unwrap_or_default());
        uid(a).cmp(&uid(b))
    })
}

/// `RepackSubsets`.
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let mut addresses = Addresses::default();
    // Port → (address → ready), not ready trumping ready (`mapAddressByPort`).
    let mut by_port: BTreeMap<PortKey, (Option<EndpointPort>, BTreeMap<usize, bool>)> = BTreeMap::new();
    for subset in subsets {
        let ports: Vec<(PortKey, Option<EndpointPort>)> = match subset.ports.as_deref() {
            None | Some([]) => vec![(NO_PORT, None)],
            Some(ports) => ports.iter().map(|p| (port_key(p), Some(p.clone()))).collect(),
        };
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset.not_ready_addresses.iter().flatten().map(|a| (a, false));
        let all: Vec<(&EndpointAddress, bool)> = ready.chain(not_ready).collect();
        for (key, port) in ports {
            let entry = by_port.entry(key).or_insert_with(|| (port, BTreeMap::new()));
            for (address, is_ready) in &all {
                let index = addresses.intern(address);
                let was = entry.1.entry(index).or_insert(*is_ready);
                *was = *was && *is_ready;
            }
        }
    }
    // Address sets → the ports they serve.
    let mut groups: BTreeMap<Vec<(usize, bool)>, Vec<EndpointPort>> = BTreeMap::new();
    for (_, (port, members)) in by_port {
        let ports = groups.entry(members.into_iter().collect()).or_default();
        ports.extend(port.filter(|p| p.port > 0));
    }
    let mut repacked: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(members, ports)| {
            let pick = |ready: bool| {
                let mut list: Vec<EndpointAddress> =
                    members.iter().filter(|(_, r)| *r == ready).map(|(i, _)| addresses.all[*i].clone()).collect();
                list.sort_by(compare_addresses);
                (!list.is_empty()).then_some(list)
            };
            let mut ports = ports;
            ports.sort_by_key(port_key);
            EndpointSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect();
    // Upstream orders subsets by a hash of their content; any stable order does.
    repacked.sort_by_cached_key(|s| serde_json::to_string(s).unwrap_or_default());
    repacked
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn address(ip: &str, uid: &str) -> EndpointAddress {
        let target = ObjectReference { uid: Some(uid.into()), ..ObjectReference::default() };
        EndpointAddress { ip: ip.into(), target_ref: Some(target), ..EndpointAddress::default() }
    }

    fn port(name: &str, number: i32) -> EndpointPort {
        EndpointPort { name: Some(name.into()), port: number, protocol: Some("TCP".into()), app_protocol: None }
    }

    fn subset(ready: &[EndpointAddress], not_ready: &[EndpointAddress], ports: &[EndpointPort]) -> EndpointSubset {
        EndpointSubset {
            addresses: (!ready.is_empty()).then(|| ready.to_vec()),
            not_ready_addresses: (!not_ready.is_empty()).then(|| not_ready.to_vec()),
            ports: (!ports.is_empty()).then(|| ports.to_vec()),
        }
    }

    #[test]
    fn one_subset_per_pod_and_port_is_merged() {
        let (a, b) = (address("10.0.0.2", "b"), address("10.0.0.1", "a"));
        let input = [
            subset(std::slice::from_ref(&a), &[], &[port("http", 80)]),
            subset(std::slice::from_ref(&a), &[], &[port("https", 443)]),
            subset(std::slice::from_ref(&b), &[], &[port("http", 80)]),
            subset(std::slice::from_ref(&b), &[], &[port("https", 443)]),
        ];
        let repacked = repack_subsets(&input);
        assert_eq!(repacked, [subset(&[b, a], &[], &[port("http", 80), port("https", 443)])]);
    }

    #[test]
    fn not_ready_trumps_ready_and_distinct_address_sets_stay_apart() {
        let (a, b) = (address("10.0.0.1", "a"), address("10.0.0.2", "b"));
        let input = [
            subset(std::slice::from_ref(&a), &[], &[port("http", 80)]),
            subset(&[], std::slice::from_ref(&a), &[port("http", 80)]),
            subset(std::slice::from_ref(&b), &[], &[port("http", 80)]),
            subset(std::slice::from_ref(&b), &[], &[port("metrics", 9090)]),
        ];
        let repacked = repack_subsets(&input);
        assert_eq!(repacked.len(), 2);
        assert!(repacked.contains(&subset(std::slice::from_ref(&b), &[], &[port("metrics", 9090)])));
        assert!(repacked.contains(&subset(&[b], &[a], &[port("http", 80)])));
    }

    #[test]
    fn same_ip_of_different_pods_is_two_addresses_and_portless_subsets_are_kept() {
        let input = [subset(&[address("10.0.0.1", "x"), address("10.0.0.1", "y")], &[], &[])];
        let repacked = repack_subsets(&input);
        assert_eq!(repacked, [subset(&[address("10.0.0.1", "x"), address("10.0.0.1", "y")], &[], &[])]);
        assert!(repack_subsets(&[]).is_empty());
    }
}
