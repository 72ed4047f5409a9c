#!/usr/bin/env python3
"""Writes src/sandbox/auth/bootstrap_policy/*.yaml: kube-apiserver's bootstrap RBAC policy as a
running server created it (its rbac/bootstrap-roles post-start hook, with the server's default
feature gates), in YAML flow style, without the OpenShift build's additions.

Usage: gen-sandbox-rbac.py DIR VERSION
  DIR holds the server's objects, fetched right after it started:
    kubectl get clusterroles -o json > DIR/clusterroles.json
    kubectl get clusterrolebindings -o json > DIR/clusterrolebindings.json
    kubectl get roles -A -o json > DIR/roles.json
    kubectl get rolebindings -A -o json > DIR/rolebindings.json
  VERSION names the server in the files' headers (e.g. v1.36.2).
"""
import json, sys, os, re

if len(sys.argv) != 3:
    sys.exit(__doc__)
DIR, VERSION = sys.argv[1], sys.argv[2]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "sandbox", "auth", "bootstrap_policy")

def items(kind):
    return json.load(open(f"{DIR}/{kind}.json"))["items"]

def bootstrap(o):
    return o["metadata"].get("labels", {}).get("kubernetes.io/bootstrapping") == "rbac-defaults"

CARRY_ROLES = {"system:controller:service-ca-cert-publisher"}
def carry(name):
    return name.startswith("system:openshift:") or name in CARRY_ROLES

def carry_rule(role, rule):
    # OpenShift lets the EndpointSlice controllers create `endpointslices/restricted`.
    return rule.get("resources") == ["endpointslices/restricted"]

PLAIN = re.compile(r"^[A-Za-z0-9/.][A-Za-z0-9._/*-]*$")
def scalar(s):
    if isinstance(s, bool):
        return "true" if s else "false"
    if s == "" or not PLAIN.match(s) or s in ("true", "false", "null", "yes", "no", "on", "off") or s[0].isdigit() and s.isdigit():
        return json.dumps(s)
    return s

def flow(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)

RULE_KEYS = ["apiGroups", "nonResourceURLs", "resourceNames", "resources", "verbs"]
def rule(r):
    return flow({k: r[k] for k in RULE_KEYS if k in r})

def rules_block(role, indent="  "):
    out = [f"{indent}rules:"]
    for r in role.get("rules") or []:
        if carry_rule(role, r):
            continue
        out.append(f"{indent}- {rule(r)}")
    return out

SUBJECT_KEYS = ["apiGroup", "kind", "name", "namespace"]
def subjects_block(subjects, indent="  "):
    subs = [flow({k: s[k] for k in SUBJECT_KEYS if k in s}) for s in subjects or []]
    if not subs:
        return []
    if len(subs) == 1:
        return [f"{indent}subjects: [{subs[0]}]"]
    return [f"{indent}subjects:"] + [f"{indent}- {s}" for s in subs]

def meta(o, namespaced=False):
    m = {"name": o["metadata"]["name"]}
    if namespaced:
        m["namespace"] = o["metadata"]["namespace"]
    labels = {k: v for k, v in o["metadata"].get("labels", {}).items() if k != "kubernetes.io/bootstrapping"}
    if labels:
        m["labels"] = labels
    return flow(m)

HEADER = f"""# kube-apiserver {VERSION}'s bootstrap RBAC policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy,
# created by its rbac/bootstrap-roles post-start hook) with its default feature gates, as it
# serves it (`kubectl get {{KIND}}`); written by scripts/gen-sandbox-rbac.py.
# Left out: the OpenShift build's own additions ({{CARRIES}}).
"""

def write(name, lines):
    open(os.path.join(OUT, name), "w").write("\n".join(lines) + "\n")

crs = sorted([o for o in items("clusterroles") if bootstrap(o) and not carry(o["metadata"]["name"])], key=lambda o: o["metadata"]["name"])
crbs = sorted([o for o in items("clusterrolebindings") if bootstrap(o) and not carry(o["metadata"]["name"])], key=lambda o: o["metadata"]["name"])
controllers = [o for o in crs if o["metadata"]["name"].startswith("system:controller:")]
others = [o for o in crs if not o["metadata"]["name"].startswith("system:controller:")]

# cluster-roles.yaml
lines = HEADER.replace("{KIND}", "clusterroles").replace("{CARRIES}", "system:openshift:* roles").splitlines()
lines += ["# The loader adds the label kubernetes.io/bootstrapping=rbac-defaults, the annotation",
          "# rbac.authorization.kubernetes.io/autoupdate=true, apiVersion and kind. Aggregated roles have no",
          "# rules: the clusterrole-aggregation-controller fills them."]
for o in others:
    lines.append(f"- metadata: {meta(o)}")
    if o.get("aggregationRule"):
        lines.append(f"  aggregationRule: {flow(o['aggregationRule'])}")
    else:
        lines += rules_block(o)
write("cluster-roles.yaml", lines)

# controller-roles.yaml
lines = HEADER.replace("{KIND}", "clusterroles").replace("{CARRIES}", "service-ca-cert-publisher, the\n# endpointslices/restricted rules of the EndpointSlice controllers").splitlines()
lines += ["# Each entry is the ClusterRole `system:controller:<name>`; the loader adds its",
          "# ClusterRoleBinding to ServiceAccount kube-system/<name> (controller-role-bindings.yaml), and",
          "# the labels, annotations, apiVersion and kind."]
bindings = {o["metadata"]["name"]: o for o in crbs}
for o in controllers:
    n = o["metadata"]["name"]
    account = n[len("system:controller:"):]
    b = bindings.get(n)
    assert b and b["roleRef"]["name"] == n and b["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}], n
    assert set(o["metadata"].get("labels", {})) == {"kubernetes.io/bootstrapping"}, n
    lines.append(f"- name: {scalar(account)}")
    lines += rules_block(o)
write("controller-roles.yaml", lines)

# cluster-role-bindings.yaml
lines = HEADER.replace("{KIND}", "clusterrolebindings").replace("{CARRIES}", "system:openshift:*").splitlines()
lines += ["# Each binding's roleRef is the ClusterRole of the same name (the controllers' bindings come",
          "# from controller-roles.yaml); the loader adds labels, annotations, apiVersion and kind."]
for o in crbs:
    n = o["metadata"]["name"]
    if n.startswith("system:controller:"):
        continue
    assert o["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n}, n
    lines.append(f"- name: {scalar(n)}")
    lines += subjects_block(o.get("subjects"))
write("cluster-role-bindings.yaml", lines)

# namespace-policy.yaml
key = lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])
roles = sorted([o for o in items("roles") if bootstrap(o)], key=key)
rbs = sorted([o for o in items("rolebindings") if bootstrap(o)], key=key)
lines = HEADER.replace("{KIND}", "roles,rolebindings -A").replace("{CARRIES}", "none here").splitlines()
lines += ["# The loader adds labels, annotations, apiVersion and kind.", "roles:"]
for o in roles:
    lines.append(f"- metadata: {meta(o, True)}")
    lines += rules_block(o)
lines.append("roleBindings:")
for o in rbs:
    lines.append(f"- metadata: {meta(o, True)}")
    lines.append(f"  roleRef: {flow(o['roleRef'])}")
    lines += subjects_block(o.get("subjects"))
write("namespace-policy.yaml", lines)
