//! `--feature-gates`: the gates set on the command line, checked against every gate upstream
//! kube-controller-manager v1.33 knows ([`known`]), and what each gate resolves to.
//!
//! Mirrors component-base `featuregate/feature_gate.go` (v1.33): `Set`, `unsafeSetFromMap`,
//! `setUnsetAlphaGates`/`setUnsetBetaGates` and `Enabled`.

mod known;

use std::collections::BTreeMap;

use super::values::parse_go_bool;
use known::{KNOWN_GATES, KnownGate};

/// Maturity of a feature gate (upstream `prerelease`); `AllAlpha`/`AllBeta` switch every gate
/// of their stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

/// The generic gates of upstream `featuregate.defaultFeatures`: off, never locked.
const ALL_ALPHA: KnownGate = KnownGate { name: "AllAlpha", stage: Stage::Alpha, default: false, locked: false };
const ALL_BETA: KnownGate = KnownGate { name: "AllBeta", stage: Stage::Beta, default: false, locked: false };

fn lookup(name: &str) -> Option<&'static KnownGate> {
    [&ALL_ALPHA, &ALL_BETA].into_iter().chain(KNOWN_GATES).find(|g| g.name == name)
}

/// The feature gates given with `--feature-gates`, and what each gate resolves to.
///
/// Only gates upstream v1.33 knows are accepted, and a gate locked to its default cannot be
/// changed, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    explicit: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// The gates set on the command line, by name.
    pub fn explicit(&self) -> &BTreeMap<String, bool> {
        &self.explicit
    }

    /// Whether a gate is on: its explicit value, else `AllAlpha`/`AllBeta` for an alpha or
    /// beta gate when that was set, else its v1.33 default (off for a name upstream does not
    /// know). As upstream, `AllAlpha`/`AllBeta` also reach alpha/beta gates locked to their
    /// default (v1.33 has none).
    pub fn is_enabled(&self, name: &str) -> bool {
        if let Some(value) = self.explicit.get(name) {
            return *value;
        }
        let Some(known) = lookup(name) else {
            return false;
        };
        let all = match known.stage {
            Stage::Alpha => self.explicit.get(ALL_ALPHA.name),
            Stage::Beta => self.explicit.get(ALL_BETA.name),
            Stage::Ga | Stage::Deprecated => None,
        };
        all.copied().unwrap_or(known.default)
    }

    /// Every known gate with its stage as component-base names it (`ALPHA`, `BETA`,
    /// `DEPRECATED`, and `""` for GA) and whether it is on: what `kubernetes_feature_enabled`
    /// reports.
    pub fn all(&self) -> Vec<(&'static str, &'static str, bool)> {
        let stage = |s: Stage| match s {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Deprecated => "DEPRECATED",
            Stage::Ga => "",
        };
        [&ALL_ALPHA, &ALL_BETA]
            .into_iter()
            .chain(KNOWN_GATES)
            .map(|g| (g.name, stage(g.stage), self.is_enabled(g.name)))
            .collect()
    }

    /// Upstream's warnings for the explicitly set GA and deprecated gates (`unsafeSetFromMap`
    /// logs them with klog.Warningf), one per gate, to be logged once at start-up.
    pub fn warnings(&self) -> Vec<String> {
        self.explicit
            .iter()
            .filter_map(|(name, value)| {
                let kind = match lookup(name)?.stage {
                    Stage::Ga => "GA",
                    Stage::Deprecated => "deprecated",
                    Stage::Alpha | Stage::Beta => return None,
                };
                Some(format!("Setting {kind} feature gate {name}={value}. It will be removed in a future release."))
            })
            .collect()
    }

    /// Adds the gates of one `--feature-gates` value: `[kube:]Name=bool` items separated by
    /// commas. A later value for the same gate wins, as upstream. Nothing is kept when the
    /// value has an error.
    pub(crate) fn set_from_flag(&mut self, raw: &str) -> Result<(), String> {
        let mut items = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            items.push(parse_item(item)?);
        }
        let mut explicit = self.explicit.clone();
        explicit.extend(items.into_iter().map(|(name, value)| (name.to_string(), value)));
        check_known_and_unlocked(&explicit)?;
        self.explicit = explicit;
        Ok(())
    }
}

