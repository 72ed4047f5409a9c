//! What the Service registry allocates on create: a cluster IP from the service range and node
//! ports from 30000–32767, as kube-apiserver's allocators do.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use crate::apimachinery::field::Error as FieldError;
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

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix)) };
        u32::from(ip) & mask == u32::from(self.base) & mask
    }
}

/// Fills in `clusterIP(s)`, IP families and node ports of a new Service.
pub fn allocate(resource: &ResourceType, service: &mut Value, txn: &Txn<'_>, range: ServiceRange) -> ApiResult<()> {
    let name = service["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let kind = service["spec"]["type"].as_str().unwrap_or("ClusterIP").to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let taken = used_addresses(txn);
    let requested = service["spec"]["clusterIP"].as_str().unwrap_or_default().to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        "" => next_free(range, &taken)
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?
            .to_string(),
        wanted => {
            let parsed: Ipv4Addr =
                wanted.parse().map_err(|_| invalid_ip(resource, &name, wanted, "must be a valid IP address"))?;
            if !range.contains(parsed) {
                let detail = format!(
                    "the provided IP ({wanted}) is not in the valid range. The range of valid IPs is {}/{}",
                    range.base, range.prefix
                );
                return Err(invalid_ip(resource, &name, wanted, &detail));
            }
            if taken.contains(&parsed) {
                let detail = format!("failed to allocate IP {wanted}: provided IP is already allocated");
                return Err(invalid_ip(resource, &name, wanted, &detail));
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
    ApiError::invalid(resource, name, &[FieldError::invalid_json("spec.clusterIPs", &json!(ip), detail)])
}

fn used_addresses(txn: &Txn<'_>) -> Vec<Ipv4Addr> {
    txn.list("services", None)
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str().and_then(|ip| ip.parse().ok()))
        .collect()
}

fn next_free(range: ServiceRange, taken: &[Ipv4Addr]) -> Option<Ipv4Addr> {
    // Skip the network address; hand out the lowest free one, as the bitmap allocator does.
    (1..range.size().saturating_sub(1))
        .map(|offset| Ipv4Addr::from(u32::from(range.base) + offset))
        .find(|ip| !taken.contains(ip))
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

    #[test]
    fn allocates_the_lowest_free_address_and_node_ports() {
        let services = find("", "v1", "services").unwrap();
        let store = Store::default();
        let allocated = store
            .write::<_, ApiError>(|txn| {
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
        assert!(outside.unwrap_err().message().contains("is not in the valid range"));
    }
}
