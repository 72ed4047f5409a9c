//! `--feature-gates`: the gates set on the command line, checked against every gate upstream
//! kube-controller-manager v1.36 knows ([`known`]) at the emulated version, and what each gate
//! resolves to.
//!
//! Mirrors component-base (v1.36) `featuregate/feature_gate.go` (`Set`, `unsafeSetFromMap`,
//! `featureSpecAtEmulationAndMinCompatVersion`, `setUnsetAlphaGates`/`setUnsetBetaGates`, the
//! dependency check, `Enabled`, `GetAll`, `KnownFeatures`) and the feature-gate part of the
//! compatibility registry's `Set` (`compatibility/registry.go`): the flag's pairs are only kept
//! while the command line is read, and set once the emulated version is known.

mod known;

use std::collections::BTreeMap;

use super::values::{KubeVersion, go_quote};
use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::version::KUBERNETES_RELEASE;
use known::KNOWN_GATES;

/// Why `--feature-gates` is refused, in component-base's words.
#[derive(Debug, thiserror::Error)]
pub enum FeatureGateError {
    /// Items with and without the `kube:` prefix.
    #[error("set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use")]
    MixedPrefixes,
    /// A component other than `kube`.
    #[error("component not registered: {0}")]
    UnregisteredComponent(String),
    /// A name without `=value`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value that is not a Go boolean.
    #[error(
        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {}: invalid syntax",
        go_quote(.value)
    )]
    NotABool {
        /// The gate.
        name: String,
        /// The value as given.
        value: String,
    },
    /// A locked gate set away from its default.
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked_to}")]
    Locked {
        /// The gate.
        name: String,
        /// The value asked for.
        value: bool,
        /// The only value it takes.
        locked_to: bool,
    },
    /// A gate that does not exist yet at the emulated version.
    #[error(
        "cannot set feature gate {name} to {value}, feature is PreAlpha at emulated version {emulation}, min \
         compatibility version {min_compatibility}"
    )]
    PreAlpha {
        /// The gate.
        name: String,
        /// The value asked for.
        value: bool,
        /// The emulated version.
        emulation: KubeVersion,
        /// The minimum compatibility version.
        min_compatibility: KubeVersion,
    },
    /// A gate on while gates it needs are off.
    #[error("{gate} is enabled, but depends on features that are disabled: [{}]", .off.join(" "))]
    UnmetDependencies {
        /// The gate.
        gate: &'static str,
        /// The gates it needs that are off.
        off: Vec<&'static str>,
    },
    /// Several refusals of one step, reported together (`utilerrors.NewAggregate`).
    #[error("{0}")]
    Several(#[source] Aggregate),
}

/// Maturity of a feature gate at a version (upstream `prerelease`); `AllAlpha`/`AllBeta`
/// switch every gate of their stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

impl Stage {
    /// The stage as component-base names it (`kubernetes_feature_enabled`'s `stage`, `--help`).
    fn name(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
            Stage::Deprecated => "DEPRECATED",
        }
    }
}

/// One versioned spec of a gate (upstream `FeatureSpec`): from `version` on, until a later
/// spec applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spec {
    version: KubeVersion,
    stage: Stage,
    default: bool,
    locked: bool,
    /// The spec applies only when `--min-compatibility-version` is at least this.
    min_compat: Option<KubeVersion>,
}

/// A spec from `1.<minor>` on.
const fn at(minor: u32, stage: Stage, default: bool) -> Spec {
    Spec { version: KubeVersion { major: 1, minor }, stage, default, locked: false, min_compat: None }
}

/// A spec from `1.<minor>` on, locked to its default.
const fn locked(minor: u32, stage: Stage, default: bool) -> Spec {
    Spec { locked: true, ..at(minor, stage, default) }
}

/// A gate, its specs in version order, and the gates it needs on whenever it is on.
struct KnownGate {
    name: &'static str,
    specs: &'static [Spec],
    depends_on: &'static [&'static str],
}

