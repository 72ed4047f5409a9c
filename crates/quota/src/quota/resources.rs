//! Resource lists and their arithmetic, as `k8s.io/apiserver/pkg/quota/v1/resources.go`:
//! `Add`, `Subtract`, `SubtractWithNonNegativeResult`, `Mask`, `Equals`, `IsZero`, `Intersection`,
//! `Difference`. Quantities are exact (see [`crate::quantity`]); no floating point anywhere.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::Quantity;

/// Resource name → quantity (`corev1.ResourceList`), in name order.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A list from the API; entries that are not quantities are left out (validation refuses them).
pub fn from_api(list: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    let entries = list.into_iter().flatten();
    entries.filter_map(|(name, q)| Some((name.clone(), Quantity::parse(q.0.trim()).ok()?))).collect()
}

/// The list for the API, each quantity in its canonical form.
pub fn to_api(list: &ResourceList) -> BTreeMap<String, ApiQuantity> {
    list.iter().map(|(name, q)| (name.clone(), ApiQuantity(q.canonical()))).collect()
}

/// `Equals`: the same names with equal values (formats do not matter).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(name, q)| b.get(name) == Some(q))
}

/// `Add`: `a + b` for each name in either.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut result = a.clone();
    for (name, q) in b {
        result.entry(name.clone()).and_modify(|sum| *sum = sum.add(q)).or_insert(*q);
    }
    result
}

/// `Subtract`: `a - b` for each name in either (names only in `b` come out negated).
pub fn subtract(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut result = a.clone();
    for (name, q) in b {
        // A zero takes the other side's format, so a name only in `b` keeps its format negated.
        let current = result.get(name).copied().unwrap_or_else(Quantity::zero);
        result.insert(name.clone(), current.sub(q));
    }
    result
}

/// `SubtractWithNonNegativeResult`: `a - b`, with negative results (and names only in `b`) zero.
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut result = ResourceList::new();
    for (name, q) in a {
        let diff = b.get(name).map_or(*q, |other| q.sub(other));
        result.insert(name.clone(), if diff > Quantity::zero() { diff } else { Quantity::zero() });
    }
    for name in b.keys() {
        result.entry(name.clone()).or_insert(Quantity::zero());
    }
    result
}

/// `Mask`: the entries whose names are in `names`.
pub fn mask(list: &ResourceList, names: &[String]) -> ResourceList {
    list.iter().filter(|(name, _)| names.contains(name)).map(|(n, q)| (n.clone(), *q)).collect()
}

/// `ResourceNames`.
pub fn resource_names(list: &ResourceList) -> Vec<String> {
    list.keys().cloned().collect()
}

/// `IsZero`: every value is zero (an empty list is zero).
pub fn is_zero(list: &ResourceList) -> bool {
    list.values().all(Quantity::is_zero)
}

/// `IsNegative`: the names with a negative value.
pub fn is_negative(list: &ResourceList) -> Vec<String> {
    list.iter().filter(|(_, q)| q.is_negative()).map(|(name, _)| name.clone()).collect()
}

/// `Intersection`: the names in both, deduplicated and sorted.
pub fn intersection(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|name| b.contains(name)).cloned().collect::<BTreeSet<_>>().into_iter().collect()
}

/// `Difference`: the names of `a` not in `b`, deduplicated and sorted.
pub fn difference(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|name| !b.contains(name)).cloned().collect::<BTreeSet<_>>().into_iter().collect()
}

/// `ContainsPrefix`.
pub fn contains_prefix(prefixes: &[&str], name: &str) -> bool {
    prefixes.iter().any(|prefix| name.starts_with(prefix))
}

/// Raises every entry of `list` to the one in `other` where that is greater (`maxResourceList`).
pub fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        if list.get(name).is_none_or(|current| q > current) {
            list.insert(name.clone(), *q);
        }
    }
}

/// Adds every entry of `other` into `list` (`addResourceList`).
pub fn add_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        list.entry(name.clone()).and_modify(|sum| *sum = sum.add(q)).or_insert(*q);
    }
}

