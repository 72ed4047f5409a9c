//! Kubernetes versions: the release this controller manager matches ([`KUBERNETES_RELEASE`]),
//! and a port of apimachinery's `pkg/util/version` parser (`Parse`) with its error wording, which
//! `--emulated-version` and `--min-compatibility-version` go through.

use std::fmt;

use super::strconv::quote;

/// A Kubernetes release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    /// `1`.
    pub major: u32,
    /// `36`.
    pub minor: u32,
    /// `2`.
    pub patch: u32,
}

impl Release {
    /// Its Git tag, `v1.36.2`, as upstream's `version.Info.GitVersion`.
    pub fn git_version(&self) -> String {
        format!("v{self}")
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The upstream Kubernetes release whose kube-controller-manager this one matches: what
/// `--version` prints, the binary version of `--emulated-version`'s range, the build and
/// version metrics and `/statusz` report. The one place that names it.
pub const KUBERNETES_RELEASE: Release = Release { major: 1, minor: 36, patch: 2 };

/// A parsed version (upstream `version.Version`): numeric components, then an optional
/// pre-release and build metadata (semantic versions only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    components: Vec<u64>,
    pre_release: String,
    build_metadata: String,
}

impl Version {
    /// The first component.
    pub fn major(&self) -> u64 {
        self.components[0]
    }

    /// The second component.
    pub fn minor(&self) -> u64 {
        self.components[1]
    }

    /// The third component, 0 when there is none.
    pub fn patch(&self) -> u64 {
        self.components.get(2).copied().unwrap_or(0)
    }
}

impl fmt::Display for Version {
    /// Upstream `Version.String`: `1.34`, `1.34.0-alpha.1+build`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers: Vec<String> = self.components.iter().map(u64::to_string).collect();
        f.write_str(&numbers.join("."))?;
        if !self.pre_release.is_empty() {
            write!(f, "-{}", self.pre_release)?;
        }
        if !self.build_metadata.is_empty() {
            write!(f, "+{}", self.build_metadata)?;
        }
        Ok(())
    }
}

/// Text that is not a version, in the words of upstream's `k8s.io/apimachinery/pkg/util/version`
/// (texts are quoted as Go's `%q`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// No leading number.
    #[error("could not parse {} as version", quote(.text))]
    NotAVersion {
        /// The whole text.
        text: String,
    },
    /// The wrong number of components (three for a semantic version, at least two otherwise).
    #[error("illegal version string {}", quote(.text))]
    Illegal {
        /// The whole text.
        text: String,
    },
    /// A component (or numeric pre-release part) with a leading zero.
    #[error("illegal zero-prefixed version component {} in {}", quote(.component), quote(.text))]
    ZeroPrefixed {
        /// The component.
        component: String,
        /// The whole text.
        text: String,
    },
    /// A component beyond a `uint`.
    #[error(
        "illegal non-numeric version component {} in {}: strconv.ParseUint: parsing {}: value out of range",
        quote(.component),
        quote(.text),
        quote(.component)
    )]
    OutOfRange {
        /// The component.
        component: String,
        /// The whole text.
        text: String,
    },
    /// What follows a semantic version's numbers is not `-pre-release+metadata`.
    #[error("could not parse pre-release/metadata ({extra}) in version {}", quote(.text))]
    PreRelease {
        /// The text after the numbers.
        extra: String,
        /// The whole text.
        text: String,
    },
}

/// Upstream `version.Parse`: a semantic version (`1.34.0`, `v1.34.0-rc.1+b`) if the text is one,
/// else a generic one (`1.34`, with anything after the numbers ignored). The error is the
/// generic parser's.
pub fn parse(text: &str) -> Result<Version, ParseError> {
    parse_as(text, true).or_else(|_| parse_as(text, false))
}

/// Upstream `version.ParseSemantic`: `major.minor.patch`, an optional `v` before it and an
/// optional pre-release and build metadata after it.
pub fn parse_semantic(text: &str) -> Result<Version, ParseError> {
    parse_as(text, true)
}

/// RE2's `\s`.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0c' | '\r')
}

