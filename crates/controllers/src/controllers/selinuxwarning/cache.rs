//! The volumes of all pods with the SELinux label and change policy each pod uses them with, and
//! the conflicts between them, after upstream v1.36's `selinuxwarning/cache` (`volumecache.go`,
//! `conflict.go`), `translator/selinux_translator.go` and `internal/parse`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use parking_lot::Mutex;

/// A pod, by namespace and name (client-go's `cache.ObjectName`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One conflict between two pods using the same volume (`Conflict`); each is reported on both.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conflict {
    /// `SELinuxChangePolicy` or `SELinuxLabel`: the metric's `property` label.
    pub property_name: &'static str,
    /// The Event's reason.
    pub event_reason: &'static str,
    /// The pod the Event is about.
    pub pod: PodKey,
    /// The pod's label or policy.
    pub property_value: String,
    /// The pod it conflicts with (named in the message only within one namespace).
    pub other_pod: PodKey,
    /// The other pod's label or policy.
    pub other_property_value: String,
}

impl Conflict {
    /// `EventMessage`: names the other pod only when it is in the same namespace. Upstream's
    /// `fmt.Sprint` puts no space between the property name and the quoted value in the
    /// second form; kept.
    pub fn event_message(&self) -> String {
        let (name, value, other) = (self.property_name, &self.property_value, &self.other_property_value);
        if self.pod.namespace == self.other_pod.namespace {
            format!(
                "{name} \"{value}\" conflicts with pod {} that uses the same volume as this pod with {name} \
                 \"{other}\". If both pods land on the same node, only one of them may access the volume.",
                self.other_pod.name
            )
        } else {
            format!(
                "{name}\"{value}\" conflicts with another pod that uses the same volume as this pod with a different \
                 {name}. If both pods land on the same node, only one of them may access the volume."
            )
        }
    }
}

/// `ParseSELinuxLabel`: `user:role:type:level`, missing parts empty (the level may hold `:`).
pub fn parse_label(label: &str) -> [String; 4] {
    let mut parts: [String; 4] = Default::default();
    for (part, value) in parts.iter_mut().zip(label.splitn(4, ':')) {
        *part = value.to_string();
    }
    parts
}

/// `ControllerSELinuxTranslator.ConflictsParsed`: the controller cannot know the nodes'
/// defaults, so an empty user, role or type matches anything; the level must always match.
pub fn labels_conflict(a: &[String; 4], b: &[String; 4]) -> bool {
    (0..4).any(|i| a[i] != b[i] && (i == 3 || (!a[i].is_empty() && !b[i].is_empty())))
}

/// How one pod uses a volume (`podInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodUse {
    label: String,
    parts: [String; 4],
    change_policy: String,
}

/// A volume used by pods (`usedVolume`).
#[derive(Debug, Default)]
struct UsedVolume {
    csi_driver: String,
    pods: HashMap<PodKey, PodUse>,
}

#[derive(Debug, Default)]
struct State {
    volumes: HashMap<String, UsedVolume>,
    /// The reverse index: the volumes of each pod.
    pod_volumes: HashMap<PodKey, HashSet<String>>,
    /// The active conflicts per volume, both directions.
    conflicts: HashMap<String, Vec<Conflict>>,
}

/// `volumeCache`.
#[derive(Debug, Default)]
pub struct VolumeCache {
    state: Mutex<State>,
}