/// `AggregateContainerRequests` / `AggregateContainerLimits` (`k8s.io/component-helpers/resource`)
/// over each container's list: `app` containers add up; restartable (sidecar) init containers,
/// given as `(true, list)` in spec order, add up too, and every other init container needs its
/// own list plus the sidecars started before it while it runs, which only raises the total.
pub fn aggregate_containers(
    app: impl IntoIterator<Item = ResourceList>,
    init: impl IntoIterator<Item = (bool, ResourceList)>,
) -> ResourceList {
    let mut total = ResourceList::new();
    for own in app {
        add_into(&mut total, &own);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for (restartable, own) in init {
        let running = if restartable {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut running = own;
            add_into(&mut running, &sidecars);
            running
        };
        max_into(&mut init_max, &running);
    }
    max_into(&mut total, &init_max);
    total
}

/// `quota.prettyPrint`-style `cpu=1,pods=2`, in name order.
pub fn pretty(list: &ResourceList) -> String {
    list.iter().map(|(name, q)| format!("{name}={q}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        entries.iter().map(|(n, q)| (n.to_string(), Quantity::parse(q).expect("a quantity"))).collect()
    }

    fn names(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn add_sums_exactly_and_keeps_formats() {
        let sum = add(&list(&[("cpu", "100m"), ("memory", "1Gi")]), &list(&[("cpu", "0.9"), ("pods", "2e3")]));
        assert_eq!(pretty(&sum), "cpu=1,memory=1Gi,pods=2e3");
        let sum = add(&list(&[("memory", "1.5Gi")]), &list(&[("memory", "512Mi")]));
        assert_eq!(pretty(&sum), "memory=2Gi");
        // Zero takes the other side's format (`Quantity.Add`).
        let sum = add(&list(&[("memory", "0")]), &list(&[("memory", "1.5Gi")]));
        assert_eq!(pretty(&sum), "memory=1536Mi");
        let sum = add(&list(&[("pods", "2e3")]), &list(&[("pods", "1")]));
        assert_eq!(pretty(&sum), "pods=2001");
    }

    #[test]
    fn subtract_and_non_negative() {
        let a = list(&[("cpu", "1"), ("memory", "1Gi")]);
        let b = list(&[("cpu", "250m"), ("pods", "1")]);
        assert_eq!(pretty(&subtract(&a, &b)), "cpu=750m,memory=1Gi,pods=-1");
        let b = list(&[("cpu", "2"), ("pods", "1")]);
        assert_eq!(pretty(&subtract_non_negative(&a, &b)), "cpu=0,memory=1Gi,pods=0");
    }

    #[test]
    fn equals_compares_values_not_text() {
        assert!(equals(&list(&[("cpu", "1"), ("memory", "1Gi")]), &list(&[("cpu", "1000m"), ("memory", "1024Mi")])));
        assert!(!equals(&list(&[("cpu", "1")]), &list(&[("cpu", "1"), ("pods", "0")])));
        assert!(!equals(&list(&[("cpu", "1")]), &list(&[("memory", "1")])));
        assert!(equals(&ResourceList::new(), &ResourceList::new()));
    }

    #[test]
    fn mask_zero_and_name_sets() {
        let l = list(&[("cpu", "1"), ("memory", "0"), ("pods", "3")]);
        assert_eq!(pretty(&mask(&l, &names(&["pods", "secrets", "cpu"]))), "cpu=1,pods=3");
        assert!(is_zero(&list(&[("a", "0"), ("b", "0m")])));
        assert!(!is_zero(&l));
        assert_eq!(is_negative(&list(&[("a", "-1m"), ("b", "1")])), ["a"]);
        assert_eq!(intersection(&names(&["b", "a", "b", "c"]), &names(&["b", "a"])), ["a", "b"]);
        assert_eq!(difference(&names(&["c", "a", "c", "b"]), &names(&["b"])), ["a", "c"]);
        assert!(contains_prefix(&["hugepages-"], "hugepages-2Mi"));
    }

    #[test]
    fn api_lists_round_trip() {
        let api = BTreeMap::from([
            ("cpu".to_string(), ApiQuantity("1500m".into())),
            ("memory".to_string(), ApiQuantity("1.5Gi".into())),
            ("bad".to_string(), ApiQuantity("x".into())),
        ]);
        let parsed = from_api(Some(&api));
        assert_eq!(pretty(&parsed), "cpu=1500m,memory=1536Mi");
        assert_eq!(to_api(&parsed)["memory"].0, "1536Mi");
        assert!(from_api(None).is_empty());
    }
}
