//! `--emulated-version` and `--min-compatibility-version`: the versions the feature gates (and
//! upstream's APIs) are set for, as component-base's compatibility registry
//! (`compatibility/registry.go` `Set`, `toVersionMap`; `compatibility/version.go`
//! `effectiveVersion`) does for its one component, `kube`.
//!
//! The binary version is [`KUBERNETES_RELEASE`]; both versions may go back three minors
//! (upstream's floors for kube-controller-manager), and the minimum compatibility version
//! defaults to one minor before the emulated version.

use std::collections::BTreeMap;

use super::values::{KUBE_VERSION, KubeVersion};
use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::version::{self, KUBERNETES_RELEASE, Version, parse};

/// The oldest emulated and minimum compatibility version upstream accepts.
pub const FLOOR: KubeVersion = KubeVersion { major: KUBE_VERSION.major, minor: KUBE_VERSION.minor - 3 };

/// Why `--emulated-version` or `--min-compatibility-version` is refused, in the compatibility
/// registry's words.
#[derive(Debug, thiserror::Error)]
pub enum CompatibilityError {
    /// An item's version is not a version.
    #[error("{0}")]
    Version(#[from] version::ParseError),
    /// A version with a patch number.
    #[error("patch version not allowed, got: {component}={version}")]
    PatchVersion {
        /// The component the item names (`kube`).
        component: String,
        /// Its version.
        version: Box<Version>,
    },
    /// Two items for one component.
    #[error("duplicate version flag, {component}={first} and {component}={second}")]
    Duplicate {
        /// The component.
        component: String,
        /// The version of the first item.
        first: Box<Version>,
        /// The version of the second.
        second: Box<Version>,
    },
    /// A component other than `kube`.
    #[error("component not registered: {0}")]
    UnregisteredComponent(String),
    /// A major or minor number beyond 32 bits.
    #[error("version {0} is out of range")]
    OutOfRange(Box<Version>),
    /// The emulated version is newer than the binary or older than the floor.
    #[error(
        "emulation version {version} is not between [{floor}, {}.{}.0]",
        KUBERNETES_RELEASE.major,
        KUBERNETES_RELEASE.minor,
        floor = FLOOR
    )]
    Emulation {
        /// The emulated version.
        version: KubeVersion,
    },
    /// The minimum compatibility version is newer than the emulated one or older than the floor.
    #[error("minCompatibilityVersion version {version} is not between [{floor}, {emulation}]", floor = FLOOR)]
    MinCompatibility {
        /// The minimum compatibility version.
        version: KubeVersion,
        /// The emulated version.
        emulation: KubeVersion,
    },
    /// Both versions out of range, reported together (`utilerrors.NewAggregate`).
    #[error("{0}")]
    Several(#[source] Aggregate),
}

/// The two flags as given (pflag string slices), and the versions they set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compatibility {
    /// `--emulated-version` items, `[component=]major.minor`.
    pub emulated_version_flag: Vec<String>,
    /// `--min-compatibility-version` items.
    pub min_compatibility_version_flag: Vec<String>,
    /// The version whose features and defaults the controller manager has.
    pub emulation: KubeVersion,
    /// The oldest version of the control plane it must stay compatible with.
    pub min_compatibility: KubeVersion,
}

impl Default for Compatibility {
    fn default() -> Self {
        Compatibility {
            emulated_version_flag: Vec::new(),
            min_compatibility_version_flag: Vec::new(),
            emulation: KUBE_VERSION,
            min_compatibility: KUBE_VERSION.previous(),
        }
    }
}

impl Compatibility {
    /// Sets both versions from the flags (upstream's registry `Set`, up to the feature gates):
    /// the emulated version, which moves the minimum compatibility version to one minor before
    /// it (not below the floor), then the minimum compatibility version.
    pub(crate) fn set(&mut self) -> Result<(), CompatibilityError> {
        if let Some(version) = kube_version(&self.emulated_version_flag)? {
            self.emulation = version;
            self.min_compatibility = version.previous().max(FLOOR);
        }
        if let Some(version) = kube_version(&self.min_compatibility_version_flag)? {
            self.min_compatibility = version;
        }
        Ok(())
    }

    /// Upstream `effectiveVersion.Validate`: each version within its range, both errors
    /// reported together.
    pub(crate) fn validate(&self) -> Result<(), CompatibilityError> {
        let mut errors = Vec::new();
        if self.emulation > KUBE_VERSION || self.emulation < FLOOR {
            errors.push(CompatibilityError::Emulation { version: self.emulation });
        }
        if self.min_compatibility > self.emulation || self.min_compatibility < FLOOR {
            errors.push(CompatibilityError::MinCompatibility {
                version: self.min_compatibility,
                emulation: self.emulation,
            });
        }
        match errors.len() {
            // One is reported as itself, so that it can be matched (an aggregate of one reads the same).
            1 => Err(errors.remove(0)),
            _ => Aggregate::from_errors(errors).map_err(CompatibilityError::Several),
        }
    }

