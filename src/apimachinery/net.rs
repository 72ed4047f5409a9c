//! Networks in CIDR notation, as Go's `net.ParseCIDR` and `k8s.io/utils/net` read them.

use std::fmt;
use std::net::IpAddr;

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
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let invalid = || format!("invalid CIDR address: {text}");
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
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}