/// Upstream's `parse(str, semver)`, whose `versionMatchRE` is `^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)*$`.
fn parse_as(text: &str, semver: bool) -> Result<Version, ParseError> {
    let rest = text.trim_start_matches(is_space);
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let numbers_end = numbers_len(rest);
    if numbers_end == 0 {
        return Err(ParseError::NotAVersion { text: text.to_string() });
    }
    let (numbers, extra) = rest.split_at(numbers_end);
    let parts: Vec<&str> = numbers.split('.').collect();
    if (semver && parts.len() != 3) || (!semver && parts.len() < 2) {
        return Err(ParseError::Illegal { text: text.to_string() });
    }
    let mut components = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        if (i == 0 || semver) && part.starts_with('0') && *part != "0" {
            return Err(ParseError::ZeroPrefixed { component: part.to_string(), text: text.to_string() });
        }
        let number = part
            .parse::<u64>()
            .map_err(|_| ParseError::OutOfRange { component: part.to_string(), text: text.to_string() })?;
        components.push(number);
    }
    let mut version = Version { components, pre_release: String::new(), build_metadata: String::new() };
    if semver && !extra.is_empty() {
        let (pre, build) = pre_release_and_build(extra)
            .ok_or_else(|| ParseError::PreRelease { extra: extra.to_string(), text: text.to_string() })?;
        for part in pre.split('.') {
            if part.bytes().all(|b| b.is_ascii_digit()) && part.starts_with('0') && part != "0" {
                return Err(ParseError::ZeroPrefixed { component: part.to_string(), text: text.to_string() });
            }
        }
        version.pre_release = pre.to_string();
        version.build_metadata = build.to_string();
    }
    Ok(version)
}

/// The length of `[0-9]+(?:\.[0-9]+)*` at the start of `text` (0 when it does not start with a
/// digit).
fn numbers_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut end = digits(0);
    if end == 0 {
        return 0;
    }
    while bytes.get(end) == Some(&b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
    }
    end
}

/// Upstream's `extraMatchRE`:
/// `^(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\s*$`.
fn pre_release_and_build(extra: &str) -> Option<(&str, &str)> {
    let extra = extra.trim_end_matches(is_space);
    let identifiers = |text: &str| {
        !text.is_empty()
            && text.split('.').all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let (pre, build) = match extra.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (extra, None),
    };
    let pre = match pre {
        "" => "",
        _ => pre.strip_prefix('-').filter(|p| identifiers(p))?,
    };
    let build = match build {
        None => "",
        Some(build) => Some(build).filter(|b| identifiers(b))?,
    };
    Some((pre, build))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_generic_and_semantic_versions() {
        let shown = |text: &str| parse(text).map(|v| v.to_string());
        assert_eq!(shown("1.34"), Ok("1.34".into()));
        assert_eq!(shown("v1.34"), Ok("1.34".into()));
        assert_eq!(shown(" 1.34.0"), Ok("1.34.0".into()));
        assert_eq!(shown("1.34.1-alpha.1+b.2"), Ok("1.34.1-alpha.1+b.2".into()));
        // Not a semantic version: the generic parser ignores what follows the numbers.
        assert_eq!(shown("1.34-alpha.1"), Ok("1.34".into()));
        assert_eq!(shown("1.34abc"), Ok("1.34".into()));
        assert_eq!(shown("1.34."), Ok("1.34".into()));
        let v = parse("1.33.1").unwrap();
        assert_eq!((v.major(), v.minor(), v.patch()), (1, 33, 1));
        assert_eq!(parse("1.33").unwrap().patch(), 0);
    }

    #[test]
    fn errors_are_upstreams() {
        assert_eq!(parse("abc").map_err(|e| e.to_string()), Err(r#"could not parse "abc" as version"#.into()));
        assert_eq!(parse("").map_err(|e| e.to_string()), Err(r#"could not parse "" as version"#.into()));
        assert_eq!(parse("1").map_err(|e| e.to_string()), Err(r#"illegal version string "1""#.into()));
        assert_eq!(
            parse("01.2").map_err(|e| e.to_string()),
            Err(r#"illegal zero-prefixed version component "01" in "01.2""#.into())
        );
        assert_eq!(
            parse("1.99999999999999999999").map_err(|e| e.to_string()),
            Err(r#"illegal non-numeric version component "99999999999999999999" in "1.99999999999999999999": strconv.ParseUint: parsing "99999999999999999999": value out of range"#.into())
        );
    }

    #[test]
    fn semantic_versions_need_three_components() {
        assert_eq!(parse_semantic("v1.36.2-custom+abc").map(|v| v.patch()), Ok(2));
        assert_eq!(parse_semantic("v1.36").map_err(|e| e.to_string()), Err(r#"illegal version string "v1.36""#.into()));
        assert_eq!(
            parse_semantic("v1.36.2.1").map_err(|e| e.to_string()),
            Err(r#"illegal version string "v1.36.2.1""#.into())
        );
        assert_eq!(
            parse_semantic("1.36.2_x").map_err(|e| e.to_string()),
            Err(r#"could not parse pre-release/metadata (_x) in version "1.36.2_x""#.into())
        );
    }

    #[test]
    fn release_prints_as_its_tag() {
        assert_eq!(KUBERNETES_RELEASE.git_version(), "v1.36.2");
    }
}
