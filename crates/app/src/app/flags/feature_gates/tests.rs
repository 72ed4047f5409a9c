use super::*;

const V133: KubeVersion = KubeVersion { major: 1, minor: 33 };
const V134: KubeVersion = KubeVersion { major: 1, minor: 34 };
const V135: KubeVersion = KubeVersion { major: 1, minor: 35 };
const V136: KubeVersion = KubeVersion { major: 1, minor: 36 };

/// The gates of `values` set at 1.36 (minimum compatibility 1.35), as upstream's defaults.
fn gates(values: &[&str]) -> Result<FeatureGates, String> {
    gates_at(values, V136, V135)
}

fn gates_at(values: &[&str], emulation: KubeVersion, min: KubeVersion) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for value in values {
        gates.add_flag_value(value);
    }
    gates.set(emulation, min).map_err(|e| e.to_string())?;
    Ok(gates)
}

/// `kubernetes_feature_enabled` as upstream's binary reported it (tools/feature-gates/upstream).
fn upstream(text: &str) -> Vec<(String, String, bool)> {
    text.lines()
        .map(|line| {
            let (labels, value) = line.rsplit_once(' ').unwrap();
            let field =
                |key: &str| labels.split(&format!("{key}=\"")).nth(1).unwrap().split('"').next().unwrap().to_string();
            (field("name"), field("stage"), value == "1")
        })
        .collect()
}

fn ours(gates: &FeatureGates) -> Vec<(String, String, bool)> {
    let mut all: Vec<(String, String, bool)> =
        gates.all().into_iter().map(|(n, s, e)| (n.to_string(), s.to_string(), e)).collect();
    all.sort();
    all
}

#[test]
fn every_gate_stage_and_default_is_upstreams_at_each_emulated_version() {
    let dir = "../../../../../../tools/feature-gates/upstream";
    let cases = [
        (
            V133,
            V133,
            include_str!("../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.33.txt"),
        ),
        (
            V134,
            V133,
            include_str!("../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.34.txt"),
        ),
        (
            V135,
            V134,
            include_str!("../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.35.txt"),
        ),
        (
            V136,
            V135,
            include_str!("../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.36.txt"),
        ),
    ];
    for (emulation, min, text) in cases {
        let mut expected = upstream(text);
        expected.sort();
        assert_eq!(ours(&gates_at(&[], emulation, min).unwrap()), expected, "{dir} at {emulation}");
    }
    assert_eq!(upstream(cases[3].2).len(), 242);
}

#[test]
fn all_alpha_and_all_beta_are_upstreams() {
    let mut expected = upstream(include_str!(
        "../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.36-allbeta-off.txt"
    ));
    expected.sort();
    assert_eq!(ours(&gates(&["AllBeta=false"]).unwrap()), expected);
    let mut expected = upstream(include_str!(
        "../../../../../../tools/feature-gates/upstream/kubernetes_feature_enabled-1.34-allalpha-on.txt"
    ));
    expected.sort();
    let g = gates_at(&["AllAlpha=true,DRADeviceTaints=false"], V134, V133).unwrap();
    assert_eq!(ours(&g), expected);
    // An explicit value wins whatever the order, and GA gates keep their defaults.
    let g = gates(&["LoggingAlphaOptions=false,AllAlpha=true"]).unwrap();
    assert!(!g.is_enabled("LoggingAlphaOptions"));
    assert!(g.is_enabled("ContainerStopSignals"));
    assert!(g.is_enabled("AllAlpha"));
    assert!(!g.is_enabled("AllBeta"));
}

#[test]
fn real_v1_36_defaults() {
    let g = FeatureGates::default();
    for on in
        ["DRADeviceTaints", "ComponentFlagz", "ComponentStatusz", "StaleControllerConsistencyJob", "WatchListClient"]
    {
        assert!(g.is_enabled(on), "{on}");
        assert_eq!(lookup(on).and_then(|gate| g.spec(gate)).map(|s| s.stage), Some(Stage::Beta), "{on}");
    }
    for on in ["DynamicResourceAllocation", "InOrderInformers", "MultiCIDRServiceAllocator", "VolumeAttributesClass"] {
        assert!(g.is_enabled(on), "{on}");
        let spec = lookup(on).and_then(|gate| g.spec(gate)).unwrap();
        assert_eq!((spec.stage, spec.locked), (Stage::Ga, true), "{on}");
    }
    for off in ["DRADeviceTaintRules", "GenericWorkload", "PodCertificateRequest", "AllAlpha", "AllBeta", "Nope"] {
        assert!(!g.is_enabled(off), "{off}");
    }
}

