//! Comparing resourceVersions, as apimachinery's `util/resourceversion` (new in v1.35).
//!
//! A resourceVersion is opaque to clients in general, but kube-apiserver's are etcd revisions
//! written as decimal integers: two of the same resource compare as numbers, of any length.

use std::cmp::Ordering;

/// A resourceVersion that is not a positive decimal integer without leading zeros
/// (`InvalidResourceVersion`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource version is not well formed: {0}")]
pub struct InvalidResourceVersion(pub String);

/// `CompareResourceVersion`: how `a` compares to `b`, two resourceVersions of the same
/// resource. Either must be a positive decimal integer with no leading zero ("0", the
/// special value of lists and watches, is never a live resourceVersion); there is no length
/// limit: the longer is the greater, equal lengths compare digit by digit.
pub fn compare_resource_version(a: &str, b: &str) -> Result<Ordering, InvalidResourceVersion> {
    for version in [a, b] {
        if !is_well_formed(version) {
            return Err(InvalidResourceVersion(version.to_string()));
        }
    }
    Ok(a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

fn is_well_formed(version: &str) -> bool {
    !version.is_empty() && !version.starts_with('0') && version.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::{Equal, Greater, Less};

    /// Upstream's `TestCompareResourceVersion` cases.
    #[test]
    fn compares_as_upstream() {
        let large_less = "99999999999999999999999999999999999999999999999999";
        let large_greater = "100000000000000000000000000000000000000000000000000";
        let large = "12345678901234567890123456789012345678901234567890";
        let valid = [
            ("100", "200", Less),
            ("200", "100", Greater),
            ("1", "1", Equal),
            ("100", "100", Equal),
            ("99", "100", Less),
            ("100", "99", Greater),
            (large_less, large_greater, Less),
            (large_greater, large_less, Greater),
            (large, large, Equal),
        ];
        for (a, b, expected) in valid {
            assert_eq!(compare_resource_version(a, b), Ok(expected), "{a} vs {b}");
        }
        let invalid = [
            ("0", "1"),
            ("0", "0"),
            ("1", "0"),
            ("0100", "100"),
            ("100", "0100"),
            ("", "100"),
            ("100", ""),
            ("100a", "100"),
            ("100", "100a"),
        ];
        for (a, b) in invalid {
            assert!(compare_resource_version(a, b).is_err(), "{a} vs {b}");
        }
    }

    #[test]
    fn the_error_names_the_first_malformed_version() {
        let error = compare_resource_version("7", "-3").unwrap_err();
        assert_eq!(error.to_string(), "resource version is not well formed: -3");
        assert_eq!(compare_resource_version("x", "-3").unwrap_err().0, "x");
    }
}
