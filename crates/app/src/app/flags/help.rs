//! `--help`: the description, usage line and one section per flag group, laid out like
//! upstream (cobra's usage with pflag's `FlagUsages` per named flag set).

use std::fmt::Write;

use super::compatibility::Compatibility;
use super::feature_gates::FeatureGates;
use super::table::{FLAGS, FlagSpec, Group};
use crate::app::controllers::CONTROLLERS;

/// Upstream's cobra `Long` text, line breaks included.
const DESCRIPTION: &str = "The Kubernetes controller manager is a daemon that embeds
the core control loops shipped with Kubernetes. In applications of robotics and
automation, a control loop is a non-terminating loop that regulates the state of
the system. In Kubernetes, a controller is a control loop that watches the shared
state of the cluster through the apiserver and makes changes attempting to move the
current state towards the desired state. Examples of controllers that ship with
Kubernetes today are the replication controller, endpoints controller, namespace
controller, and serviceaccounts controller.";

/// The full `--help` text: the description, then [`usage_text`].
pub(crate) fn render() -> String {
    format!("{DESCRIPTION}\n\n{}", usage_text())
}

/// Cobra's usage: the usage line and the flag sections. Upstream prints it, to stderr, before
/// the error when pflag refuses a command line.
pub(crate) fn usage_text() -> String {
    let mut out = String::from("Usage:\n  kube-controller-manager [flags]\n");
    for group in Group::ALL {
        let mut flags: Vec<&FlagSpec> = FLAGS.iter().filter(|f| f.group == group && !f.status.hidden()).collect();
        if flags.is_empty() {
            continue;
        }
        flags.sort_by_key(|f| f.name);
        let lines: Vec<(String, String)> = flags.iter().map(|f| (left_column(f), usage(f))).collect();
        let width = lines.iter().map(|(left, _)| left.len()).max().unwrap_or(0);
        // pflag puts three spaces after the widest name column and indents continuation lines
        // of multi-line help to the help column.
        let indent = format!("\n{}", " ".repeat(width + 3));
        let _ = write!(out, "\n{} flags:\n\n", group.title());
        for (left, usage) in lines {
            let usage = usage.replace('\n', &indent);
            let _ = writeln!(out, "{left:<width$}   {usage}");
        }
    }
    out
}

/// `  -v, --v Level` or `      --kubeconfig string`, as pflag writes the name column.
fn left_column(flag: &FlagSpec) -> String {
    let mut left = match flag.shorthand {
        Some(short) => format!("  -{short}, --{}", flag.name),
        None => format!("      --{}", flag.name),
    };
    // pflag's `UnquoteUsage` names a few types differently from their Go type names.
    let type_name = match flag.kind.type_name {
        "bool" => "",
        "float64" => "float",
        "int64" => "int",
        other => other,
    };
    if !type_name.is_empty() {
        left.push(' ');
        left.push_str(type_name);
    }
    match flag.kind.no_value_default {
        Some(implicit) if !(flag.kind.type_name == "bool" && implicit == "true") => {
            let _ = write!(left, "[={implicit}]");
        }
        _ => {}
    }
    left
}

