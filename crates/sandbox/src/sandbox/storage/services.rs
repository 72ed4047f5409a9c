//! What the Service registry allocates on create: a cluster IP and node ports from
//! 30000–32767, as kube-apiserver's allocators do. With `MultiCIDRServiceAllocator` (GA in
//! 1.34) a cluster IP belongs to a ServiceCIDR and is recorded as an IPAddress object named by
//! the IP (parent: the Service), deleted with the Service. A free IP comes from the service
//! range first (upstream keeps writing its old bitmap while `DisableAllocatorDualWrite` is
//! off), then from the other ServiceCIDRs; any IP given must lie in a ServiceCIDR that is
//! ready (`Ready` not False, or no condition yet) and not being deleted. The default
//! `kubernetes` ServiceCIDR, made from the service range, exists from the start.

use std::net::{IpAddr, Ipv4Addr};

use serde_json::{Value, json};

use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::net::Cidr;
use crate::apimachinery::strconv::quote;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::store::Txn;

/// `--service-cluster-ip-range`'s default.
pub const DEFAULT_SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The service CIDR the allocator hands addresses from.
#[derive(Debug, Clone, Copy)]
pub struct ServiceRange {
    /// The network address.
    pub base: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

impl Default for ServiceRange {
    fn default() -> Self {
        ServiceRange { base: DEFAULT_SERVICE_RANGE.0, prefix: DEFAULT_SERVICE_RANGE.1 }
    }
}

impl ServiceRange {
    /// The first usable address: the `kubernetes` Service's.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + 1)
    }

    fn size(&self) -> u32 {
        1u32 << (32 - u32::from(self.prefix))
    }

    /// The range as a CIDR: the default `kubernetes` ServiceCIDR's.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.base, self.prefix)
    }
}

/// `ipaddress.kubernetes.io/managed-by`'s value on the IPAddresses the allocators create.
pub const IP_ALLOCATOR: &str = "ipallocator.k8s.io";

/// Fills in `clusterIP(s)`, IP families and node ports of a new Service.
pub fn allocate(resource: &ResourceType, service: &mut Value, txn: &Txn<'_>, range: ServiceRange) -> ApiResult<()> {
    let name = service["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let kind = service["spec"]["type"].as_str().unwrap_or("ClusterIP").to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let taken = used_addresses(txn);
    let ready = ready_prefixes(txn);
    let requested = service["spec"]["clusterIP"].as_str().unwrap_or_default().to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        "" => next_free(range, &ready, &taken)
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?
            .to_string(),
        wanted => {
            let parsed: Ipv4Addr =
                wanted.parse().map_err(|_| invalid_ip(resource, &name, wanted, "must be a valid IP address"))?;
            let reason = if !ready.iter().any(|p| p.contains_service_ip(parsed.into())) {
                Some("the provided network does not match the current range")
            } else if taken.contains(&parsed) {
                Some("provided IP is already allocated")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(invalid_ip(resource, &name, wanted, &format!("failed to allocate IP {wanted}: {reason}")));
            }
            wanted.to_string()
        }
    };
    service["spec"]["clusterIP"] = ip.clone().into();
    service["spec"]["clusterIPs"] = json!([ip]);
    service["spec"]["ipFamilies"] = json!(["IPv4"]);
    if service["spec"]["ipFamilyPolicy"].is_null() {
        service["spec"]["ipFamilyPolicy"] = "SingleStack".into();
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        allocate_node_ports(service, txn)?;
    }
    Ok(())
}

fn invalid_ip(resource: &ResourceType, name: &str, ip: &str, detail: &str) -> ApiError {
    // A field error shows the `[]string` as JSON.
    let rendered = format!("[{}]", quote(ip));
    ApiError::invalid(resource, name, &[FieldError::invalid("spec.clusterIPs", rendered, detail)])
}

