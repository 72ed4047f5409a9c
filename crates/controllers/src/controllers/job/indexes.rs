//! Indexed Jobs (`indexed_job_utils.go`): completion indexes on pods, the interval lists of
//! `status.completedIndexes` / `status.failedIndexes` ("1,3-5,7"), which indexes to start
//! next, which duplicate pods to remove, and the per-index failure counts that pods carry.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::controllers::podutil::ranking::active_pods_order;

/// `batch.kubernetes.io/job-completion-index`: an annotation, and a label (`PodIndexLabel`).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// How many counted failures the index had before this pod (`backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// How many failures the pod failure policy ignored for the index before this pod.
pub const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";
/// The environment variable each container of an Indexed Job gets.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// `names.MaxGeneratedNameLength`: 63 minus the 5 random characters.
const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// `getCompletionIndex`: the pod's index, if it has a valid one.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    let value = pod.metadata.annotations.as_ref()?.get(COMPLETION_INDEX)?;
    value.parse::<i32>().ok().filter(|i| *i >= 0)
}

/// An index within `0..completions`.
pub fn valid_index(pod: &Pod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|i| *i < completions)
}

/// `orderedIntervals`: sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals(Vec<(i32, i32)>);

impl Intervals {
    /// `parseIndexesFromString`: corrupt intervals are skipped; indexes at or past
    /// `completions` are dropped.
    pub fn parse(text: &str, completions: i32) -> Intervals {
        let mut result: Vec<(i32, i32)> = Vec::new();
        if text.is_empty() {
            return Intervals(result);
        }
        for part in text.split(',') {
            let mut limits = part.split('-');
            let Ok(first) = limits.next().unwrap_or("").parse::<i32>() else {
                log::info!("Corrupted indexes interval, ignoring interval={part:?}");
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                Some(last) => match last.parse::<i32>() {
                    Ok(last) => last.min(completions - 1),
                    Err(_) => {
                        log::info!("Corrupted indexes interval, ignoring interval={part:?}");
                        continue;
                    }
                },
                None => first,
            };
            match result.last_mut() {
                Some(previous) if previous.1 == first - 1 => previous.1 = last,
                _ => result.push((first, last)),
            }
        }
        Intervals(result)
    }

    /// `withOrderedIndexes`: these and the sorted `indexes`.
    pub fn with_indexes(&self, indexes: impl IntoIterator<Item = i32>) -> Intervals {
        self.merge(&Intervals(indexes.into_iter().map(|i| (i, i)).collect()))
    }

    /// `merge`: the union of two interval lists.
    pub fn merge(&self, other: &Intervals) -> Intervals {
        let mut all: Vec<(i32, i32)> = self.0.iter().chain(other.0.iter()).copied().collect();
        all.sort_by_key(|i| i.0);
        let mut result: Vec<(i32, i32)> = Vec::new();
        for interval in all {
            match result.last_mut() {
                Some(last) if interval.0 <= last.1 + 1 => last.1 = last.1.max(interval.1),
                _ => result.push(interval),
            }
        }
        Intervals(result)
    }

    /// How many indexes.
    pub fn total(&self) -> i32 {
        self.0.iter().map(|(first, last)| last - first + 1).sum()
    }

    pub fn has(&self, index: i32) -> bool {
        self.0.iter().any(|(first, last)| *first <= index && index <= *last)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranges, in order.
    pub fn ranges(&self) -> &[(i32, i32)] {
        &self.0
    }
}

/// "1,3-5,7": a range of two is written as two indexes.
impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, (first, last)) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{first}")?;
            if last == &(first + 1) {
                write!(f, ",{last}")?;
            } else if last > first {
                write!(f, "-{last}")?;
            }
        }
        Ok(())
    }
}

/// `getIndexes`: the valid indexes of these pods.
pub fn indexes_of<'a>(pods: impl IntoIterator<Item = &'a Arc<Pod>>) -> BTreeSet<i32> {
    pods.into_iter().filter_map(|p| completion_index(p)).collect()
}

/// `firstPendingIndexes`: up to `count` indexes below `completions` that are neither in
/// `busy` (succeeded, active, failed, terminating as the caller decides).
pub fn first_pending_indexes(busy: &Intervals, count: usize, completions: i32) -> Vec<i32> {
    (0..completions).filter(|i| !busy.has(*i)).take(count).collect()
}

