//! `--feature-gates`: the gates set on the command line, and the upstream v1.33 defaults of the
//! gates this implementation consults (controller start conditions, logging options).

use std::collections::BTreeMap;

use super::values::parse_go_bool;

/// Maturity of a feature gate; `AllAlpha`/`AllBeta` switch every gate of their stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
    Ga,
}

struct KnownGate {
    name: &'static str,
    stage: Stage,
    default: bool,
}

const fn gate(name: &'static str, stage: Stage, default: bool) -> KnownGate {
    KnownGate { name, stage, default }
}

/// Defaults in upstream v1.33 of the gates this code looks at; any other gate is off unless set.
const KNOWN_GATES: &[KnownGate] = &[
    gate("APIServerIdentity", Stage::Beta, true),
    gate("ClusterTrustBundle", Stage::Beta, false),
    gate("DRADeviceTaints", Stage::Alpha, false),
    gate("DynamicResourceAllocation", Stage::Beta, false),
    gate("InPlacePodVerticalScaling", Stage::Beta, true),
    gate("LoggingAlphaOptions", Stage::Alpha, false),
    gate("LoggingBetaOptions", Stage::Beta, true),
    gate("MultiCIDRServiceAllocator", Stage::Ga, true),
    gate("OrderedNamespaceDeletion", Stage::Beta, true),
    gate("SELinuxChangePolicy", Stage::Beta, true),
    gate("SeparateTaintEvictionController", Stage::Beta, true),
    gate("StorageVersionAPI", Stage::Alpha, false),
    gate("StorageVersionMigrator", Stage::Alpha, false),
    gate("VolumeAttributesClass", Stage::Beta, false),
];

/// The feature gates given with `--feature-gates`, and what each gate resolves to.
///
/// Upstream refuses gates it does not know; this implementation does not carry upstream's full
/// list, so it keeps any well-formed name and treats unknown gates as off unless set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    explicit: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// The gates set on the command line, by name.
    pub fn explicit(&self) -> &BTreeMap<String, bool> {
        &self.explicit
    }

    /// Whether a gate is on: its explicit value, else `AllAlpha`/`AllBeta` for a known alpha or
    /// beta gate when that was set, else its v1.33 default (off for gates not known here).
    pub fn is_enabled(&self, name: &str) -> bool {
        if let Some(value) = self.explicit.get(name) {
            return *value;
        }
        let Some(known) = KNOWN_GATES.iter().find(|g| g.name == name) else {
            return false;
        };
        let all = match known.stage {
            Stage::Alpha => self.explicit.get("AllAlpha"),
            Stage::Beta => self.explicit.get("AllBeta"),
            Stage::Ga => None,
        };
        all.copied().unwrap_or(known.default)
    }

    /// Adds the gates of one `--feature-gates` value: `[kube:]Name=bool` items separated by
    /// commas. A later value for the same gate wins, as upstream.
    pub(crate) fn set_from_flag(&mut self, raw: &str) -> Result<(), String> {
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
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
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(format!("invalid feature gate name {name:?}"));
            }
            let enabled = parse_go_bool(value).map_err(|e| format!("invalid value of {name}={value}: {e}"))?;
            self.explicit.insert(name.to_string(), enabled);
        }
        Ok(())
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
        let g = gates(&["A=true,B=false", "kube:C=1", " D = T ,"]).unwrap();
        let explicit: Vec<(&str, bool)> = g.explicit().iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(explicit, [("A", true), ("B", false), ("C", true), ("D", true)]);
        // Repeating the flag adds gates and the last value wins.
        let g = gates(&["A=true", "A=false,B=true"]).unwrap();
        assert!(!g.is_enabled("A"));
        assert!(g.is_enabled("B"));
        assert_eq!(gates(&[""]).unwrap(), FeatureGates::default());
    }

    #[test]
    fn rejects_malformed_items() {
        assert_eq!(gates(&["A"]), Err("missing bool value for A".into()));
        assert_eq!(gates(&["A=maybe"]), Err("invalid value of A=maybe: not a boolean (use true or false)".into()));
        assert!(gates(&["wardle:A=true"]).is_err());
        assert!(gates(&["=true"]).is_err());
        assert!(gates(&["Foo Bar=true"]).is_err());
        assert!(gates(&["Foo.Bar=true"]).is_err());
    }

    #[test]
    fn defaults_and_all_alpha_beta() {
        let g = FeatureGates::default();
        assert!(g.is_enabled("LoggingBetaOptions"));
        assert!(!g.is_enabled("LoggingAlphaOptions"));
        assert!(!g.is_enabled("SomethingUnknown"));
        let g = gates(&["AllAlpha=true"]).unwrap();
        assert!(g.is_enabled("LoggingAlphaOptions"));
        assert!(g.is_enabled("StorageVersionAPI"));
        assert!(!g.is_enabled("DynamicResourceAllocation"));
        let g = gates(&["AllBeta=false,SELinuxChangePolicy=true"]).unwrap();
        assert!(!g.is_enabled("LoggingBetaOptions"));
        assert!(g.is_enabled("SELinuxChangePolicy"));
        assert!(g.is_enabled("MultiCIDRServiceAllocator"));
    }
}
