//! `k8s.io/apimachinery/pkg/util/intstr`: a count given as a number or a percentage.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A string `IntOrString` that is not a percentage, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for IntOrString: invalid type: string is not a percentage")]
pub struct NotAPercentage;

/// `GetScaledValueFromIntOrPercent`: an int as is, `N%` of `total` rounded up or down.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, NotAPercentage> {
    match value {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let percent: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or(NotAPercentage)?;
            let product = percent * i64::from(total);
            let value = if round_up { (product + 99).div_euclid(100) } else { product.div_euclid(100) };
            Ok(value as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_as_asked() {
        let percent = IntOrString::String("25%".into());
        assert_eq!(scaled_value(&percent, 10, true), Ok(3));
        assert_eq!(scaled_value(&percent, 10, false), Ok(2));
        assert_eq!(scaled_value(&IntOrString::Int(4), 10, false), Ok(4));
        assert!(scaled_value(&IntOrString::String("x".into()), 10, false).is_err());
    }
}