/// `appendDuplicatedIndexPodsForRemoval`: pods without a valid index, with an index past
/// `completions`, and all but the best-ranked pod of a repeated index are removed.
/// Returns (to remove, left).
pub fn duplicated_index_pods(pods: &[Arc<Pod>], completions: i32) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut sorted: Vec<Arc<Pod>> = pods.to_vec();
    sorted.sort_by_key(|p| completion_index(p).unwrap_or(-1));
    let (mut remove, mut left) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < sorted.len() {
        let index = completion_index(&sorted[start]);
        let end = start + sorted[start..].iter().take_while(|p| completion_index(p) == index).count();
        let mut group: Vec<Arc<Pod>> = sorted[start..end].to_vec();
        match index {
            None => remove.extend(group),
            Some(i) if i >= completions => remove.extend(group),
            Some(_) => {
                group.sort_by(|a, b| active_pods_order(a, b));
                let keep = group.pop();
                remove.extend(group);
                left.extend(keep);
            }
        }
        start = end;
    }
    (remove, left)
}

/// An annotation's count, 0 when absent or invalid (`parseInt32`).
fn count_annotation(pod: &Pod, key: &str) -> i32 {
    let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(key)) else { return 0 };
    match value.parse::<i64>() {
        Ok(n) if (0..=i64::from(i32::MAX)).contains(&n) => n as i32,
        _ => {
            log::error!("Failed to parse the value value={value:?}");
            0
        }
    }
}

/// `getIndexFailureCount`.
pub fn index_failure_count(pod: &Pod) -> i32 {
    count_annotation(pod, INDEX_FAILURE_COUNT)
}

/// `getIndexAbsoluteFailureCount`: counted and ignored failures.
pub fn index_absolute_failure_count(pod: &Pod) -> i32 {
    count_annotation(pod, INDEX_FAILURE_COUNT) + count_annotation(pod, INDEX_IGNORED_FAILURE_COUNT)
}

/// `getNewIndexFailureCounts`: the counts for the pod replacing `replaced` (failed, counted
/// or ignored as `counted` says).
pub fn new_index_failure_counts(replaced: Option<&Pod>, counted: bool) -> (i32, i32) {
    let Some(pod) = replaced else { return (0, 0) };
    let (failures, ignored) = (index_failure_count(pod), count_annotation(pod, INDEX_IGNORED_FAILURE_COUNT));
    if counted { (failures + 1, ignored) } else { (failures, ignored + 1) }
}

/// `podGenerateNameWithIndex`: `<job>-<index>-`, the job name cut to fit.
pub fn generate_name_with_index(job_name: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job_name}{suffix}");
    if prefix.len() > MAX_GENERATED_NAME_LENGTH {
        let keep = MAX_GENERATED_NAME_LENGTH - suffix.len();
        let mut cut = keep;
        while !job_name.is_char_boundary(cut) {
            cut -= 1;
        }
        return format!("{}{suffix}", &job_name[..cut]);
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, index: Option<&str>) -> Arc<Pod> {
        let annotations = index.map(|i| json!({COMPLETION_INDEX: i})).unwrap_or(json!({}));
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "uid": name, "annotations": annotations}}))
                .expect("a pod"),
        )
    }

    #[test]
    fn intervals_parse_merge_and_print_as_upstream() {
        let parsed = Intervals::parse("0,2-4,6,7,x,9-12", 11);
        assert_eq!(parsed.to_string(), "0,2-4,6,7,9,10");
        assert_eq!(parsed.total(), 8);
        assert!(parsed.has(3) && !parsed.has(5) && parsed.has(10));
        let merged = parsed.with_indexes([1, 5, 8]);
        assert_eq!(merged.to_string(), "0-10");
        assert_eq!(Intervals::parse("", 3), Intervals::default());
        assert_eq!(Intervals::default().with_indexes([1, 2]).to_string(), "1,2");
        assert_eq!(Intervals::default().with_indexes([1, 2, 3]).to_string(), "1-3");
        assert_eq!(Intervals::parse("5-9", 5).to_string(), "");
    }

    #[test]
    fn pending_indexes_skip_busy_ones() {
        let busy = Intervals::parse("0,2-3", 10);
        assert_eq!(first_pending_indexes(&busy, 3, 10), [1, 4, 5]);
        assert_eq!(first_pending_indexes(&busy, 3, 5), [1, 4]);
    }

    #[test]
    fn duplicated_and_invalid_indexes_are_removed() {
        let pods = [pod("a", Some("0")), pod("b", Some("0")), pod("c", None), pod("d", Some("7")), pod("e", Some("1"))];
        let (remove, left) = duplicated_index_pods(&pods, 5);
        let names = |v: &[Arc<Pod>]| {
            let mut n: Vec<String> = v.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&remove).len(), 3);
        assert!(names(&remove).contains(&"c".to_string()) && names(&remove).contains(&"d".to_string()));
        assert_eq!(left.len(), 2);
    }

    #[test]
    fn generated_names_keep_the_index() {
        assert_eq!(generate_name_with_index("pi", 3), "pi-3-");
        let long = "x".repeat(70);
        let name = generate_name_with_index(&long, 12);
        assert_eq!(name.len(), 58);
        assert!(name.ends_with("-12-"));
    }
}