/// The IPv4 prefixes of the ServiceCIDRs addresses may be allocated from (`isReady` and not
/// being deleted).
fn ready_prefixes(txn: &Txn<'_>) -> Vec<Cidr> {
    let ready = |cidr: &Value| {
        let conditions = cidr["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let condition = conditions.iter().find(|c| c["type"] == "Ready");
        cidr["metadata"]["deletionTimestamp"].is_null() && condition.is_none_or(|c| c["status"] == "True")
    };
    txn.list("servicecidrs", None)
        .iter()
        .filter(|cidr| ready(cidr))
        .flat_map(|cidr| cidr["spec"]["cidrs"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().and_then(|c| Cidr::parse(c).ok()))
        .filter(|c| !c.is_ipv6())
        .collect()
}

/// The IPv4 addresses in use: the IPAddress objects, and the Services' own IPs.
fn used_addresses(txn: &Txn<'_>) -> Vec<Ipv4Addr> {
    let services = txn.list("services", None);
    let by_services = services.iter().filter_map(|s| s["spec"]["clusterIP"].as_str().and_then(|ip| ip.parse().ok()));
    let addresses = txn.list("ipaddresses", None);
    let by_objects = addresses.iter().filter_map(|a| a["metadata"]["name"].as_str().and_then(|ip| ip.parse().ok()));
    by_services.chain(by_objects).collect()
}

/// The lowest free address of the service range (as its bitmap allocator), else of the
/// ready ServiceCIDRs in turn; it must lie in a ready ServiceCIDR.
fn next_free(range: ServiceRange, ready: &[Cidr], taken: &[Ipv4Addr]) -> Option<Ipv4Addr> {
    let allocatable = |ip: &Ipv4Addr| !taken.contains(ip) && ready.iter().any(|p| p.contains_service_ip((*ip).into()));
    let flag_range = (1..range.size().saturating_sub(1)).map(|offset| Ipv4Addr::from(u32::from(range.base) + offset));
    let others = ready.iter().flat_map(|p| {
        let (IpAddr::V4(base), IpAddr::V4(last)) = (p.address, p.last()) else { return 0..0 };
        u32::from(base).saturating_add(1)..u32::from(last)
    });
    flag_range.chain(others.map(Ipv4Addr::from)).find(allocatable)
}

/// Records the Service's cluster IP as an IPAddress object (`createIPAddress`).
pub fn record_address(txn: &mut Txn<'_>, service: &Value) {
    let Some(ip) = service["spec"]["clusterIP"].as_str().filter(|ip| ip.parse::<IpAddr>().is_ok()) else { return };
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let mut address = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": ip, "uid": crate::random::uuid(), "creationTimestamp": crate::sandbox::storage::objects::now(),
            "labels": {"ipaddress.kubernetes.io/ip-family": family, "ipaddress.kubernetes.io/managed-by": IP_ALLOCATOR}},
        "spec": {"parentRef": {"resource": "services",
            "namespace": service["metadata"]["namespace"], "name": service["metadata"]["name"]}},
    });
    address["metadata"]["resourceVersion"] = txn.next_revision().to_string().into();
    txn.put("ipaddresses", address);
}

/// Deletes the IPAddress objects of a Service that is gone (`Release`).
pub fn release_addresses(txn: &mut Txn<'_>, service: &Value) {
    let ips = service["spec"]["clusterIPs"].as_array().cloned().unwrap_or_default();
    for ip in ips.iter().filter_map(Value::as_str) {
        let Some(address) = txn.get("ipaddresses", "", ip) else { continue };
        let parent = &address["spec"]["parentRef"];
        if parent["resource"] == "services"
            && parent["namespace"] == service["metadata"]["namespace"]
            && parent["name"] == service["metadata"]["name"]
        {
            txn.remove("ipaddresses", "", ip);
        }
    }
}

