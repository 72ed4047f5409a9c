//! Zone states and their eviction rates, after upstream's `ComputeZoneState`,
//! `handleDisruption`, `setLimiterInZone`, `HealthyQPSFunc`, `ReducedQPSFunc` and
//! `addPodEvictorForNewZone`: each zone has a queue of nodes waiting for a NoExecute taint,
//! drained at a rate that depends on how many of the zone's nodes are not Ready, and nothing
//! is tainted while every zone is fully disrupted (the control plane is probably the one cut off).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeCondition;

use super::metrics;
use super::rate_limited_queue::RateLimitedTimedQueue;
use crate::apimachinery::clock::Clock;

/// `ZoneState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    /// `stateInitial`: a new zone, not judged yet.
    Initial,
    /// `stateNormal`: neither fully nor partially disrupted.
    Normal,
    /// `stateFullDisruption`: no node is Ready.
    FullDisruption,
    /// `statePartialDisruption`: more than 2 nodes, and at least `--unhealthy-zone-threshold` of
    /// them, not Ready.
    PartialDisruption,
}

impl ZoneState {
    /// The state's name, as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::FullDisruption => "FullDisruption",
            ZoneState::PartialDisruption => "PartialDisruption",
        }
    }
}

/// The eviction flags.
#[derive(Debug, Clone, Copy)]
pub struct ZoneConfig {
    /// `--node-eviction-rate`.
    pub eviction_qps: f32,
    /// `--secondary-node-eviction-rate`.
    pub secondary_eviction_qps: f32,
    /// `--large-cluster-size-threshold`.
    pub large_cluster_threshold: i32,
    /// `--unhealthy-zone-threshold`.
    pub unhealthy_zone_threshold: f32,
}

/// What a pass of [`Zones::handle_disruption`] asks of the controller besides the rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disruption {
    /// Nothing more.
    Unchanged,
    /// Every zone just became fully disrupted: remove the NoExecute taints of every node.
    Entered,
    /// Some zone is no longer fully disrupted after all were: restart every node's probe clock.
    Exited,
}

/// `ComputeZoneState`: the number of not-Ready nodes (a missing condition counts as not
/// Ready) and the zone's state.
pub fn compute_zone_state(ready_conditions: &[Option<NodeCondition>], unhealthy_threshold: f32) -> (usize, ZoneState) {
    let ready = ready_conditions.iter().filter(|c| c.as_ref().is_some_and(|c| c.status == "True")).count();
    let not_ready = ready_conditions.len() - ready;
    let state = if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f32 / (not_ready + ready) as f32 >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    };
    (not_ready, state)
}

/// The zones the controller knows, with their states and taint queues (upstream's
/// `zoneStates` and `zoneNoExecuteTainter`, which `evictorLock` guards: callers hold this
/// struct behind a lock).
pub struct Zones {
    config: ZoneConfig,
    clock: Arc<dyn Clock>,
    states: HashMap<String, ZoneState>,
    tainters: HashMap<String, Arc<RateLimitedTimedQueue>>,
}

impl Zones {
    /// No zones yet; the taint queue of each new zone gets the rate of `config`.
    pub fn new(config: ZoneConfig, clock: Arc<dyn Clock>) -> Zones {
        Zones { config, clock, states: HashMap::new(), tainters: HashMap::new() }
    }

    /// Whether the zone has a state yet.
    pub fn knows(&self, zone: &str) -> bool {
        self.states.contains_key(zone)
    }

    /// `addPodEvictorForNewZone`: a new zone starts in the Initial state with a taint queue at
    /// `--node-eviction-rate`.
    pub fn add_zone(&mut self, zone: &str) {
        if self.states.contains_key(zone) {
            return;
        }
        self.states.insert(zone.to_string(), ZoneState::Initial);
        let tainter = RateLimitedTimedQueue::new(self.config.eviction_qps, self.clock.clone());
        self.tainters.insert(zone.to_string(), Arc::new(tainter));
        log::info!("initializing eviction metric for zone {zone:?}");
        metrics::evictions_total().add(&[zone], 0.0);
    }

    /// The taint queue of a zone.
    pub fn tainter(&self, zone: &str) -> Option<&Arc<RateLimitedTimedQueue>> {
        self.tainters.get(zone)
    }

    /// Every zone's taint queue.
    pub fn tainters(&self) -> Vec<Arc<RateLimitedTimedQueue>> {
        self.tainters.values().cloned().collect()
    }

    /// The zone's state; `None` for a zone not seen yet.
    pub fn state(&self, zone: &str) -> Option<ZoneState> {
        self.states.get(zone).copied()
    }