const fn gate(name: &'static str, specs: &'static [Spec], depends_on: &'static [&'static str]) -> KnownGate {
    KnownGate { name, specs, depends_on }
}

/// The generic gates of upstream `featuregate.defaultFeatures`: alpha/beta, off, from 0.0.
const ALL_SPEC: Spec = Spec {
    version: KubeVersion { major: 0, minor: 0 },
    stage: Stage::Alpha,
    default: false,
    locked: false,
    min_compat: None,
};
const ALL_ALPHA: KnownGate = gate("AllAlpha", &[ALL_SPEC], &[]);
const ALL_BETA: KnownGate = gate("AllBeta", &[Spec { stage: Stage::Beta, ..ALL_SPEC }], &[]);

fn every_gate() -> impl Iterator<Item = &'static KnownGate> {
    [&ALL_ALPHA, &ALL_BETA].into_iter().chain(KNOWN_GATES)
}

fn lookup(name: &str) -> Option<&'static KnownGate> {
    every_gate().find(|g| g.name == name)
}

/// Upstream `featureSpecAtEmulationAndMinCompatVersion`: the latest spec not newer than the
/// emulated version whose minimum compatibility version is met; `None` (upstream's PreAlpha
/// spec) when the gate does not exist yet at that version.
fn spec_at(gate: &KnownGate, emulation: KubeVersion, min_compatibility: KubeVersion) -> Option<&'static Spec> {
    gate.specs
        .iter()
        .rev()
        .find(|spec| spec.version <= emulation && spec.min_compat.is_none_or(|needed| min_compatibility >= needed))
}

/// The feature gates given with `--feature-gates`, and what each gate resolves to at the
/// emulated version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    /// The flag's `component:pair` items as given (upstream's `ColonSeparatedMultimapStringString`),
    /// the component empty where none was written.
    given: Vec<(String, String)>,
    /// Every gate set, known or not (upstream's `enabledRaw`).
    explicit: BTreeMap<String, bool>,
    emulation: KubeVersion,
    min_compatibility: KubeVersion,
}

impl Default for FeatureGates {
    /// No gate set, at the binary's version (and one minor before it for compatibility).
    fn default() -> Self {
        let binary = KubeVersion::of(KUBERNETES_RELEASE);
        FeatureGates {
            given: Vec::new(),
            explicit: BTreeMap::new(),
            emulation: binary,
            min_compatibility: binary.previous(),
        }
    }
}

impl FeatureGates {
    /// The gates set on the command line, by name (names upstream does not know included).
    pub fn explicit(&self) -> &BTreeMap<String, bool> {
        &self.explicit
    }

    /// Whether a gate is on at the emulated version: its explicit value, else `AllAlpha`/
    /// `AllBeta` for an alpha or beta gate when that was set, else its default there. Off for a
    /// name upstream does not know and for a gate that does not exist yet at that version. As
    /// upstream, `AllAlpha`/`AllBeta` also reach gates locked to their default.
    pub fn is_enabled(&self, name: &str) -> bool {
        lookup(name).and_then(|gate| self.spec(gate)).is_some_and(|spec| self.resolve(name, spec))
    }