/// The help text with upstream's additions: the controller lists of `--controllers`, the
/// gates of `--feature-gates`, the version ranges of `--emulated-version` and
/// `--min-compatibility-version`, and the `(default ...)` suffix.
fn usage(flag: &FlagSpec) -> String {
    let mut text = flag.help.to_string();
    let (emulation_range, min_compatibility_range) = Compatibility::help_ranges();
    let component_note = "\nIf the component is not specified, defaults to \"kube\"";
    match flag.name {
        "feature-gates" => text = format!("{text}\n{}", FeatureGates::help_lines().join("\n")),
        "emulated-version" => text = format!("{text}{emulation_range}{component_note}"),
        "min-compatibility-version" => text = format!("{text}{min_compatibility_range}{component_note}"),
        _ => {}
    }
    if flag.name == "controllers" {
        let names = |filter: fn(&&crate::app::controllers::ControllerDescriptor) -> bool| {
            CONTROLLERS.iter().filter(filter).map(|c| c.name).collect::<Vec<_>>().join(", ")
        };
        let _ = write!(
            text,
            "\nAll controllers: {}\nDisabled-by-default controllers: {}",
            names(|_| true),
            names(|c| !c.enabled_by_default)
        );
    }
    if let Some(default) = flag.kind.help_default(flag.default) {
        let _ = write!(text, " (default {default})");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_upstream_order_and_layout() {
        let help = render();
        assert!(help.starts_with("The Kubernetes controller manager is a daemon that embeds\nthe core control loops"));
        assert!(help.contains("\n\nUsage:\n  kube-controller-manager [flags]\n\nDebugging flags:\n\n"));
        let debugging = help.find("\nDebugging flags:").unwrap();
        let generic = help.find("\nGeneric flags:").unwrap();
        let lifecycle = help.find("\nNode-lifecycle-controller flags:").unwrap();
        let logs = help.find("\nLogs flags:").unwrap();
        let misc = help.find("\nMisc flags:").unwrap();
        let global = help.find("\nGlobal flags:").unwrap();
        assert!(debugging < generic && generic < lifecycle && lifecycle < logs);
        assert!(logs < misc && misc < global);
        assert!(help.ends_with("sets the reported version\n"));
    }

    #[test]
    fn lines_show_types_and_defaults_like_pflag() {
        let help = render();
        let line = |name: &str| {
            help.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no line for {name}"))
                .to_string()
        };
        assert!(line("--leader-elect ").ends_with("(default true)"));
        assert!(line("--leader-elect-lease-duration duration").ends_with("(default 15s)"));
        assert!(line("--leader-elect-resource-lock string").ends_with("(default \"leases\")"));
        assert!(line("--node-monitor-grace-period duration").ends_with("(default 50s)"));
        assert!(line("--min-resync-period duration").ends_with("(default 12h0m0s)"));
        assert!(line("--kube-api-qps float32").ends_with("(default 20)"));
        assert!(line("--secure-port int").ends_with("(default 10257)"));
        assert!(line("--horizontal-pod-autoscaler-tolerance float").ends_with("(default 0.1)"));
        assert!(line("--authorization-always-allow-paths strings").ends_with("(default [/healthz,/readyz,/livez])"));
        assert!(line("--allow-metric-labels stringToString").ends_with("(default [])"));
        assert!(line("--tls-sni-cert-key namedCertKey").ends_with("(default [])"));
        assert!(line("--tls-curve-preferences int32Slice").ends_with("(default [])"));
        assert!(line("--controller-shutdown-timeout duration").ends_with("(default 10s)"));
        assert!(line("--concurrent-resourceclaim-syncs int32").ends_with("(default 50)"));
        assert!(line("--concurrent-device-taint-eviction-syncs int32").ends_with("(default 8)"));
        assert!(line("--version version[=true]").contains("--version=raw"));
        assert!(line("-v, --v Level").contains("verbosity"));
        assert!(line("-h, --help").contains("help for kube-controller-manager"));
        assert!(!line("--kubeconfig string").contains("(default"));
        assert!(!line("--controller-start-interval duration").contains("(default"));
        assert!(help.contains("(default [*])"));
        assert!(help.contains(
            " Disabled-by-default controllers: bootstrap-signer-controller, \
             selinux-warning-controller, token-cleaner-controller (default [*])\n"
        ));
        assert!(help.contains(
            "\n                                                           Options are: kube=1.33..1.36(default:1.36)\n"
        ));
        assert!(help.contains("Options are: kube=1.33..1.36(default:1.35)\n"));
        assert!(help.contains("'kube:featureC=true'Options are:\n"));
        assert!(help.contains("\n                                                           kube:AllAlpha=true|false (ALPHA - default=false)\n"));
        let sections: Vec<&str> = help.lines().filter(|l| l.ends_with(" flags:")).collect();
        let deployment = sections.iter().position(|s| *s == "Deployment-controller flags:").unwrap();
        assert_eq!(
            sections[deployment..deployment + 4],
            [
                "Deployment-controller flags:",
                "Device-taint-eviction-controller flags:",
                "Resourceclaim-controller flags:",
                "Statefulset-controller flags:"
            ]
        );
    }

    #[test]
    fn hidden_flags_stay_out_and_columns_align() {
        let help = render();
        for hidden in ["--port ", "--address ", "--pod-eviction-timeout", "--node-sync-period"] {
            assert!(!help.contains(hidden), "{hidden}");
        }
        // Within a section every help text starts in the same column.
        let section: Vec<&str> = help.split("\nLeader-migration flags:\n\n").nth(1).unwrap().lines().take(2).collect();
        let column = |line: &str| {
            let name = line.find("--").unwrap();
            let gap = name + line[name..].find("   ").unwrap();
            gap + line[gap..].len() - line[gap..].trim_start().len()
        };
        assert_eq!(column(section[0]), column(section[1]));
    }
}