    /// `handleDisruption`: the new state of every zone from its nodes' Ready conditions, and
    /// the taint rates that go with them.
    pub fn handle_disruption(&mut self, zone_conditions: &BTreeMap<String, Vec<Option<NodeCondition>>>) -> Disruption {
        let mut new_states = HashMap::new();
        let mut all_are_fully_disrupted = true;
        for (zone, conditions) in zone_conditions {
            let (unhealthy, state) = compute_zone_state(conditions, self.config.unhealthy_zone_threshold);
            let size = conditions.len();
            metrics::zone_size().set(&[zone], size as f64);
            metrics::zone_health().set(&[zone], (100 * (size - unhealthy)) as f64 / size as f64);
            metrics::unhealthy_nodes().set(&[zone], unhealthy as f64);
            all_are_fully_disrupted &= state == ZoneState::FullDisruption;
            new_states.insert(zone.clone(), state);
            if !self.states.contains_key(zone) {
                log::error!("setting initial state for unseen zone {zone:?}");
                self.states.insert(zone.clone(), ZoneState::Initial);
            }
        }
        let all_were_fully_disrupted = self.forget_empty_zones_and_check_full_disruption(zone_conditions);
        if all_are_fully_disrupted && all_were_fully_disrupted {
            return Disruption::Unchanged;
        }
        let zones: Vec<String> = self.states.keys().cloned().collect();
        if all_are_fully_disrupted {
            log::info!("controller detected that all Nodes are not-Ready; entering master disruption mode");
            for zone in &zones {
                self.swap_limiter(zone, 0.0);
                self.states.insert(zone.clone(), ZoneState::FullDisruption);
            }
            return Disruption::Entered;
        }
        let size = |zone: &str| zone_conditions.get(zone).map_or(0, Vec::len);
        if all_were_fully_disrupted {
            log::info!("controller detected that some Nodes are Ready; exiting master disruption mode");
            for zone in &zones {
                let state = new_states.get(zone).copied().unwrap_or(ZoneState::Initial);
                self.set_limiter_in_zone(zone, size(zone), state);
                self.states.insert(zone.clone(), state);
            }
            return Disruption::Exited;
        }
        for zone in &zones {
            let state = new_states.get(zone).copied().unwrap_or(ZoneState::Initial);
            if self.states.get(zone) == Some(&state) {
                continue;
            }
            log::info!("controller detected that zone {zone:?} is now in state {}", state.as_str());
            self.set_limiter_in_zone(zone, size(zone), state);
            self.states.insert(zone.clone(), state);
        }
        Disruption::Unchanged
    }

    /// The loop over the old states in `handleDisruption`: zones without nodes are dropped
    /// (their gauges reset); whether every remaining zone was fully disrupted. Upstream's loop
    /// stops at the first zone not fully disrupted, in Go's random map order, so a vanished
    /// zone is dropped within a few passes; here it is dropped at once.
    fn forget_empty_zones_and_check_full_disruption(
        &mut self,
        zone_conditions: &BTreeMap<String, Vec<Option<NodeCondition>>>,
    ) -> bool {
        let vanished: Vec<String> = self.states.keys().filter(|z| !zone_conditions.contains_key(*z)).cloned().collect();
        for zone in vanished {
            metrics::zone_size().set(&[&zone], 0.0);
            metrics::zone_health().set(&[&zone], 100.0);
            metrics::unhealthy_nodes().set(&[&zone], 0.0);
            self.states.remove(&zone);
        }
        self.states.values().all(|state| *state == ZoneState::FullDisruption)
    }

    /// `setLimiterInZone`.
    fn set_limiter_in_zone(&self, zone: &str, zone_size: usize, state: ZoneState) {
        match state {
            ZoneState::Normal => self.swap_limiter(zone, self.config.eviction_qps),
            ZoneState::PartialDisruption => self.swap_limiter(zone, self.reduced_qps(zone_size)),
            ZoneState::FullDisruption => self.swap_limiter(zone, self.healthy_qps(zone_size)),
            ZoneState::Initial => {}
        }
    }

    fn swap_limiter(&self, zone: &str, qps: f32) {
        if let Some(tainter) = self.tainters.get(zone) {
            tainter.swap_limiter(qps);
        }
    }

    /// `HealthyQPSFunc`: the normal rate.
    fn healthy_qps(&self, _zone_size: usize) -> f32 {
        self.config.eviction_qps
    }