#[test]
fn emulated_versions_select_the_specs_of_their_version() {
    let g = gates_at(&[], V133, V133).unwrap();
    assert!(!g.is_enabled("DRADeviceTaints"), "alpha in 1.33");
    assert!(!g.is_enabled("DynamicResourceAllocation"), "beta and off in 1.33");
    assert!(!g.is_enabled("ComponentFlagz"));
    // Gates registered after 1.33 do not exist there (upstream's PreAlpha spec).
    assert!(!g.is_enabled("StaleControllerConsistencyJob"));
    assert!(!g.all().iter().any(|(name, _, _)| *name == "StaleControllerConsistencyJob"));
    // A gate first registered in 1.36 with a spec from 1.0 exists at every version.
    assert!(g.is_enabled("StatefulSetSemanticRevisionComparison"));
    // GA but not locked in 1.34: it may be turned off, but not while gates that need it are on.
    let refused = gates_at(&["DynamicResourceAllocation=false"], V134, V133).unwrap_err();
    assert!(
        refused.contains(
            "DRAAdminAccess is enabled, but depends on features that are disabled: [DynamicResourceAllocation]"
        ),
        "{refused}"
    );
    assert!(!refused.contains("locked"), "{refused}");
}

#[test]
fn a_spec_can_need_a_minimum_compatibility_version() {
    const SPECS: &[Spec] = &[
        at(35, Stage::Beta, false),
        Spec { min_compat: Some(KubeVersion { major: 1, minor: 35 }), ..at(35, Stage::Beta, true) },
    ];
    let gate = gate("Skewed", SPECS, &[]);
    assert_eq!(spec_at(&gate, V136, V134).map(|s| s.default), Some(false));
    assert_eq!(spec_at(&gate, V136, V135).map(|s| s.default), Some(true));
    assert_eq!(spec_at(&gate, V134, V134), None);
}

#[test]
fn parses_pairs_with_optional_component() {
    let g =
        gates(&["JobManagedBy=true,WatchListClient=true", "HPAScaleToZero=1", " DRADeviceTaintRules = F ,"]).unwrap();
    let explicit: Vec<(&str, bool)> = g.explicit().iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        explicit,
        [("DRADeviceTaintRules", false), ("HPAScaleToZero", true), ("JobManagedBy", true), ("WatchListClient", true)]
    );
    // Repeating the flag adds gates and the last value wins.
    let g = gates(&["WatchListClient=true", "WatchListClient=false,HPAScaleToZero=true"]).unwrap();
    assert!(!g.is_enabled("WatchListClient"));
    assert!(g.is_enabled("HPAScaleToZero"));
    assert!(gates(&["kube:HPAScaleToZero=true", "kube: NodeSwap=true"]).unwrap().is_enabled("HPAScaleToZero"));
    assert_eq!(gates(&[""]).unwrap(), FeatureGates::default());
    // /flagz shows the pairs by component, in the order given.
    let mut g = FeatureGates::default();
    g.add_flag_value("Z=true,kube:A=false");
    g.add_flag_value("B=true");
    assert_eq!(g.flag_text(), ":Z=true,:B=true,kube:A=false");
}