    /// The `Options are:` text of both flags' help (upstream `AllowedEmulationVersionRange`,
    /// `AllowedMinCompatibilityVersionRange`): `kube=1.33..1.36(default:1.36)`.
    pub(crate) fn help_ranges() -> (String, String) {
        let defaults = Compatibility::default();
        let range = |default: KubeVersion| format!("kube={FLOOR}..{KUBE_VERSION}(default:{default})");
        (range(defaults.emulation), range(defaults.min_compatibility))
    }
}

/// The version the items give the `kube` component, if any (upstream `toVersionMap`, then the
/// registry's check that each component is registered).
fn kube_version(items: &[String]) -> Result<Option<KubeVersion>, CompatibilityError> {
    let mut versions: BTreeMap<String, Version> = BTreeMap::new();
    for item in items {
        let (component, text) = match item.split_once('=') {
            Some((component, text)) => (component.trim(), text.trim()),
            None => ("kube", item.as_str()),
        };
        let version = parse(text)?;
        if version.patch() != 0 {
            return Err(CompatibilityError::PatchVersion {
                component: component.to_string(),
                version: Box::new(version),
            });
        }
        if let Some(existing) = versions.get(component) {
            return Err(CompatibilityError::Duplicate {
                component: component.to_string(),
                first: Box::new(existing.clone()),
                second: Box::new(version),
            });
        }
        versions.insert(component.to_string(), version);
    }
    if let Some(component) = versions.keys().find(|c| *c != "kube") {
        return Err(CompatibilityError::UnregisteredComponent(component.clone()));
    }
    let minor_version = |v: &Version| -> Result<KubeVersion, CompatibilityError> {
        let part = |n: u64| u32::try_from(n).map_err(|_| CompatibilityError::OutOfRange(Box::new(v.clone())));
        Ok(KubeVersion { major: part(v.major())?, minor: part(v.minor())? })
    };
    versions.get("kube").map(minor_version).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The versions the flags set, or the error's message.
    fn set(emulated: &[&str], min: &[&str]) -> Result<Compatibility, String> {
        let mut c = Compatibility {
            emulated_version_flag: emulated.iter().map(|s| s.to_string()).collect(),
            min_compatibility_version_flag: min.iter().map(|s| s.to_string()).collect(),
            ..Compatibility::default()
        };
        c.set().map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn versions(c: &Compatibility) -> (String, String) {
        (c.emulation.to_string(), c.min_compatibility.to_string())
    }

    #[test]
    fn defaults_and_ranges() {
        assert_eq!(versions(&set(&[], &[]).unwrap()), ("1.36".into(), "1.35".into()));
        assert_eq!(versions(&set(&["1.34"], &[]).unwrap()), ("1.34".into(), "1.33".into()));
        assert_eq!(versions(&set(&["kube=v1.33.0"], &[]).unwrap()), ("1.33".into(), "1.33".into()));
        assert_eq!(versions(&set(&[" 1.35-alpha.1"], &["1.35"]).unwrap()), ("1.35".into(), "1.35".into()));
        assert_eq!(
            Compatibility::help_ranges(),
            ("kube=1.33..1.36(default:1.36)".into(), "kube=1.33..1.36(default:1.35)".into())
        );
    }

    #[test]
    fn errors_are_upstreams() {
        let error = |emulated: &[&str], min: &[&str]| set(emulated, min).unwrap_err();
        assert_eq!(error(&["1.37"], &[]), "emulation version 1.37 is not between [1.33, 1.36.0]");
        assert_eq!(error(&["2.0"], &[]), "emulation version 2.0 is not between [1.33, 1.36.0]");
        assert_eq!(
            error(&["1.32"], &[]),
            "[emulation version 1.32 is not between [1.33, 1.36.0], minCompatibilityVersion version 1.33 is not \
             between [1.33, 1.32]]"
        );
        assert_eq!(error(&[], &["1.32"]), "minCompatibilityVersion version 1.32 is not between [1.33, 1.36]");
        assert_eq!(error(&["1.34"], &["1.35"]), "minCompatibilityVersion version 1.35 is not between [1.33, 1.34]");
        assert_eq!(error(&["kube=1.33.1"], &[]), "patch version not allowed, got: kube=1.33.1");
        assert_eq!(error(&["1.33", "1.34"], &[]), "duplicate version flag, kube=1.33 and kube=1.34");
        assert_eq!(error(&["abc"], &[]), r#"could not parse "abc" as version"#);
        assert_eq!(error(&["1"], &[]), r#"illegal version string "1""#);
        assert_eq!(error(&["kube="], &[]), r#"could not parse "" as version"#);
        assert_eq!(error(&["=1.34"], &[]), "component not registered: ");
        assert_eq!(error(&["1.34", "wardle=1.2"], &[]), "component not registered: wardle");
    }
}