    /// `ReducedQPSFunc`: the secondary rate in large zones, none in small ones.
    fn reduced_qps(&self, zone_size: usize) -> f32 {
        if i64::try_from(zone_size).unwrap_or(i64::MAX) > i64::from(self.config.large_cluster_threshold) {
            self.config.secondary_eviction_qps
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use std::time::Duration;

    const CONFIG: ZoneConfig = ZoneConfig {
        eviction_qps: 0.1,
        secondary_eviction_qps: 0.01,
        large_cluster_threshold: 50,
        unhealthy_zone_threshold: 0.55,
    };

    fn ready(status: &str) -> Option<NodeCondition> {
        Some(NodeCondition { type_: "Ready".into(), status: status.into(), ..NodeCondition::default() })
    }

    /// `ready` Ready nodes and `not_ready` Unknown ones.
    fn conditions(ready_count: usize, not_ready: usize) -> Vec<Option<NodeCondition>> {
        let mut all = vec![ready("True"); ready_count];
        all.extend(vec![ready("Unknown"); not_ready]);
        all
    }

    #[test]
    fn zone_states_follow_upstream_thresholds() {
        assert_eq!(compute_zone_state(&conditions(3, 0), 0.55), (0, ZoneState::Normal));
        assert_eq!(compute_zone_state(&conditions(0, 1), 0.55), (1, ZoneState::FullDisruption));
        assert_eq!(compute_zone_state(&[None, None], 0.55), (2, ZoneState::FullDisruption));
        // Two unhealthy nodes are never a partial disruption, whatever the fraction.
        assert_eq!(compute_zone_state(&conditions(1, 2), 0.55), (2, ZoneState::Normal));
        assert_eq!(compute_zone_state(&conditions(2, 3), 0.55), (3, ZoneState::PartialDisruption));
        assert_eq!(compute_zone_state(&conditions(3, 3), 0.55), (3, ZoneState::Normal));
        assert_eq!(compute_zone_state(&[], 0.55), (0, ZoneState::Normal));
    }

    fn zones() -> (Arc<FakeClock>, Zones) {
        let clock = Arc::new(FakeClock::new());
        let mut zones = Zones::new(CONFIG, clock.clone());
        zones.add_zone("a");
        zones.add_zone("b");
        (clock, zones)
    }

    fn pass(zones: &mut Zones, a: Vec<Option<NodeCondition>>, b: Vec<Option<NodeCondition>>) -> Disruption {
        zones.handle_disruption(&BTreeMap::from([("a".to_string(), a), ("b".to_string(), b)]))
    }

    /// How many of `count` queued nodes the zone's queue lets through now.
    fn drained(zones: &Zones, zone: &str, count: usize) -> usize {
        let tainter = zones.tainter(zone).expect("a tainter");
        for i in 0..count {
            tainter.add(&format!("{zone}-{i}"), "");
        }
        let mut done = 0;
        tainter.try_process(|_| {
            done += 1;
            (true, Duration::ZERO)
        });
        done
    }

    #[test]
    fn a_partially_disrupted_small_zone_stops_tainting() {
        let (clock, mut zones) = zones();
        assert_eq!(pass(&mut zones, conditions(5, 0), conditions(5, 0)), Disruption::Unchanged);
        assert_eq!(zones.state("a"), Some(ZoneState::Normal));
        assert_eq!(pass(&mut zones, conditions(1, 4), conditions(5, 0)), Disruption::Unchanged);
        assert_eq!(zones.state("a"), Some(ZoneState::PartialDisruption));
        clock.advance(Duration::from_secs(3600));
        assert_eq!(drained(&zones, "a", 3), 0, "a zone of 5 is not large: rate 0");
        assert_eq!(drained(&zones, "b", 3), 1, "the healthy zone taints at the normal rate");
    }

    #[test]
    fn all_zones_fully_disrupted_stop_everything_until_one_recovers() {
        let (clock, mut zones) = zones();
        pass(&mut zones, conditions(2, 0), conditions(2, 0));
        assert_eq!(pass(&mut zones, conditions(0, 2), conditions(0, 2)), Disruption::Entered);
        assert_eq!(zones.state("b"), Some(ZoneState::FullDisruption));
        assert_eq!(pass(&mut zones, conditions(0, 2), conditions(0, 2)), Disruption::Unchanged);
        clock.advance(Duration::from_secs(3600));
        assert_eq!(drained(&zones, "a", 1) + drained(&zones, "b", 1), 0);
        assert_eq!(pass(&mut zones, conditions(0, 2), conditions(1, 1)), Disruption::Exited);
        assert_eq!(zones.state("a"), Some(ZoneState::FullDisruption));
        assert_eq!(zones.state("b"), Some(ZoneState::Normal));
        clock.advance(Duration::from_secs(10));
        assert_eq!(drained(&zones, "a", 0), 1, "a fully disrupted zone taints at the normal rate again");
    }

    #[test]
    fn zones_without_nodes_are_forgotten() {
        let (_, mut zones) = zones();
        pass(&mut zones, conditions(1, 0), conditions(1, 0));
        zones.handle_disruption(&BTreeMap::from([("a".to_string(), conditions(1, 0))]));
        assert_eq!(zones.state("b"), None);
        assert!(zones.knows("a"));
    }
}