    fn spec(&self, gate: &KnownGate) -> Option<&'static Spec> {
        spec_at(gate, self.emulation, self.min_compatibility)
    }

    fn resolve(&self, name: &str, spec: &Spec) -> bool {
        if let Some(value) = self.explicit.get(name) {
            return *value;
        }
        let all = match spec.stage {
            Stage::Alpha if name != ALL_ALPHA.name => self.explicit.get(ALL_ALPHA.name),
            Stage::Beta if name != ALL_BETA.name => self.explicit.get(ALL_BETA.name),
            _ => None,
        };
        all.copied().unwrap_or(spec.default)
    }

    /// Every gate that exists at the emulated version with its stage as component-base names it
    /// (`ALPHA`, `BETA`, `DEPRECATED`, and `""` for GA) and whether it is on: what
    /// `kubernetes_feature_enabled` reports (upstream `AddMetrics` over `GetAll`).
    pub fn all(&self) -> Vec<(&'static str, &'static str, bool)> {
        every_gate()
            .filter_map(|gate| {
                self.spec(gate).map(|spec| (gate.name, spec.stage.name(), self.resolve(gate.name, spec)))
            })
            .collect()
    }

    /// The `--help` lines of `--feature-gates` (upstream `KnownFeatures` at the binary's
    /// version, behind the registry's `kube:` prefix): alpha and beta gates, sorted. A gate whose
    /// spec changes with the minimum compatibility version shows both specs.
    pub(crate) fn help_lines() -> Vec<String> {
        let defaults = FeatureGates::default();
        let help = |name: &str, spec: Option<&Spec>, with_compat: bool| {
            let spec = spec.filter(|s| matches!(s.stage, Stage::Alpha | Stage::Beta))?;
            let mut text = format!("{name}=true|false ({} - default={})", spec.stage.name(), spec.default);
            if let Some(needed) = spec.min_compat.filter(|_| with_compat) {
                text.push_str(&format!(" if --min-compatibility-version>={needed}"));
            }
            Some(text)
        };
        let mut lines: Vec<String> = every_gate()
            .filter_map(|gate| {
                let spec = defaults.spec(gate);
                let compat_mode = spec_at(gate, defaults.emulation, defaults.emulation);
                let line = if spec == compat_mode {
                    help(gate.name, spec, false)
                } else {
                    let parts: Vec<String> = [help(gate.name, spec, false), help(gate.name, compat_mode, true)]
                        .into_iter()
                        .flatten()
                        .collect();
                    (!parts.is_empty()).then(|| parts.join(", or "))
                };
                line.map(|line| format!("kube:{line}"))
            })
            .collect();
        lines.sort();
        lines
    }

    /// Records one `--feature-gates` value as upstream's `ColonSeparatedMultimapStringString`
    /// does (with an empty default component): `[component:]Name=bool` items separated by
    /// commas. Nothing is checked yet: see [`FeatureGates::set`].
    pub(crate) fn add_flag_value(&mut self, raw: &str) {
        for pair in raw.split(',').filter(|p| !p.is_empty()) {
            let item = match pair.split_once(':') {
                Some((component, value)) => (component.trim().to_string(), value.trim().to_string()),
                None => (String::new(), pair.trim().to_string()),
            };
            self.given.push(item);
        }
    }

    /// The flag's value as upstream's `String()` shows it (`/flagz`): `component:pair` items,
    /// sorted by component, the items of one component in the order given.
    pub fn flag_text(&self) -> String {
        let mut items: Vec<&(String, String)> = self.given.iter().collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        items.iter().map(|(component, pair)| format!("{component}:{pair}")).collect::<Vec<_>>().join(",")
    }

    /// Sets the gates given on the command line at the emulated and minimum compatibility
    /// versions: upstream's registry `Set` (components), then `featureGate.Set` (pairs), then
    /// `unsafeSetFromMap` (unknown names are skipped, locked gates and gates that do not exist
    /// yet are refused, then the dependencies are checked). Several errors of one step are
    /// reported together as `[a, b]` (`utilerrors.NewAggregate`).
    pub(crate) fn set(
        &mut self,
        emulation: KubeVersion,
        min_compatibility: KubeVersion,
    ) -> Result<(), FeatureGateError> {
        self.emulation = emulation;
        self.min_compatibility = min_compatibility;
        let mut by_component: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (component, pair) in &self.given {
            by_component.entry(component.as_str()).or_default().push(pair.as_str());
        }
        if by_component.contains_key("") && by_component.contains_key("kube") {
            return Err(FeatureGateError::MixedPrefixes);
        }
        if let Some(component) = by_component.keys().find(|c| !matches!(**c, "" | "kube")) {
            return Err(FeatureGateError::UnregisteredComponent(component.to_string()));
        }
        let joined = by_component.values().flatten().copied().collect::<Vec<_>>().join(",");
        self.explicit = parse_pairs(&joined)?;
        aggregate(self.refused())?;
        aggregate(self.unmet_dependencies())
    }

    /// Upstream `unsafeSetFromMap`'s refusals: locked gates set away from their default, and
    /// gates that do not exist yet at the emulated version.
    fn refused(&self) -> Vec<FeatureGateError> {
        let mut errors = Vec::new();
        for (name, value) in &self.explicit {
            let Some(gate) = lookup(name) else { continue };
            match self.spec(gate) {
                Some(spec) if spec.locked && spec.default != *value => {
                    errors.push(FeatureGateError::Locked { name: name.clone(), value: *value, locked_to: spec.default })
                }
                Some(_) => {}
                None => errors.push(FeatureGateError::PreAlpha {
                    name: name.clone(),
                    value: *value,
                    emulation: self.emulation,
                    min_compatibility: self.min_compatibility,
                }),
            }
        }
        errors
    }

    /// Gates that are on while a gate they depend on is off (upstream's dependency check).
    fn unmet_dependencies(&self) -> Vec<FeatureGateError> {
        KNOWN_GATES
            .iter()
            .filter(|gate| !gate.depends_on.is_empty() && self.is_enabled(gate.name))
            .filter_map(|gate| {
                let off: Vec<&'static str> =
                    gate.depends_on.iter().copied().filter(|dep| !self.is_enabled(dep)).collect();
                (!off.is_empty()).then_some(FeatureGateError::UnmetDependencies { gate: gate.name, off })
            })
            .collect()
    }

    /// What upstream logs once the gates are set, one line each: unknown names (a warning),
    /// GA and deprecated gates set explicitly (`unsafeSetFromMap`'s structured info lines), and
    /// the registry's warning about alpha gates on at an emulated version older than the
    /// binary (always so for a patch release: 1.36.2 is newer than 1.36).
    pub fn warnings(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, value) in &self.explicit {
            let Some(gate) = lookup(name) else {
                lines.push(format!("unrecognized feature gate: {name}"));
                continue;
            };
            let kind = match self.spec(gate).map(|s| s.stage) {
                Some(Stage::Ga) => "GA",
                Some(Stage::Deprecated) => "deprecated",
                _ => continue,
            };
            lines.push(format!(
                "\"Warning: setting {kind} feature gate. It will be removed in a future release.\" featureGate=\"{name}\" \
                 value={value}"
            ));
        }
        let alpha_on: Vec<&str> = self
            .all()
            .into_iter()
            .filter(|(_, stage, enabled)| *stage == Stage::Alpha.name() && *enabled)
            .map(|(name, _, _)| name)
            .collect();
        if !alpha_on.is_empty() {
            lines.push(format!(
                "component has alpha features enabled in emulated version, this is unsupported: features=[{}]",
                alpha_on.join(" ")
            ));
        }
        lines
    }
}

/// Upstream `featureGate.Set`: `Name=bool` pairs separated by commas; a later value wins.
fn parse_pairs(joined: &str) -> Result<BTreeMap<String, bool>, FeatureGateError> {
    let mut gates = BTreeMap::new();
    for pair in joined.split(',').filter(|p| !p.is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(FeatureGateError::MissingValue(pair.trim().to_string()));
        };
        let (name, value) = (name.trim(), value.trim());
        let enabled = match value {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => return Err(FeatureGateError::NotABool { name: name.to_string(), value: value.to_string() }),
        };
        gates.insert(name.to_string(), enabled);
    }
    Ok(gates)
}

/// `utilerrors.NewAggregate` of one step's refusals: one is reported as itself (so that it can
/// be matched; an aggregate of one reads the same), several as `[a, b]`.
fn aggregate(mut errors: Vec<FeatureGateError>) -> Result<(), FeatureGateError> {
    match errors.len() {
        1 => Err(errors.remove(0)),
        _ => Aggregate::from_errors(errors).map_err(FeatureGateError::Several),
    }
}

#[cfg(test)]
mod tests;
