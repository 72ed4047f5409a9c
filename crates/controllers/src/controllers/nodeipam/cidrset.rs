//! The bitmap of node CIDR blocks carved out of one cluster CIDR, after upstream v1.33's
//! `pkg/controller/nodeipam/ipam/cidrset/cidr_set.go` (`CidrSet`).
//!
//! Block `i` is the cluster network with `i` in the bits between the cluster and the node
//! prefix. Allocation goes round-robin from the block after the last one handed out, so a
//! released block is not reused until the allocator wrapped around.

use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use crate::apimachinery::net::Cidr;
use crate::metrics::{HistogramVec, ValueFamily};

/// `clusterSubnetMaxDiff`: IPv6 node CIDRs may have at most this many more bits than the
/// cluster CIDR (upstream's uncompressed bitmap).
pub const CLUSTER_SUBNET_MAX_DIFF: u8 = 16;

/// What a CIDR set refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrSetError {
    /// `ErrCIDRRangeNoCIDRsRemaining`.
    NoCidrsRemaining,
    /// `ErrCIDRSetSubNetTooBig`.
    SubNetTooBig,
    /// The node mask is shorter than the cluster's or longer than the address.
    BadMaskSize {
        /// The cluster CIDR.
        cluster: Cidr,
        /// The node mask size asked for.
        node_mask: u8,
    },
    /// A CIDR that does not overlap the cluster CIDR.
    OutOfRange {
        /// The CIDR asked for.
        cidr: Cidr,
        /// The set's cluster CIDR.
        cluster: Cidr,
    },
    /// An address whose block index is beyond the set.
    IndexOutOfRange {
        /// The address asked for.
        ip: IpAddr,
        /// The set's node mask size.
        node_mask: u8,
    },
}

impl fmt::Display for CidrSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidrSetError::NoCidrsRemaining => f.write_str(
                "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range",
            ),
            CidrSetError::SubNetTooBig => f.write_str("New CIDR set failed; the node CIDR size is too big"),
            CidrSetError::BadMaskSize { cluster, node_mask } => {
                write!(f, "node CIDR mask size {node_mask} does not fit cluster CIDR {cluster}")
            }
            CidrSetError::OutOfRange { cidr, cluster } => {
                write!(f, "cidr {cidr} is out the range of cluster cidr {cluster}")
            }
            CidrSetError::IndexOutOfRange { ip, node_mask } => {
                write!(f, "CIDR: {ip}/{node_mask} is out of the range of CIDR allocator")
            }
        }
    }
}

impl std::error::Error for CidrSetError {}

/// Upstream's `node_ipam_controller_cidrset_*` metrics, by cluster CIDR.
struct Metrics {
    allocations: Arc<ValueFamily>,
    releases: Arc<ValueFamily>,
    max_cidrs: Arc<ValueFamily>,
    usage: Arc<ValueFamily>,
    tries: Arc<HistogramVec>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        const LABELS: &[&str] = &["clusterCIDR"];
        let metrics = Metrics {
            allocations: Arc::new(ValueFamily::counter(
                "node_ipam_controller_cidrset_cidrs_allocations_total",
                "[ALPHA] Counter measuring total number of CIDR allocations.",
                LABELS,
            )),
            releases: Arc::new(ValueFamily::counter(
                "node_ipam_controller_cidrset_cidrs_releases_total",
                "[ALPHA] Counter measuring total number of CIDR releases.",
                LABELS,
            )),
            // Upstream's name, typo included.
            max_cidrs: Arc::new(ValueFamily::gauge(
                "node_ipam_controller_cirdset_max_cidrs",
                "[ALPHA] Maximum number of CIDRs that can be allocated.",
                LABELS,
            )),
            usage: Arc::new(ValueFamily::gauge(
                "node_ipam_controller_cidrset_usage_cidrs",
                "[ALPHA] Gauge measuring percentage of allocated CIDRs.",
                LABELS,
            )),
            tries: Arc::new(HistogramVec::new(
                "node_ipam_controller_cidrset_allocation_tries_per_request",
                "[ALPHA] Number of endpoints added on each Service sync",
                LABELS,
                &crate::metrics::exponential_buckets(1.0, 5.0, 5),
            )),
        };
        let registry = crate::metrics::global();
        for family in [&metrics.allocations, &metrics.releases, &metrics.max_cidrs, &metrics.usage] {
            registry.register(family.clone());
        }
        registry.register(metrics.tries.clone());
        metrics
    })
}