impl VolumeCache {
    /// `AddVolume`: records how `pod` uses `volume` and returns the conflicts this causes
    /// (none when nothing changed since the pod was last added).
    pub fn add_volume(
        &self,
        volume: &str,
        pod: &PodKey,
        label: &str,
        change_policy: &str,
        csi_driver: &str,
    ) -> Vec<Conflict> {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let info = PodUse { label: label.to_string(), parts: parse_label(label), change_policy: change_policy.into() };
        let Some(used) = state.volumes.get_mut(volume) else {
            let pods = HashMap::from([(pod.clone(), info)]);
            state.volumes.insert(volume.to_string(), UsedVolume { csi_driver: csi_driver.to_string(), pods });
            state.pod_volumes.entry(pod.clone()).or_default().insert(volume.to_string());
            return Vec::new();
        };
        if used.pods.get(pod) == Some(&info) {
            return Vec::new();
        }
        used.pods.insert(pod.clone(), info.clone());
        state.pod_volumes.entry(pod.clone()).or_default().insert(volume.to_string());
        let mut conflicts = Vec::new();
        for (other, other_info) in &used.pods {
            if other_info.change_policy != info.change_policy {
                conflicts.extend(pair(
                    ("SELinuxChangePolicy", "SELinuxChangePolicyConflict"),
                    (pod, &info.change_policy),
                    (other, &other_info.change_policy),
                ));
            }
            if labels_conflict(&other_info.parts, &info.parts) {
                conflicts.extend(pair(
                    ("SELinuxLabel", "SELinuxLabelConflict"),
                    (pod, &info.label),
                    (other, &other_info.label),
                ));
            }
        }
        // The volume's conflicts: this pod's stale ones replaced by the new ones.
        let mut updated: Vec<Conflict> = state.conflicts.remove(volume).unwrap_or_default();
        updated.retain(|c| c.pod != *pod && c.other_pod != *pod);
        updated.extend(conflicts.iter().cloned());
        if !updated.is_empty() {
            state.conflicts.insert(volume.to_string(), updated);
        }
        conflicts
    }

    /// `DeletePod`: forgets the pod, its conflicts and the volumes only it used.
    pub fn delete_pod(&self, pod: &PodKey) {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let Some(volumes) = state.pod_volumes.remove(pod) else { return };
        for volume in &volumes {
            if let Some(conflicts) = state.conflicts.get_mut(volume) {
                conflicts.retain(|c| c.pod != *pod && c.other_pod != *pod);
                if conflicts.is_empty() {
                    state.conflicts.remove(volume);
                }
            }
            if let Some(used) = state.volumes.get_mut(volume) {
                used.pods.remove(pod);
                if used.pods.is_empty() {
                    state.volumes.remove(volume);
                }
            }
        }
    }

    /// `GetPodsForCSIDriver`: the pods using a volume of the driver.
    pub fn pods_for_csi_driver(&self, driver: &str) -> Vec<PodKey> {
        let state = self.state.lock();
        let used = state.volumes.values().filter(|v| v.csi_driver == driver);
        let pods: BTreeSet<PodKey> = used.flat_map(|v| v.pods.keys().cloned()).collect();
        pods.into_iter().collect()
    }

    /// `GetConflicts`: the active conflicts, without duplicates.
    pub fn conflicts(&self) -> Vec<Conflict> {
        let state = self.state.lock();
        let unique: HashSet<&Conflict> = state.conflicts.values().flatten().collect();
        unique.into_iter().cloned().collect()
    }
}

