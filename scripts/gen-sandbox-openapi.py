#!/usr/bin/env python3
"""Writes src/sandbox/apiserver/openapi_schemas.json: the object schemas the sandbox serves in
/openapi/v3/<group-version> documents, taken from kube-apiserver v1.36.2's own documents (what
it serves at /openapi/v3/<path>, the same as kubernetes' api/openapi-spec/v3/*.json), trimmed to
the kinds below and the components they reference, with descriptions dropped.

Usage: gen-sandbox-openapi.py DIR > src/sandbox/apiserver/openapi_schemas.json
  DIR holds api__v1_openapi.json, apis__apps__v1_openapi.json, ...: each path of the server's
  /openapi/v3 index with `/` replaced by `__`, e.g.
    kubectl get --raw /openapi/v3/apis/apps/v1 > DIR/apis__apps__v1_openapi.json
"""
import json, sys

KINDS = {
    "api__v1": ("v1", ["Pod", "ConfigMap", "Service", "Secret", "Namespace", "ServiceAccount", "PersistentVolumeClaim"]),
    "apis__apps__v1": ("apps/v1", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"]),
    "apis__batch__v1": ("batch/v1", ["Job", "CronJob"]),
    "apis__resource.k8s.io__v1": ("resource.k8s.io/v1", ["ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"]),
}
PREFIX = "#/components/schemas/"

def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node

def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith(PREFIX):
            out.add(r[len(PREFIX):])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)

def main(directory):
    result = {}
    for file, (gv, kinds) in KINDS.items():
        doc = json.load(open(f"{directory}/{file}_openapi.json"))
        schemas = doc["components"]["schemas"]
        wanted = set()
        for name, schema in schemas.items():
            gvks = schema.get("x-kubernetes-group-version-kind", [])
            if any(g.get("kind") in kinds and (g.get("group") or "") == gv.rpartition("/")[0] and g.get("version") == gv.rpartition("/")[2] for g in gvks):
                wanted.add(name)
        todo, seen = list(wanted), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            found = set()
            refs(schemas[name], found)
            todo.extend(found - seen)
        result[gv] = {name: strip(schemas[name]) for name in sorted(seen)}
    json.dump(result, sys.stdout, separators=(",", ":"), sort_keys=True)

main(sys.argv[1])