fn allocate_node_ports(service: &mut Value, txn: &Txn<'_>) -> ApiResult<()> {
    let mut taken: Vec<i64> = txn
        .list("services", None)
        .iter()
        .flat_map(|s| s["spec"]["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["nodePort"].as_i64())
        .collect();
    if let Some(ports) = service["spec"]["ports"].as_array_mut() {
        for port in ports {
            if port["nodePort"].as_i64().is_none_or(|p| p == 0) {
                let free = NODE_PORTS
                    .clone()
                    .find(|p| !taken.contains(p))
                    .ok_or_else(|| ApiError::internal("node port range is full"))?;
                port["nodePort"] = free.into();
                taken.push(free);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::resources::find;
    use crate::sandbox::storage::store::Store;

    fn service_cidr(name: &str, cidr: &str, ready: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"cidrs": [cidr]},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    #[test]
    fn allocates_the_lowest_free_address_and_node_ports() {
        let services = find("", "v1", "services").unwrap();
        let store = Store::default();
        let allocated = store
            .write::<_, ApiError>(|txn| {
                txn.put("servicecidrs", service_cidr("kubernetes", "10.96.0.0/12", "True"));
                let mut first = json!({"metadata": {"name": "kubernetes", "namespace": "default"}, "spec": {"ports": [{"port": 443}]}});
                allocate(services, &mut first, txn, ServiceRange::default())?;
                txn.put("services", first.clone());
                let mut second = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
                allocate(services, &mut second, txn, ServiceRange::default())?;
                Ok((first, second))
            })
            .unwrap();
        assert_eq!(allocated.0["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(allocated.1["spec"]["clusterIP"], "10.96.0.2");
        assert_eq!(allocated.1["spec"]["ports"][0]["nodePort"], 30000);
        let outside = store.write(|txn| {
            let mut s = json!({"metadata": {"name": "x"}, "spec": {"clusterIP": "192.168.0.1"}});
            allocate(services, &mut s, txn, ServiceRange::default())
        });
        let message = outside.unwrap_err().message().to_string();
        assert!(
            message.contains("failed to allocate IP 192.168.0.1: the provided network does not match"),
            "{message}"
        );
    }

    #[test]
    fn ips_of_ready_service_cidrs_are_recorded_and_released() {
        let services = find("", "v1", "services").unwrap();
        let store = Store::default();
        let request = |ip: &str| json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"clusterIP": ip}});
        store
            .write::<_, ApiError>(|txn| {
                txn.put("servicecidrs", service_cidr("extra", "192.168.0.0/24", "True"));
                txn.put("servicecidrs", service_cidr("not-ready", "172.16.0.0/24", "False"));
                Ok(())
            })
            .unwrap();
        let refused = store.write(|txn| allocate(services, &mut request("172.16.0.5"), txn, ServiceRange::default()));
        assert!(refused.unwrap_err().message().contains("does not match the current range"));
        let broadcast =
            store.write(|txn| allocate(services, &mut request("192.168.0.255"), txn, ServiceRange::default()));
        assert!(broadcast.is_err(), "a ServiceCIDR never allocates its broadcast address");
        let service = store
            .write::<_, ApiError>(|txn| {
                let mut service = request("192.168.0.5");
                allocate(services, &mut service, txn, ServiceRange::default())?;
                txn.put("services", service.clone());
                record_address(txn, &service);
                Ok(service)
            })
            .unwrap();
        let address = store.get("ipaddresses", "", "192.168.0.5").expect("an IPAddress");
        assert_eq!(address["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"], IP_ALLOCATOR);
        assert_eq!(address["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"], "IPv4");
        assert_eq!(address["spec"]["parentRef"], json!({"resource": "services", "namespace": "default", "name": "db"}));
        let taken = store.write(|txn| allocate(services, &mut request("192.168.0.5"), txn, ServiceRange::default()));
        assert!(taken.unwrap_err().message().contains("provided IP is already allocated"));
        store
            .write::<_, ApiError>(|txn| {
                txn.remove("services", "default", "db");
                release_addresses(txn, &service);
                Ok(())
            })
            .unwrap();
        assert!(store.get("ipaddresses", "", "192.168.0.5").is_none());
    }

    #[test]
    fn a_full_service_range_falls_over_to_the_other_service_cidrs() {
        let small = ServiceRange { base: Ipv4Addr::new(10, 0, 0, 0), prefix: 30 };
        let ready = vec![Cidr::parse("10.0.0.0/30").unwrap(), Cidr::parse("10.1.0.0/29").unwrap()];
        let taken = vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
        assert_eq!(next_free(small, &ready, &taken), Some(Ipv4Addr::new(10, 1, 0, 1)));
    }
}