/// A conflict reported on both pods.
fn pair(
    (property_name, event_reason): (&'static str, &'static str),
    (pod, value): (&PodKey, &str),
    (other, other_value): (&PodKey, &str),
) -> [Conflict; 2] {
    let conflict = |pod: &PodKey, value: &str, other: &PodKey, other_value: &str| Conflict {
        property_name,
        event_reason,
        pod: pod.clone(),
        property_value: value.to_string(),
        other_pod: other.clone(),
        other_property_value: other_value.to_string(),
    };
    [conflict(pod, value, other, other_value), conflict(other, other_value, pod, value)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(namespace: &str, name: &str) -> PodKey {
        PodKey { namespace: namespace.into(), name: name.into() }
    }

    fn parsed(label: &str) -> [String; 4] {
        parse_label(label)
    }

    #[test]
    fn labels_parse_into_four_parts() {
        assert_eq!(parsed("a:b:c:s0:c1,c2"), ["a", "b", "c", "s0:c1,c2"]);
        assert_eq!(parsed(""), ["", "", "", ""]);
        assert_eq!(parsed("a:b"), ["a", "b", "", ""]);
    }

    #[test]
    fn empty_parts_but_the_level_match_anything() {
        let conflicts = |a: &str, b: &str| labels_conflict(&parsed(a), &parsed(b));
        assert!(!conflicts("system_u:system_r:container_t:s0:c1,c2", ":::s0:c1,c2"));
        assert!(conflicts("system_u:system_r:container_t:s0:c1,c2", ":::s0:c98,c99"));
        assert!(conflicts(":::s0:c1,c2", ""));
        assert!(conflicts(":::s0:c1,c2", ":::"));
        assert!(conflicts("a:b:c:s0", "x:b:c:s0"));
        assert!(!conflicts("", ""));
    }

    #[test]
    fn messages_name_the_other_pod_only_in_the_same_namespace() {
        let [same, _] = pair(
            ("SELinuxLabel", "SELinuxLabelConflict"),
            (&key("ns", "a"), ":::s0:c1"),
            (&key("ns", "b"), ":::s0:c2"),
        );
        assert_eq!(
            same.event_message(),
            "SELinuxLabel \":::s0:c1\" conflicts with pod b that uses the same volume as this pod with SELinuxLabel \
             \":::s0:c2\". If both pods land on the same node, only one of them may access the volume."
        );
        let [other, _] = pair(
            ("SELinuxChangePolicy", "SELinuxChangePolicyConflict"),
            (&key("ns1", "a"), "MountOption"),
            (&key("ns2", "b"), "Recursive"),
        );
        assert_eq!(
            other.event_message(),
            "SELinuxChangePolicy\"MountOption\" conflicts with another pod that uses the same volume as this pod \
             with a different SELinuxChangePolicy. If both pods land on the same node, only one of them may access \
             the volume."
        );
    }

    #[test]
    fn conflicts_are_reported_on_both_pods_once_and_forgotten_with_a_pod() {
        let cache = VolumeCache::default();
        let (a, b, c) = (key("ns", "a"), key("ns", "b"), key("ns", "c"));
        assert!(cache.add_volume("vol", &a, ":::s0:c1", "MountOption", "drv").is_empty());
        let conflicts = cache.add_volume("vol", &b, ":::s0:c2", "Recursive", "drv");
        let reasons: Vec<(&str, &PodKey)> = conflicts.iter().map(|c| (c.event_reason, &c.pod)).collect();
        assert_eq!(
            reasons,
            [
                ("SELinuxChangePolicyConflict", &b),
                ("SELinuxChangePolicyConflict", &a),
                ("SELinuxLabelConflict", &b),
                ("SELinuxLabelConflict", &a)
            ]
        );
        assert_eq!(conflicts[0].property_value, "Recursive");
        assert_eq!(conflicts[0].other_property_value, "MountOption");
        // Nothing changed: nothing new to report, the conflicts stay active.
        assert!(cache.add_volume("vol", &b, ":::s0:c2", "Recursive", "drv").is_empty());
        assert_eq!(cache.conflicts().len(), 4);
        // A third pod matching `a` conflicts with `b` only.
        let third = cache.add_volume("vol", &c, ":::s0:c1", "MountOption", "drv");
        assert!(third.iter().all(|x| x.pod == b || x.other_pod == b), "{third:?}");
        assert_eq!(cache.conflicts().len(), 8);
        assert_eq!(cache.pods_for_csi_driver("drv"), [a.clone(), b.clone(), c.clone()]);
        assert!(cache.pods_for_csi_driver("other").is_empty());

        cache.delete_pod(&b);
        assert!(cache.conflicts().is_empty());
        assert_eq!(cache.pods_for_csi_driver("drv"), [a.clone(), c.clone()]);
        cache.delete_pod(&a);
        cache.delete_pod(&c);
        assert!(cache.pods_for_csi_driver("drv").is_empty());
        assert!(cache.state.lock().volumes.is_empty());
    }

    #[test]
    fn a_pod_changing_its_label_replaces_its_conflicts() {
        let cache = VolumeCache::default();
        let (a, b) = (key("ns", "a"), key("ns", "b"));
        cache.add_volume("vol", &a, ":::s0:c1", "MountOption", "");
        assert_eq!(cache.add_volume("vol", &b, ":::s0:c2", "MountOption", "").len(), 2);
        assert!(cache.add_volume("vol", &b, ":::s0:c1", "MountOption", "").is_empty());
        assert!(cache.conflicts().is_empty(), "the resolved conflict is gone");
    }
}