/// One `[kube:]Name=bool` item (upstream `featureGate.Set`, behind the component prefix of
/// the compatibility registry's `--feature-gates`).
fn parse_item(item: &str) -> Result<(&str, bool), String> {
    let (component, pair) = match item.split_once(':') {
        Some((component, pair)) if !component.contains('=') => (component.trim(), pair),
        _ => ("kube", item),
    };
    if component != "kube" {
        return Err(format!("unknown component {component:?}: only \"kube\" feature gates exist"));
    }
    let Some((name, value)) = pair.split_once('=') else {
        return Err(format!("missing bool value for {}", pair.trim()));
    };
    let (name, value) = (name.trim(), value.trim());
    let enabled = parse_go_bool(value).map_err(|e| format!("invalid value of {name}={value}: {e}"))?;
    Ok((name, enabled))
}

/// Upstream `unsafeSetFromMap` checks every gate set so far: an unknown name stops at once;
/// each locked gate set away from its default is an error, and several errors are reported
/// together as `[a, b]` (`utilerrors.NewAggregate`).
fn check_known_and_unlocked(explicit: &BTreeMap<String, bool>) -> Result<(), String> {
    let mut errors = Vec::new();
    for (name, value) in explicit {
        let Some(known) = lookup(name) else {
            return Err(format!("unrecognized feature gate: {name}"));
        };
        if known.locked && known.default != *value {
            errors.push(format!("cannot set feature gate {name} to {value}, feature is locked to {}", known.default));
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(values: &[&str]) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::default();
        for value in values {
            gates.set_from_flag(value)?;
        }
        Ok(gates)
    }

    #[test]
    fn parses_pairs_with_optional_component() {
        let g = gates(&["JobManagedBy=false,WatchList=true", "kube:HPAScaleToZero=1", " NodeSwap = F ,"]).unwrap();
        let explicit: Vec<(&str, bool)> = g.explicit().iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            explicit,
            [("HPAScaleToZero", true), ("JobManagedBy", false), ("NodeSwap", false), ("WatchList", true)]
        );
        // Repeating the flag adds gates and the last value wins.
        let g = gates(&["WatchList=true", "WatchList=false,HPAScaleToZero=true"]).unwrap();
        assert!(!g.is_enabled("WatchList"));
        assert!(g.is_enabled("HPAScaleToZero"));
        assert_eq!(gates(&[""]).unwrap(), FeatureGates::default());
    }

    #[test]
    fn rejects_malformed_items() {
        assert_eq!(gates(&["NodeSwap"]), Err("missing bool value for NodeSwap".into()));
        assert_eq!(
            gates(&["NodeSwap=maybe"]),
            Err("invalid value of NodeSwap=maybe: not a boolean (use true or false)".into())
        );
        assert!(gates(&["wardle:NodeSwap=true"]).is_err());
    }

    #[test]
    fn refuses_unknown_gates() {
        assert_eq!(gates(&["NoSuchGate=true"]), Err("unrecognized feature gate: NoSuchGate".into()));
        assert_eq!(gates(&["=true"]), Err("unrecognized feature gate: ".into()));
        // Names are case-sensitive, and a gate first registered after v1.33 is unknown.
        assert!(gates(&["nodeswap=true"]).is_err());
        assert!(gates(&["ClearingNominatedNodeNameAfterBinding=true"]).is_err());
        // A refused value keeps nothing of itself.
        let mut g = gates(&["NodeSwap=false"]).unwrap();
        assert!(g.set_from_flag("WatchList=true,Nope=true").is_err());
        assert_eq!(g.explicit().len(), 1);
    }

    #[test]
    fn locked_gates_only_take_their_default() {
        assert_eq!(
            gates(&["SidecarContainers=false"]),
            Err("cannot set feature gate SidecarContainers to false, feature is locked to true".into())
        );
        assert_eq!(
            gates(&["WatchFromStorageWithoutResourceVersion=true"]),
            Err("cannot set feature gate WatchFromStorageWithoutResourceVersion to true, feature is locked to false"
                .into())
        );
        assert_eq!(
            gates(&["SidecarContainers=false,PodIndexLabel=false"]),
            Err("[cannot set feature gate PodIndexLabel to false, feature is locked to true, \
                 cannot set feature gate SidecarContainers to false, feature is locked to true]"
                .into())
        );
        let g = gates(&["SidecarContainers=true"]).unwrap();
        assert!(g.is_enabled("SidecarContainers"));
    }

    #[test]
    fn warns_for_ga_and_deprecated_gates() {
        let g = gates(&["MultiCIDRServiceAllocator=false,KMSv1=true,NodeSwap=false,SidecarContainers=true"]).unwrap();
        assert_eq!(
            g.warnings(),
            [
                "Setting deprecated feature gate KMSv1=true. It will be removed in a future release.",
                "Setting GA feature gate MultiCIDRServiceAllocator=false. It will be removed in a future release.",
                "Setting GA feature gate SidecarContainers=true. It will be removed in a future release.",
            ]
        );
        assert!(gates(&["AllAlpha=true,AllBeta=false"]).unwrap().warnings().is_empty());
    }

    #[test]
    fn real_v1_33_defaults() {
        let g = FeatureGates::default();
        for on in ["SeparateTaintEvictionController", "OrderedNamespaceDeletion", "InPlacePodVerticalScaling"] {
            assert!(g.is_enabled(on), "{on}");
            assert_eq!(lookup(on).unwrap().stage, Stage::Beta, "{on}");
        }
        for off in ["DynamicResourceAllocation", "StorageVersionAPI", "AllAlpha", "AllBeta", "SomethingUnknown"] {
            assert!(!g.is_enabled(off), "{off}");
        }
        assert!(g.is_enabled("MultiCIDRServiceAllocator"));
        assert!(g.is_enabled("InOrderInformers"));
        assert!(!g.is_enabled("WatchListClient"));
    }

    #[test]
    fn table_is_consistent() {
        let mut names: Vec<&str> = KNOWN_GATES.iter().map(|g| g.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a gate is listed twice");
        assert!(names.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric())));
        // v1.33 locks only GA and deprecated gates.
        assert!(KNOWN_GATES.iter().filter(|g| g.locked).all(|g| matches!(g.stage, Stage::Ga | Stage::Deprecated)));
    }

    #[test]
    fn all_alpha_and_all_beta_switch_unset_gates_of_their_stage() {
        let stage_gates = |stage| KNOWN_GATES.iter().filter(move |g| g.stage == stage);
        let g = gates(&["AllAlpha=true"]).unwrap();
        assert!(stage_gates(Stage::Alpha).all(|k| g.is_enabled(k.name)));
        assert!(stage_gates(Stage::Beta).all(|k| g.is_enabled(k.name) == k.default));
        let g = gates(&["AllBeta=false,SELinuxChangePolicy=true"]).unwrap();
        assert!(stage_gates(Stage::Beta).all(|k| g.is_enabled(k.name) == (k.name == "SELinuxChangePolicy")));
        assert!(stage_gates(Stage::Alpha).all(|k| !g.is_enabled(k.name)));
        // GA and deprecated gates keep their defaults.
        let g = gates(&["AllAlpha=true,AllBeta=true"]).unwrap();
        assert!(
            KNOWN_GATES
                .iter()
                .filter(|k| matches!(k.stage, Stage::Ga | Stage::Deprecated))
                .all(|k| g.is_enabled(k.name) == k.default)
        );
        assert!(!g.is_enabled("KMSv1"));
        // An explicit value wins whatever the order.
        let g = gates(&["LoggingAlphaOptions=false,AllAlpha=true"]).unwrap();
        assert!(!g.is_enabled("LoggingAlphaOptions"));
        assert!(g.is_enabled("ContainerStopSignals"));
    }
}
