//! Networks in CIDR notation, as Go's `net.ParseCIDR` and `k8s.io/utils/net` read them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// Text that is not a CIDR, as Go's `net.ParseError` words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {text}")]
pub struct ParseCidrError {
    /// The text.
    pub text: String,
}

/// An IP network in CIDR notation, stored with the host bits cleared as Go's `ParseCIDR` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network address (host bits zero).
    pub address: IpAddr,
    /// The number of leading bits that form the network (`16` in `10.244.0.0/16`).
    pub prefix_len: u8,
}

impl Cidr {
    /// Parses `10.244.0.0/16` or `fd00::/108`.
    pub fn parse(text: &str) -> Result<Cidr, ParseCidrError> {
        let invalid = || ParseCidrError { text: text.to_string() };
        let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
        let address: IpAddr = address.parse().map_err(|_| invalid())?;
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let prefix_len: u8 = prefix.parse().map_err(|_| invalid())?;
        let address = match address {
            IpAddr::V4(v4) if prefix_len <= 32 => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix_len)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & mask).into())
            }
            IpAddr::V6(v6) if prefix_len <= 128 => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix_len)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
            _ => return Err(invalid()),
        };
        Ok(Cidr { address, prefix_len })
    }

    /// Whether this is an IPv6 network (`netutils.IsIPv6CIDR`).
    pub fn is_ipv6(&self) -> bool {
        self.address.is_ipv6()
    }

    /// The network as a 128-bit number with its prefix counted in 128 bits, so that both
    /// families compare alike; `None` for the other family's addresses.
    fn bits(&self) -> (u128, u32, bool) {
        match self.address {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), u32::from(self.prefix_len), false),
            IpAddr::V6(v6) => (u128::from(v6), u32::from(self.prefix_len), true),
        }
    }

    /// Whether `ip` (of either family) lies in the network (`netip.Prefix.Contains`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (base, prefix, v6) = self.bits();
        let (value, width) = match ip {
            IpAddr::V4(v4) if !v6 => (u128::from(u32::from(v4)), 32),
            IpAddr::V6(v6addr) if v6 => (u128::from(v6addr), 128),
            _ => return false,
        };
        let host_bits = width - prefix;
        value.checked_shr(host_bits).unwrap_or(0) == base.checked_shr(host_bits).unwrap_or(0)
    }

    /// Whether the two networks share an address (`netip.Prefix.Overlaps`): same family, and
    /// one contains the other's network address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        if self.is_ipv6() != other.is_ipv6() {
            return false;
        }
        let shorter = if self.prefix_len <= other.prefix_len { self } else { other };
        let longer = if shorter == self { other } else { self };
        shorter.contains(longer.address)
    }

    /// Whether `other` lies wholly in this network (`servicecidr.ContainsPrefix`'s test).
    pub fn contains_prefix(&self, other: &Cidr) -> bool {
        self.overlaps(other) && self.prefix_len <= other.prefix_len
    }

    /// The last address of the network (all host bits set: IPv4's broadcast address).
    pub fn last(&self) -> IpAddr {
        let (base, prefix, v6) = self.bits();
        let width = if v6 { 128 } else { 32 };
        let host = u128::MAX.checked_shr(128 - (width - prefix)).filter(|_| width > prefix).unwrap_or(0);
        if v6 { IpAddr::V6((base | host).into()) } else { IpAddr::V4(Ipv4Addr::from((base | host) as u32)) }
    }

    /// `servicecidr.PrefixContainsIP`: in the network and neither its network address nor,
    /// for IPv4, its broadcast address, which a ServiceCIDR never allocates.
    pub fn contains_service_ip(&self, ip: IpAddr) -> bool {
        ip != self.address && !(ip.is_ipv4() && ip == self.last()) && self.contains(ip)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect("a CIDR")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an IP")
    }

    #[test]
    fn containment_and_overlap_in_both_families() {
        assert!(cidr("192.168.0.0/24").contains(ip("192.168.0.23")));
        assert!(!cidr("192.168.0.0/24").contains(ip("192.168.1.23")));
        assert!(!cidr("192.168.0.0/24").contains(ip("2001:db2::1")));
        assert!(cidr("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(cidr("2001:db2::/64").contains(ip("2001:db2::ffff:ffff:ffff:ffff")));
        assert!(!cidr("2001:db2::/64").contains(ip("2001:db2:0:1::")));
        assert!(cidr("192.168.0.0/16").overlaps(&cidr("192.168.0.0/24")));
        assert!(cidr("192.168.0.0/24").overlaps(&cidr("192.168.0.0/16")));
        assert!(!cidr("192.168.255.0/26").overlaps(&cidr("192.168.0.0/24")));
        assert!(!cidr("192.168.0.0/24").overlaps(&cidr("2001:db2::/64")));
        assert!(cidr("192.168.0.0/16").contains_prefix(&cidr("192.168.0.0/24")));
        assert!(!cidr("192.168.0.0/24").contains_prefix(&cidr("192.168.0.0/16")));
        assert!(cidr("2001:db2::/48").contains_prefix(&cidr("2001:db2::/64")));
        assert!(cidr("2001:db2::/64").contains_prefix(&cidr("2001:db2::/64")));
    }

    #[test]
    fn service_ips_exclude_the_network_and_ipv4_broadcast_addresses() {
        let v4 = cidr("192.168.0.0/26");
        assert_eq!(v4.last(), ip("192.168.0.63"));
        assert!(!v4.contains_service_ip(ip("192.168.0.0")));
        assert!(!v4.contains_service_ip(ip("192.168.0.63")));
        assert!(v4.contains_service_ip(ip("192.168.0.62")));
        let v6 = cidr("2001:db2::/64");
        assert!(!v6.contains_service_ip(ip("2001:db2::")));
        assert!(v6.contains_service_ip(ip("2001:0db2::ffff:ffff:ffff:ffff")));
        assert_eq!(cidr("10.0.0.1/32").last(), ip("10.0.0.1"));
    }
}