#[test]
fn malformed_values_are_refused_with_upstreams_words() {
    assert_eq!(gates(&["NodeSwap"]), Err("missing bool value for NodeSwap".into()));
    assert_eq!(
        gates(&["NodeSwap=maybe"]),
        Err(r#"invalid value of NodeSwap=maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax"#.into())
    );
    assert_eq!(gates(&["wardle:NodeSwap=true"]), Err("component not registered: wardle".into()));
    assert_eq!(gates(&["Foo=true:x"]), Err("component not registered: Foo=true".into()));
    assert_eq!(
        gates(&["NodeSwap=true,kube:HPAScaleToZero=true"]),
        Err("set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use".into())
    );
}

#[test]
fn unknown_gates_are_only_warned_about() {
    let g = gates(&["NoSuchGate=true,nodeswap=false"]).unwrap();
    assert!(!g.is_enabled("NoSuchGate"));
    assert_eq!(g.warnings(), ["unrecognized feature gate: NoSuchGate", "unrecognized feature gate: nodeswap"]);
}

#[test]
fn locked_gates_only_take_their_default() {
    assert_eq!(
        gates(&["SidecarContainers=false"]),
        Err("cannot set feature gate SidecarContainers to false, feature is locked to true".into())
    );
    assert_eq!(
        gates(&["InOrderInformers=false,SidecarContainers=false"]),
        Err("[cannot set feature gate InOrderInformers to false, feature is locked to true, \
             cannot set feature gate SidecarContainers to false, feature is locked to true]"
            .into())
    );
    assert!(gates(&["SidecarContainers=true"]).unwrap().is_enabled("SidecarContainers"));
}

#[test]
fn gates_that_do_not_exist_yet_are_refused() {
    assert_eq!(
        gates_at(&["GenericWorkload=true"], V133, V133),
        Err("cannot set feature gate GenericWorkload to true, feature is PreAlpha at emulated version 1.33, min \
             compatibility version 1.33"
            .into())
    );
}

#[test]
fn a_gate_needs_the_gates_it_depends_on() {
    assert_eq!(
        gates(&["ClusterTrustBundleProjection=true"]),
        Err("ClusterTrustBundleProjection is enabled, but depends on features that are disabled: [ClusterTrustBundle]"
            .into())
    );
    assert!(gates(&["ClusterTrustBundleProjection=true,ClusterTrustBundle=true"]).is_ok());
    assert_eq!(
        gates(&["AtomicFIFO=false,StaleControllerConsistencyJob=false"]),
        Err("[StaleControllerConsistencyDaemonSet is enabled, but depends on features that are disabled: [AtomicFIFO], \
             StaleControllerConsistencyReplicaSet is enabled, but depends on features that are disabled: [AtomicFIFO], \
             StaleControllerConsistencyStatefulSet is enabled, but depends on features that are disabled: [AtomicFIFO]]"
            .into())
    );
    assert_eq!(
        gates_at(&["DRADeviceTaints=true"], V133, V133),
        Err("DRADeviceTaints is enabled, but depends on features that are disabled: [DynamicResourceAllocation]".into())
    );
    assert_eq!(
        gates(&["DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=false"]),
        Err("[DRADeviceBindingConditions is enabled, but depends on features that are disabled: \
             [DRAResourceClaimDeviceStatus], DRAResourceClaimGranularStatusAuthorization is enabled, but depends on \
             features that are disabled: [DRAResourceClaimDeviceStatus]]"
            .into())
    );
    // Dependencies are checked only when every gate could be set.
    assert!(gates(&["ClusterTrustBundleProjection=true,SidecarContainers=false"]).unwrap_err().contains("locked"));
}

#[test]
fn warns_for_ga_deprecated_and_alpha_gates() {
    let g = gates(&["KMSv1=true,NodeSwap=true,HPAScaleToZero=true"]).unwrap();
    assert_eq!(
        g.warnings(),
        [
            r#""Warning: setting deprecated feature gate. It will be removed in a future release." featureGate="KMSv1" value=true"#,
            r#""Warning: setting GA feature gate. It will be removed in a future release." featureGate="NodeSwap" value=true"#,
            "component has alpha features enabled in emulated version, this is unsupported: features=[HPAScaleToZero]",
        ]
    );
    assert!(gates(&["AllBeta=false"]).unwrap().warnings().is_empty());
    assert!(FeatureGates::default().warnings().is_empty());
}

#[test]
fn help_lists_alpha_and_beta_gates_as_upstream() {
    let lines = FeatureGates::help_lines();
    assert_eq!(lines[0], "kube:APIResponseCompression=true|false (BETA - default=true)");
    assert!(lines.contains(&"kube:AllAlpha=true|false (ALPHA - default=false)".to_string()));
    assert!(lines.contains(&"kube:DRADeviceTaints=true|false (BETA - default=true)".to_string()));
    assert!(!lines.iter().any(|l| l.contains("SidecarContainers") || l.contains("KMSv1")));
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

#[test]
fn table_is_consistent() {
    let mut names: Vec<&str> = KNOWN_GATES.iter().map(|g| g.name).collect();
    let count = names.len();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "the table is sorted");
    names.dedup();
    assert_eq!(names.len(), count, "a gate is listed twice");
    for gate in KNOWN_GATES {
        assert!(!gate.specs.is_empty() && gate.specs.windows(2).all(|w| w[0].version <= w[1].version), "{}", gate.name);
        assert!(gate.depends_on.iter().all(|dep| lookup(dep).is_some()), "{}", gate.name);
    }
}
