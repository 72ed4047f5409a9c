#!/usr/bin/env python3
"""The versioned feature-gate table of kube-controller-manager (src/app/flags/feature_gates/known.rs).

    gen.py <git-dir> <commit> [<path-prefix>]

reads, from the Kubernetes tree at <commit> of <git-dir> (under <path-prefix>, e.g.
`deps/github.com/openshift/kubernetes/` for the openshift/microshift mirror), every gate the
upstream binary registers in its feature gate, with all its versioned specs, and the dependencies
between gates, and rewrites known.rs. Offline and deterministic (`git show`, no network).

What upstream registers (cmd/kube-controller-manager/app/controllermanager.go `init`,
pkg/features/kube_features.go `init`, the packages' own `init`s):
  - pkg/features/kube_features.go `defaultVersionedKubernetesFeatureGates`, which relists most
    gates of the generic apiserver, apiextensions-apiserver, controller-manager and zpages
    packages; those packages register all of theirs too (with the same specs, which the script
    checks, as upstream's `AddVersioned` does);
  - client-go's `features/known_features.go` (`AddVersionedFeaturesToExistingFeatureGates`);
  - component-base's logging (`logs/api/v1`) and metrics (`metrics/features`) gates;
  - `defaultKubernetesFeatureGateDependencies` (`AddDependencies`).
Left out: the OpenShift build's own gates (pkg/features/openshift_features.go), which upstream
Kubernetes does not have. `AllAlpha` and `AllBeta` are component-base's and live in mod.rs.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "src", "app", "flags", "feature_gates", "known.rs")

KUBE = "pkg/features/kube_features.go"
# Each package registers its own gates; kube_features.go relists most of them, with the same specs.
REGISTERED = [
    KUBE,
    "staging/src/k8s.io/apiserver/pkg/features/kube_features.go",
    "staging/src/k8s.io/apiextensions-apiserver/pkg/features/kube_features.go",
    "staging/src/k8s.io/controller-manager/pkg/features/kube_features.go",
    "staging/src/k8s.io/component-base/zpages/features/kube_features.go",
    "staging/src/k8s.io/client-go/features/known_features.go",
    "staging/src/k8s.io/component-base/logs/api/v1/kube_features.go",
    "staging/src/k8s.io/component-base/metrics/features/kube_features.go",
]
STAGES = {"Alpha": "Alpha", "Beta": "Beta", "GA": "Ga", "Deprecated": "Deprecated"}


def git_show(git_dir, commit, path):
    return subprocess.run(
        ["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def strip_comments(src):
    return re.sub(r"//[^\n]*", "", src)


def block(src, start):
    """The text between the brace that ends at `start` and its matching closing brace."""
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[start : i - 1], i


def version(text):
    return tuple(int(p) for p in re.search(r'"([0-9.]+)"', text).group(1).split("."))


def parse_specs(inner):
    specs = []
    for s in re.finditer(r"\{([^{}]*)\}", inner):
        fields = dict(
            (m.group(1), m.group(2).strip())
            for m in re.finditer(r"(\w+):\s*([^,]+?(?:\([^)]*\))?)\s*(?:,|$)", s.group(1).strip())
        )
        specs.append(
            {
                "version": version(fields["Version"]),
                "default": fields["Default"] == "true",
                "stage": STAGES[fields["PreRelease"].split(".")[-1]],
                "locked": fields.get("LockToDefault") == "true",
                "min_compat": version(fields["MinCompatibilityVersion"]) if "MinCompatibilityVersion" in fields else None,
            }
        )
    if len(specs) != inner.count("Version:") - inner.count("MinCompatibilityVersion:"):
        sys.exit(f"cannot read the specs {inner!r}")
    # As upstream's AddVersioned completes them: a spec without a minimum compatibility version
    # inherits the previous spec's.
    for previous, spec in zip(specs, specs[1:]):
        spec["min_compat"] = spec["min_compat"] or previous["min_compat"]
    return specs


def versioned_gates(src):
    """Every `Key: {specs}` entry of the file's `map[...]VersionedSpecs{...}` literals, by Go key."""
    src = strip_comments(src)
    gates = {}
    for m in re.finditer(r"map\[[^\]]*\](?:featuregate\.)?VersionedSpecs\{", src):
        body, _ = block(src, m.end())
        pos = 0
        entry = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.()]*)\s*:\s*\{")
        while (e := entry.match(body, pos)) is not None:
            inner, pos = block(body, e.end())
            gates[e.group(1).split(".")[-1]] = parse_specs(inner)
            pos = re.compile(r"\s*,?").match(body, pos).end()
    return gates


def dependencies(src):
    src = strip_comments(src)
    m = re.search(r"defaultKubernetesFeatureGateDependencies = map\[featuregate\.Feature\]\[\]featuregate\.Feature\{", src)
    body, _ = block(src, m.end())
    deps = {}
    for e in re.finditer(r"([A-Za-z_][A-Za-z0-9_.]*)\s*:\s*\{([^}]*)\}", body):
        items = [d.strip() for d in e.group(2).split(",") if d.strip()]
        deps[e.group(1).split(".")[-1]] = [re.sub(r"featuregate\.Feature\((.*)\)", r"\1", d).split(".")[-1] for d in items]
    return deps


def gate_names(src):
    """Go constant -> gate name (`CPUCFSQuotaPeriod featuregate.Feature = "CustomCPUCFSQuotaPeriod"`)."""
    return {m.group(1): m.group(2) for m in re.finditer(r'(\w+)\s+(?:featuregate\.)?Feature\s*=\s*"(\w+)"', src)}


def spec_text(spec):
    major, minor = spec["version"]
    if major != 1:
        sys.exit(f"unexpected version {spec['version']}")
    text = f"{'locked' if spec['locked'] else 'at'}({minor}, {spec['stage']}, {'true' if spec['default'] else 'false'})"
    if spec["min_compat"]:
        major, minor = spec["min_compat"]
        text = f"Spec {{ min_compat: Some(KubeVersion {{ major: {major}, minor: {minor} }}), ..{text} }}"
    return text


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    git_dir, commit = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else ""
    sources = {path: git_show(git_dir, commit, prefix + path) for path in REGISTERED}
    names = {}
    for src in sources.values():
        names.update(gate_names(src))
    gates = {}
    for path in REGISTERED:
        for key, specs in versioned_gates(sources[path]).items():
            name = names.get(key, key)
            # Upstream's AddVersioned refuses a gate registered twice with different specs.
            if gates.setdefault(name, specs) != specs:
                sys.exit(f"{path}: {name} is registered elsewhere with other specs")
    openshift = gate_names(git_show(git_dir, commit, prefix + "pkg/features/openshift_features.go"))
    for name in openshift.values():
        gates.pop(name, None)
    deps = {names.get(k, k): sorted(names.get(d, d) for d in v) for k, v in dependencies(sources[KUBE]).items()}
    for name, needs in deps.items():
        if name not in gates and name not in openshift.values():
            sys.exit(f"dependency of an unknown gate {name}")
        if any(n not in gates for n in needs):
            sys.exit(f"{name} depends on an unknown gate")

    lines = []
    for name in sorted(gates):
        specs = ", ".join(spec_text(s) for s in gates[name])
        needs = ", ".join(f'"{d}"' for d in deps.get(name, []))
        line = f'    gate("{name}", &[{specs}], &[{needs}]),'
        if len(line) > 120:
            specs = "".join(f"\n        {spec_text(s)}," for s in gates[name])
            line = f'    gate("{name}", &[{specs}\n    ], &[{needs}]),'
        lines.append(line)
    with open(OUT, "w") as out:
        out.write(HEADER.format(commit=commit))
        if any(s["min_compat"] for specs in gates.values() for s in specs):
            out.write("use super::{Spec, super::values::KubeVersion};\n")
        out.write(TABLE)
        out.write("\n".join(lines))
        out.write("\n];\n")
    print(f"{len(gates)} gates, {sum(1 for d in deps.values() if d)} with dependencies -> {os.path.normpath(OUT)}")


HEADER = """\
//! Every feature gate upstream kube-controller-manager v1.36.2 knows, with all its versioned
//! specs (upstream `featuregate.VersionedSpecs`) and the gates it depends on.
//!
//! Generated by `tools/feature-gates/gen.py` from the Kubernetes tree at commit
//! {commit} (openshift/microshift's copy, `deps/github.com/openshift/kubernetes/`):
//! pkg/features/kube_features.go (`defaultVersionedKubernetesFeatureGates`, which relists the
//! generic apiserver, apiextensions, controller-manager and zpages gates, and
//! `defaultKubernetesFeatureGateDependencies`), client-go's features/known_features.go and
//! component-base's logging and metrics gates. The OpenShift build's own gates are left out.
//! Do not edit by hand: rerun the script.

use super::Stage::{{Alpha, Beta, Deprecated, Ga}};
use super::{{KnownGate, at, gate, locked}};
"""

TABLE = """
/// Sorted by name (byte order); look-ups scan it.
#[rustfmt::skip]
pub(super) const KNOWN_GATES: &[KnownGate] = &[
"""

if __name__ == "__main__":
    main()