/// Address arithmetic on both families as 128-bit integers.
fn address_bits(address: IpAddr) -> u32 {
    if address.is_ipv6() { 128 } else { 32 }
}

fn to_int(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_int(value: u128, ipv6: bool) -> IpAddr {
    if ipv6 {
        IpAddr::V6(value.into())
    } else {
        // Only ever called with values that came from a 32-bit address.
        IpAddr::V4(u32::try_from(value & u128::from(u32::MAX)).unwrap_or_default().into())
    }
}

/// The mask of a `prefix`-bit network in an address of `bits` bits.
fn mask(prefix: u8, bits: u32) -> u128 {
    let all = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
    let host_bits = bits - u32::from(prefix).min(bits);
    if host_bits >= 128 { 0 } else { all & !((1u128 << host_bits) - 1) }
}

/// Whether `network` contains `address` (Go's `IPNet.Contains`; different families never do).
fn contains(network: &Cidr, address: IpAddr) -> bool {
    if network.is_ipv6() != address.is_ipv6() {
        return false;
    }
    let m = mask(network.prefix_len, address_bits(address));
    to_int(address) & m == to_int(network.address) & m
}

/// Whether two CIDRs overlap, as upstream tests it: either contains the other's network
/// address masked to its own prefix.
pub fn overlaps(a: &Cidr, b: &Cidr) -> bool {
    if a.is_ipv6() != b.is_ipv6() {
        return false;
    }
    let bits = address_bits(a.address);
    let masked = |address: IpAddr, prefix: u8| from_int(to_int(address) & mask(prefix, bits), a.is_ipv6());
    contains(a, masked(b.address, a.prefix_len)) || contains(b, masked(a.address, b.prefix_len))
}

/// A growable bitmap (upstream's `big.Int`), only as large as its highest set bit.
#[derive(Debug, Default)]
struct Bitmap {
    words: Vec<u64>,
}

impl Bitmap {
    fn get(&self, index: u64) -> bool {
        let word = usize::try_from(index / 64).unwrap_or(usize::MAX);
        self.words.get(word).is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    fn set(&mut self, index: u64, value: bool) {
        let word = usize::try_from(index / 64).unwrap_or(usize::MAX);
        if word >= self.words.len() {
            if !value {
                return;
            }
            self.words.resize(word + 1, 0);
        }
        if value {
            self.words[word] |= 1 << (index % 64);
        } else {
            self.words[word] &= !(1 << (index % 64));
        }
    }
}

/// The node CIDR blocks of one cluster CIDR and which of them are in use.
#[derive(Debug)]
pub struct CidrSet {
    cluster: Cidr,
    node_mask: u8,
    /// How many blocks there are: `2^(node_mask - cluster prefix)`.
    max_cidrs: u64,
    allocated: u64,
    next_candidate: u64,
    used: Bitmap,
}

impl CidrSet {
    /// `NewCIDRSet`: blocks of `/node_mask` in `cluster`.
    pub fn new(cluster: Cidr, node_mask: u8) -> Result<CidrSet, CidrSetError> {
        let bits = address_bits(cluster.address);
        if node_mask < cluster.prefix_len || u32::from(node_mask) > bits {
            return Err(CidrSetError::BadMaskSize { cluster, node_mask });
        }
        let diff = node_mask - cluster.prefix_len;
        if cluster.is_ipv6() && diff > CLUSTER_SUBNET_MAX_DIFF {
            return Err(CidrSetError::SubNetTooBig);
        }
        let set = CidrSet {
            cluster,
            node_mask,
            max_cidrs: 1 << diff,
            allocated: 0,
            next_candidate: 0,
            used: Bitmap::default(),
        };
        metrics().max_cidrs.set(&[&set.label()], set.max_cidrs as f64);
        Ok(set)
    }

    /// The metrics label: the cluster CIDR.
    fn label(&self) -> String {
        self.cluster.to_string()
    }

    fn report_usage(&self) {
        metrics().usage.set(&[&self.label()], self.allocated as f64 / self.max_cidrs as f64);
    }

    /// The cluster CIDR the blocks come from.
    pub fn cluster(&self) -> &Cidr {
        &self.cluster
    }

    /// How many blocks are in use.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// How many blocks there are.
    pub fn capacity(&self) -> u64 {
        self.max_cidrs
    }

    fn bits(&self) -> u32 {
        address_bits(self.cluster.address)
    }

    /// `indexToCIDRBlock`.
    fn block(&self, index: u64) -> Cidr {
        let shift = self.bits() - u32::from(self.node_mask);
        let offset = if shift >= 128 { 0 } else { u128::from(index) << shift };
        let address = from_int(to_int(self.cluster.address) | offset, self.cluster.is_ipv6());
        Cidr { address, prefix_len: self.node_mask }
    }

    /// `AllocateNext`: the first free block at or after the one following the last allocation.
    pub fn allocate_next(&mut self) -> Result<Cidr, CidrSetError> {
        if self.allocated == self.max_cidrs {
            return Err(CidrSetError::NoCidrsRemaining);
        }
        let mut candidate = self.next_candidate;
        let mut tries = 0;
        while tries < self.max_cidrs && self.used.get(candidate) {
            candidate = (candidate + 1) % self.max_cidrs;
            tries += 1;
        }
        self.next_candidate = (candidate + 1) % self.max_cidrs;
        self.used.set(candidate, true);
        self.allocated += 1;
        let label = self.label();
        metrics().allocations.inc(&[&label]);
        metrics().tries.observe(&[&label], tries as f64);
        self.report_usage();
        Ok(self.block(candidate))
    }

    /// `getIndexForIP`.
    fn index_of(&self, ip: IpAddr) -> Result<u64, CidrSetError> {
        let shift = self.bits() - u32::from(self.node_mask);
        let xor = to_int(self.cluster.address) ^ to_int(ip);
        let index = if shift >= 128 { 0 } else { xor >> shift };
        match u64::try_from(index) {
            Ok(index) if index < self.max_cidrs => Ok(index),
            _ => Err(CidrSetError::IndexOutOfRange { ip, node_mask: self.node_mask }),
        }
    }

    /// `getBeginningAndEndIndices`: the blocks a CIDR covers (all of them when it contains the
    /// cluster CIDR).
    fn indices(&self, cidr: &Cidr) -> Result<(u64, u64), CidrSetError> {
        if !overlaps(&self.cluster, cidr) {
            return Err(CidrSetError::OutOfRange { cidr: *cidr, cluster: self.cluster });
        }
        if self.cluster.prefix_len >= cidr.prefix_len {
            return Ok((0, self.max_cidrs - 1));
        }
        let (bits, ipv6) = (self.bits(), self.cluster.is_ipv6());
        let node_mask = mask(self.node_mask, bits);
        let first = to_int(cidr.address) & node_mask;
        let last = (to_int(cidr.address) | !mask(cidr.prefix_len, bits)) & node_mask;
        Ok((self.index_of(from_int(first, ipv6))?, self.index_of(from_int(last, ipv6))?))
    }

    /// `Occupy`: marks every block `cidr` covers as used (already used ones stay used).
    pub fn occupy(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.indices(cidr)?;
        let before = self.allocated;
        for index in begin..=end {
            if !self.used.get(index) {
                self.used.set(index, true);
                self.allocated += 1;
            }
        }
        metrics().allocations.add(&[&self.label()], (self.allocated - before) as f64);
        self.report_usage();
        Ok(())
    }

    /// `Release`: marks every block `cidr` covers as free.
    pub fn release(&mut self, cidr: &Cidr) -> Result<(), CidrSetError> {
        let (begin, end) = self.indices(cidr)?;
        let before = self.allocated;
        for index in begin..=end {
            if self.used.get(index) {
                self.used.set(index, false);
                self.allocated -= 1;
            }
        }
        metrics().releases.add(&[&self.label()], (before - self.allocated) as f64);
        self.report_usage();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect("a CIDR")
    }

    fn set(cluster: &str, node_mask: u8) -> CidrSet {
        CidrSet::new(cidr(cluster), node_mask).expect("a CIDR set")
    }

    fn allocate_all(set: &mut CidrSet) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(block) = set.allocate_next() {
            out.push(block.to_string());
        }
        out
    }

    /// Upstream `TestCIDRSetFullyAllocated`.
    #[test]
    fn a_set_with_one_block_is_full_after_one_allocation() {
        for (cluster, mask, expected) in
            [("127.123.234.0/30", 30, "127.123.234.0/30"), ("beef:1234::/30", 30, "beef:1234::/30")]
        {
            let mut s = set(cluster, mask);
            assert_eq!(s.allocate_next().unwrap().to_string(), expected);
            assert_eq!(s.allocate_next(), Err(CidrSetError::NoCidrsRemaining));
            s.release(&cidr(expected)).unwrap();
            assert_eq!(s.allocate_next().unwrap().to_string(), expected);
            assert_eq!(s.allocate_next(), Err(CidrSetError::NoCidrsRemaining));
        }
    }

    /// Upstream `TestIndexToCIDRBlock`.
    #[test]
    fn blocks_are_the_index_in_the_node_bits() {
        for (cluster, mask, index, expected) in [
            ("127.123.3.0/16", 24, 0, "127.123.0.0/24"),
            ("127.123.0.0/16", 24, 15, "127.123.15.0/24"),
            ("192.168.5.219/28", 32, 5, "192.168.5.213/32"),
            ("2001:0db8:1234:3::/48", 64, 0, "2001:db8:1234::/64"),
            ("2001:0db8:1234::/48", 64, 15, "2001:db8:1234:f::/64"),
            ("2001:0db8:85a3::8a2e:0370:7334/50", 63, 6425, "2001:db8:85a3:3232::/63"),
            ("2001:0db8::/32", 48, 0, "2001:db8::/48"),
            ("2001:0db8::/32", 48, 15, "2001:db8:f::/48"),
            ("2001:0db8:85a3::8a2e:0370:7334/32", 48, 6425, "2001:db8:1919::/48"),
            ("2001:0db8:1234:ff00::/56", 72, 0, "2001:db8:1234:ff00::/72"),
            ("2001:0db8:1234:ff00::/56", 72, 15, "2001:db8:1234:ff00:f00::/72"),
            ("2001:0db8:1234:ff00::0370:7334/56", 72, 6425, "2001:db8:1234:ff19:1900::/72"),
            ("2001:0db8:1234:0:1234::/80", 96, 0, "2001:db8:1234:0:1234::/96"),
            ("2001:0db8:1234:0:1234::/80", 96, 15, "2001:db8:1234:0:1234:f::/96"),
            ("2001:0db8:1234:ff00::0370:7334/80", 96, 6425, "2001:db8:1234:ff00:0:1919::/96"),
        ] {
            assert_eq!(set(cluster, mask).block(index).to_string(), expected, "{cluster} /{mask} #{index}");
        }
    }

    /// Upstream `TestGetBitforCIDR`.
    #[test]
    fn a_block_has_the_index_of_its_node_bits() {
        for (cluster, mask, sub, expected) in [
            ("127.0.0.0/8", 16, "127.0.0.0/16", Some(0)),
            ("be00::/8", 16, "be00::/16", Some(0)),
            ("127.0.0.0/8", 16, "127.123.0.0/16", Some(123)),
            ("be00::/8", 16, "beef::/16", Some(0xef)),
            ("127.0.0.0/8", 16, "127.168.0.0/16", Some(168)),
            ("be00::/8", 16, "be68::/16", Some(0x68)),
            ("192.168.0.0/16", 24, "192.168.12.0/24", Some(12)),
            ("beef::/16", 24, "beef:1200::/24", Some(0x12)),
            ("192.168.0.0/16", 24, "192.168.151.0/24", Some(151)),
            ("beef::/16", 24, "beef:9700::/24", Some(0x97)),
            ("192.168.0.0/16", 24, "127.168.224.0/24", None),
            ("beef::/16", 24, "2001:db00::/24", None),
        ] {
            assert_eq!(set(cluster, mask).index_of(cidr(sub).address).ok(), expected, "{sub} in {cluster}");
        }
    }

    /// Upstream `TestCIDRSet_RandomishAllocation` / `TestCIDRSet_AllocationOccupied`.
    #[test]
    fn allocates_in_order_then_reuses_released_blocks() {
        for (cluster, first, last) in [
            ("127.123.234.0/16", "127.123.0.0/24", "127.123.255.0/24"),
            ("beef:1234::/16", "beef::/24", "beef:ff00::/24"),
        ] {
            let mut s = set(cluster, 24);
            let blocks = allocate_all(&mut s);
            assert_eq!(blocks.len(), 256);
            assert_eq!(blocks.first().map(String::as_str), Some(first));
            assert_eq!(blocks.last().map(String::as_str), Some(last));
            let unique: std::collections::BTreeSet<&String> = blocks.iter().collect();
            assert_eq!(unique.len(), 256);
            for block in &blocks {
                s.release(&cidr(block)).unwrap();
            }
            assert_eq!(s.allocated(), 0);
            assert_eq!(allocate_all(&mut s), blocks, "the same blocks, in the same order after a full round");
        }
    }

    #[test]
    fn occupied_blocks_are_skipped_and_round_robin_continues_after_the_last() {
        let mut s = set("10.0.0.0/16", 24);
        s.occupy(&cidr("10.0.1.0/24")).unwrap();
        // A range bigger than a block occupies every block in it.
        s.occupy(&cidr("10.0.4.0/23")).unwrap();
        let next: Vec<String> = (0..4).map(|_| s.allocate_next().unwrap().to_string()).collect();
        assert_eq!(next, ["10.0.0.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.6.0/24"]);
        // A released block is not reused before the allocator wraps around.
        s.release(&cidr("10.0.0.0/24")).unwrap();
        assert_eq!(s.allocate_next().unwrap().to_string(), "10.0.7.0/24");
        // Occupying twice counts once; releasing twice too.
        s.occupy(&cidr("10.0.9.0/24")).unwrap();
        let before = s.allocated();
        s.occupy(&cidr("10.0.9.0/24")).unwrap();
        assert_eq!(s.allocated(), before);
        s.release(&cidr("10.0.9.0/24")).unwrap();
        s.release(&cidr("10.0.9.0/24")).unwrap();
        assert_eq!(s.allocated(), before - 1);
    }

    /// Upstream `TestOccupy`: which blocks a CIDR covers.
    #[test]
    fn occupy_covers_the_blocks_of_a_cidr() {
        for (cluster, mask, sub, begin, end) in [
            ("127.0.0.0/8", 16, "127.0.0.0/8", 0, 255),
            ("2001:beef:1200::/40", 48, "2001:beef:1200::/40", 0, 255),
            ("127.0.0.0/8", 16, "127.0.0.0/2", 0, 255),
            ("2001:beef:1200::/40", 48, "2001:beef:1234::/34", 0, 255),
            ("127.0.0.0/8", 16, "127.0.0.0/16", 0, 0),
            ("2001:beef:1200::/40", 48, "2001:beef:1200::/48", 0, 0),
            ("127.0.0.0/8", 32, "127.0.0.0/16", 0, 65535),
            ("2001:beef:1200::/48", 64, "2001:beef:1200::/48", 0, 65535),
            ("127.0.0.0/7", 16, "127.0.0.0/15", 256, 257),
            ("2001:beef:7f00::/39", 48, "2001:beef:7f00::/47", 256, 257),
            ("127.0.0.0/7", 15, "127.0.0.0/15", 128, 128),
            ("2001:beef:7f00::/39", 47, "2001:beef:7f00::/47", 128, 128),
            ("127.0.0.0/7", 18, "127.0.0.0/15", 1024, 1031),
            ("2001:beef:7f00::/39", 50, "2001:beef:7f00::/47", 1024, 1031),
        ] {
            let mut s = set(cluster, mask);
            s.occupy(&cidr(sub)).unwrap();
            assert_eq!(s.allocated(), end - begin + 1, "{sub} in {cluster} /{mask}");
            assert!((begin..=end).all(|i| s.used.get(i)), "{sub} in {cluster} /{mask}");
            assert!(begin == 0 || !s.used.get(begin - 1));
            assert!(!s.used.get(end + 1));
        }
    }

    /// Upstream `TestDoubleOccupyRelease`.
    #[test]
    fn double_occupy_and_release_count_once() {
        let mut s = set("10.42.0.0/16", 24);
        for (sub, occupy, count) in [
            ("10.42.5.0/24", true, 1),
            ("10.42.9.0/24", true, 2),
            ("10.42.8.0/22", true, 5),
            ("10.42.9.0/24", true, 5),
            ("10.42.9.0/24", false, 4),
            ("10.42.9.0/24", false, 4),
            ("10.42.4.0/22", false, 3),
        ] {
            if occupy {
                s.occupy(&cidr(sub)).unwrap()
            } else {
                s.release(&cidr(sub)).unwrap()
            }
            assert_eq!(s.allocated(), count, "after {sub}");
        }
        assert_eq!(allocate_all(&mut s).len(), 256 - 3);
    }

    #[test]
    fn cidrs_outside_the_cluster_are_refused() {
        let mut s = set("10.0.0.0/16", 24);
        let err = s.occupy(&cidr("10.1.0.0/24")).unwrap_err();
        assert_eq!(err.to_string(), "cidr 10.1.0.0/24 is out the range of cluster cidr 10.0.0.0/16");
        assert!(s.release(&cidr("fd00::/64")).is_err(), "another family never overlaps");
        assert_eq!(s.allocated(), 0);
    }

    /// Upstream `TestCIDRSetv6`.
    #[test]
    fn ipv6_sets_are_limited_to_sixteen_more_bits() {
        let mut s = set("127.0.0.0/8", 32);
        assert_eq!(s.allocate_next().unwrap().to_string(), "127.0.0.0/32");
        assert_eq!(s.allocate_next().unwrap().to_string(), "127.0.0.1/32");
        assert_eq!(CidrSet::new(cidr("beef:1234::/32"), 49).unwrap_err(), CidrSetError::SubNetTooBig);
        let mut s = set("2001:beef:1234:369b::/60", 64);
        assert_eq!(s.allocate_next().unwrap().to_string(), "2001:beef:1234:3690::/64");
        assert_eq!(s.allocate_next().unwrap().to_string(), "2001:beef:1234:3691::/64");
        assert!(CidrSet::new(cidr("10.0.0.0/16"), 8).is_err(), "a node mask shorter than the cluster's");
    }

    /// Upstream `TestCidrSetMetricsHistogram` (the label is unique to this test).
    #[test]
    fn metrics_count_allocations_releases_and_tries() {
        let label = ["10.123.0.0/16"];
        let mut s = set(label[0], 24);
        assert_eq!(metrics().max_cidrs.get(&label), 256.0);
        s.occupy(&cidr("10.123.0.0/17")).unwrap();
        assert_eq!(metrics().allocations.get(&label), 128.0);
        assert_eq!(metrics().usage.get(&label), 0.5);
        s.allocate_next().unwrap();
        assert_eq!(metrics().allocations.get(&label), 129.0);
        assert_eq!(metrics().tries.count(&label), 1);
        s.release(&cidr(label[0])).unwrap();
        assert_eq!(metrics().releases.get(&label), 129.0);
        assert_eq!(metrics().usage.get(&label), 0.0);
    }

    #[test]
    fn overlap_is_symmetric_and_per_family() {
        assert!(overlaps(&cidr("10.0.0.0/8"), &cidr("10.96.0.0/12")));
        assert!(overlaps(&cidr("10.96.0.0/12"), &cidr("10.0.0.0/8")));
        assert!(!overlaps(&cidr("10.0.0.0/16"), &cidr("10.96.0.0/12")));
        assert!(!overlaps(&cidr("0.0.0.0/0"), &cidr("::/0")));
        assert!(overlaps(&cidr("fd00::/48"), &cidr("fd00::/108")));
    }
}
