#!/usr/bin/env python3
"""Field tables for the sandbox's Kubernetes protobuf request decoder (src/sandbox/apiserver/protobuf/tables.rs).

    gen.py extract <go-binary>   # writes proto/<path>.proto from the gzipped FileDescriptorProtos that
                                 # gogo-protobuf registers in a Kubernetes Go binary (up to v1.33's)
    gen.py source <k8s-tree>     # writes proto/<path>.proto from a Kubernetes source tree's
                                 # staging/src/<package>/generated.proto and the package's Go types
    gen.py                       # reads proto/**/*.proto and writes ../../src/sandbox/apiserver/protobuf/tables.rs

The extracted .proto files are upstream's generated.proto without comments, plus the
`(gogoproto.nullable) = false` option that go-to-protobuf sets on non-pointer Go fields (upstream's
published .proto text drops it; the decoder needs it to apply JSON `omitempty` to zero values).
Binaries from v1.34 on no longer register descriptors (Kubernetes dropped gogo-protobuf), so
`source` reads the option off the Go structs instead: a field whose Go type is not a pointer,
slice or map, or a slice of structs, gets it.
"""
import gzip
import os
import re
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "proto")
OUT = os.path.join(HERE, "..", "..", "src", "sandbox", "apiserver", "protobuf", "tables.rs")

# The API packages the sandbox decodes (kube-apiserver v1.36 built-in groups kubectl writes to).
PACKAGES = [
    "k8s.io/apimachinery/pkg/apis/meta/v1",
    "k8s.io/apimachinery/pkg/runtime",
    "k8s.io/apimachinery/pkg/runtime/schema",
    "k8s.io/apimachinery/pkg/api/resource",
    "k8s.io/apimachinery/pkg/util/intstr",
    "k8s.io/api/core/v1",
    "k8s.io/api/apps/v1",
    "k8s.io/api/batch/v1",
    "k8s.io/api/policy/v1",
    "k8s.io/api/rbac/v1",
    "k8s.io/api/scheduling/v1",
    "k8s.io/api/coordination/v1",
    "k8s.io/api/discovery/v1",
    "k8s.io/api/autoscaling/v1",
    "k8s.io/api/autoscaling/v2",
    "k8s.io/api/networking/v1",
    "k8s.io/api/storage/v1",
    "k8s.io/api/authentication/v1",
    "k8s.io/api/authorization/v1",
    "k8s.io/api/certificates/v1",
    "k8s.io/api/events/v1",
    "k8s.io/api/node/v1",
    "k8s.io/api/admissionregistration/v1",
    "k8s.io/api/flowcontrol/v1",
    "k8s.io/api/resource/v1",
]

# ---------------------------------------------------------------- extract: descriptors -> .proto text

SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
           8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
           17: "sint32", 18: "sint64"}
GOGO_NULLABLE = 65001


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, v))
    return out


def first(fs, number, default=None):
    return next((v for n, v in fs if n == number), default)


def descriptors(binary):
    data = open(binary, "rb").read()
    found, i = {}, 0
    while (i := data.find(b"\x1f\x8b\x08\x00", i)) >= 0:
        try:
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[i:i + 4_000_000])
            name = first(fields(out), 1)
            if isinstance(name, bytes) and name.endswith(b"generated.proto"):
                found[name.decode()] = out
        except Exception:
            pass
        i += 4
    return found


def type_name(f):
    t = first(f, 5)
    if t in (11, 14):
        return first(f, 6).decode().lstrip(".")
    return SCALARS[t]


def proto_text(path, fd):
    fs = fields(fd)
    lines = [f"// Extracted by tools/proto-tables/gen.py from the descriptor of {path} (comments are not kept).",
             'syntax = "proto2";', "", f"package {first(fs, 2).decode()};", ""]
    lines += [f'import "{v.decode()}";' for n, v in fs if n == 3]
    for n, v in fs:
        if n != 4:
            continue
        m = fields(v)
        entries = {}
        for k, nested in m:
            if k == 3:
                nf = fields(nested)
                entries[first(nf, 1).decode()] = [fields(x) for j, x in nf if j == 2]
        lines += ["", f"message {first(m, 1).decode()} {{"]
        for k, fv in m:
            if k != 2:
                continue
            f = fields(fv)
            name, number, label = first(f, 1).decode(), first(f, 3), first(f, 4)
            opts = fields(first(f, 8, b""))
            nullable = first(opts, GOGO_NULLABLE, 1)
            suffix = " [(gogoproto.nullable) = false]" if nullable == 0 else ""
            tn = type_name(f)
            entry = tn.rsplit(".", 1)[-1]
            if label == 3 and first(f, 5) == 11 and entry in entries and tn.endswith(entry):
                key, value = entries[entry]
                lines.append(f"  map<{type_name(key)}, {type_name(value)}> {name} = {number};")
            else:
                word = {1: "optional", 2: "required", 3: "repeated"}[label]
                lines.append(f"  {word} {tn} {name} = {number}{suffix};")
        lines.append("}")
    return "\n".join(lines) + "\n"


def extract(binary):
    found = descriptors(binary)
    for pkg in PACKAGES:
        path = f"{pkg}/generated.proto"
        if path not in found:
            sys.exit(f"{binary}: no descriptor for {path}")
        dest = os.path.join(PROTO_DIR, path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        open(dest, "w").write(proto_text(path, found[path]))
        print("wrote", os.path.relpath(dest, HERE))

# ---------------------------------------------------------------- source: generated.proto + Go types -> .proto text

GO_STRUCT = re.compile(r"^type\s+(\w+)\s+struct\s*\{\s*$")
GO_NAMED_COLLECTION = re.compile(r"^type\s+(\w+)\s+(?:\[\]|map\[)")
GO_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+)\s+`([^`]*)`")
PROTO_NAME = re.compile(r'protobuf:"[^"]*name=(\w+)')


def go_field_types(directory):
    """{(Go struct, proto field name): Go type} of the structs in a package's hand-written .go files;
    a named slice or map type (`Verbs`, `ResourceList`) is given as what it names."""
    types, collections = {}, set()
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".go") or f.endswith("_test.go") or f.startswith("zz_generated") or f.startswith("generated"):
            continue
        struct = None
        for line in open(os.path.join(directory, f)):
            start = GO_STRUCT.match(line)
            if named := GO_NAMED_COLLECTION.match(line):
                collections.add(named.group(1))
            if start:
                struct = start.group(1)
            elif line.startswith("}"):
                struct = None
            elif struct and (m := GO_FIELD.match(line)) and 'protobuf:"' in m.group(3):
                name = PROTO_NAME.search(m.group(3))
                # An embedded struct without `name=` is its type's name, lower camel case.
                base = m.group(2).lstrip("*").rsplit(".", 1)[-1]
                types[(struct, name.group(1) if name else base[0].lower() + base[1:])] = m.group(2)
    return {key: "map[]" + t if t.rsplit(".", 1)[-1] in collections else t for key, t in types.items()}


def value_field(go_type, proto_type):
    """Whether go-to-protobuf marks the field `(gogoproto.nullable) = false`."""
    if go_type.startswith("*") or go_type.startswith("map["):
        return False
    if go_type.startswith("[]"):
        return proto_type not in SCALARS.values() and not go_type.startswith("[]*")
    return True


def source(tree):
    for pkg in PACKAGES:
        directory = os.path.join(tree, "staging", "src", pkg)
        types = go_field_types(directory)
        text = strip_comments(open(os.path.join(directory, "generated.proto")).read())
        out = [f"// Extracted by tools/proto-tables/gen.py from {pkg}/generated.proto and the package's Go types.",
               'syntax = "proto2";', ""]
        for line in text.splitlines():
            # Fully qualified type names carry a leading dot in the source text.
            line = re.sub(r"(?<=[\s<,])\.(?=k8s\.io\.)", "", line.strip())
            if not line or line.startswith("syntax") or line.startswith("option "):
                continue
            if line.startswith("package "):
                out += [line, ""]
                continue
            if line.startswith("message "):
                message = line.split()[1]
                out += ["", line]
                continue
            m = FIELD.match(line)
            if m and not m.group(3):
                label, typ, _, _, fname, number, _ = m.groups()
                go_type = types.get((message, fname))
                if go_type is None:
                    # Hand-written protobuf types (Time, MicroTime, Duration; Quantity's string; the
                    # `items` of a named string slice) and aliases (core/v1 `List` is meta/v1's):
                    # what gogo-protobuf's descriptors said of them.
                    scalar = typ in SCALARS.values()
                    value = not (scalar and (label == "repeated" or typ in ("string", "bytes")))
                else:
                    value = value_field(go_type, typ)
                suffix = " [(gogoproto.nullable) = false]" if value else ""
                line = f"{label or 'optional'} {typ} {fname} = {number}{suffix};"
            out.append(("  " + line) if (m or line.startswith("map<")) else line)
        dest = os.path.join(PROTO_DIR, pkg, "generated.proto")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        open(dest, "w").write("\n".join(out) + "\n")
        print("wrote", os.path.relpath(dest, HERE))

# ---------------------------------------------------------------- generate: .proto text -> Rust table

FIELD = re.compile(r"^(optional|repeated|required)?\s*(map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*(\[.*\])?;$")

# Message types with a JSON form of their own (custom MarshalJSON in Go).
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "RawJson",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "RawJson",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
}
SCALAR_KIND = {"string": "Str", "bytes": "Bytes", "bool": "Bool", "int32": "I32", "int64": "I64",
               "uint32": "U32", "uint64": "U64", "double": "F64", "float": "F32", "fixed64": "U64F",
               "fixed32": "U32F", "sfixed64": "I64F", "sfixed32": "I32F", "sint32": "S32", "sint64": "S64"}

# Go structs embedded with `json:",inline"`: their fields sit in the parent's JSON object. Descriptors
# cannot tell these from named fields, so they are listed (from upstream's types.go files).
INLINE = {
    "k8s.io.api.core.v1.Volume": "volumeSource",
    "k8s.io.api.core.v1.PersistentVolumeSpec": "persistentVolumeSource",
    "k8s.io.api.core.v1.Probe": "handler",
    "k8s.io.api.core.v1.EphemeralContainer": "ephemeralContainerCommon",
    "k8s.io.api.core.v1.ConfigMapEnvSource": "localObjectReference",
    "k8s.io.api.core.v1.ConfigMapKeySelector": "localObjectReference",
    "k8s.io.api.core.v1.ConfigMapProjection": "localObjectReference",
    "k8s.io.api.core.v1.ConfigMapVolumeSource": "localObjectReference",
    "k8s.io.api.core.v1.SecretEnvSource": "localObjectReference",
    "k8s.io.api.core.v1.SecretKeySelector": "localObjectReference",
    "k8s.io.api.core.v1.SecretProjection": "localObjectReference",
    "k8s.io.api.networking.v1.IngressRule": "ingressRuleValue",
    "k8s.io.api.admissionregistration.v1.RuleWithOperations": "rule",
    "k8s.io.api.admissionregistration.v1.NamedRuleWithOperations": "ruleWithOperations",
    "k8s.io.api.resource.v1.DeviceClaimConfiguration": "deviceConfiguration",
    "k8s.io.api.resource.v1.DeviceClassConfiguration": "deviceConfiguration",
    "k8s.io.api.resource.v1.DeviceAllocationConfiguration": "deviceConfiguration",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse(text):
    """(package, {message: [(label, type, key, value, name, number, nullable)]}) of one generated.proto."""
    text = strip_comments(text)
    package = re.search(r"\bpackage\s+([\w.]+)\s*;", text).group(1)
    messages = {}
    for name, body in re.findall(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        rows = []
        for stmt in body.split(";"):
            stmt = " ".join(stmt.split())
            if not stmt or stmt.startswith("option ") or stmt.startswith("reserved "):
                continue
            m = FIELD.match(stmt + ";")
            if not m:
                sys.exit(f"{package}.{name}: cannot parse {stmt!r}")
            label, typ, key, value, fname, number, opts = m.groups()
            nullable = not (opts and re.search(r"nullable\)\s*=\s*false", opts))
            rows.append((label or "optional", typ, key, value, fname, int(number), nullable))
        messages[f"{package}.{name}"] = rows
    return package, messages


def resolve(typ, package, known):
    if typ in SCALAR_KIND:
        return typ
    for candidate in (f"{package}.{typ}", typ):
        if candidate in known:
            return candidate
    sys.exit(f"unknown type {typ} in package {package}")


def rust_kind(typ, index):
    if typ in SCALAR_KIND:
        return f"K::{SCALAR_KIND[typ]}"
    if typ in SPECIAL:
        return f"K::{SPECIAL[typ]}"
    return f"K::Msg({index[typ]})"


def generate():
    all_messages, packages = {}, {}
    for root, _, files in os.walk(PROTO_DIR):
        for f in sorted(files):
            if f.endswith(".proto"):
                package, messages = parse(open(os.path.join(root, f)).read())
                all_messages.update(messages)
                packages.update({m: package for m in messages})
    for message, fname in INLINE.items():
        if not any(row[4] == fname for row in all_messages.get(message, [])):
            sys.exit(f"inline field {message}.{fname} is not in the .proto files")
    names = sorted(all_messages)
    index = {n: i for i, n in enumerate(names)}
    out = ["// @generated by tools/proto-tables/gen.py from tools/proto-tables/proto/: do not edit.",
           "//! Protobuf field tables of the Kubernetes API types (message name -> fields), sorted by name.",
           "//! A field is f(number, JSON name, kind, label, omit_zero): omit_zero marks a Go value (non-pointer)",
           "//! field, which gogo-protobuf always writes and whose zero value JSON `omitempty` leaves out.",
           "",
           "use super::{Kind as K, Label as L, Message, field as f, message as m};",
           "",
           "#[rustfmt::skip]",
           "pub static MESSAGES: &[Message] = &["]
    for n in names:
        pkg = packages[n]
        rows = []
        for label, typ, key, value, fname, number, nullable in sorted(all_messages[n], key=lambda r: r[5]):
            if key:
                k = rust_kind(resolve(key, pkg, all_messages), index)
                v = rust_kind(resolve(value, pkg, all_messages), index)
                rows.append(f'f({number},"{fname}",{v},L::Map({k}),false)')
            else:
                kind = rust_kind(resolve(typ, pkg, all_messages), index)
                lab = "L::Rep" if label == "repeated" else "L::Inline" if INLINE.get(n) == fname else "L::Opt"
                rows.append(f'f({number},"{fname}",{kind},{lab},{"false" if nullable else "true"})')
        fields = all_messages[n]
        # go-to-protobuf turns a named Go string slice (ExtraValue, Verbs) into a message of `repeated items = 1`;
        # its JSON is the bare array.
        array = len(fields) == 1 and fields[0][0] == "repeated" and fields[0][4] == "items" and fields[0][1] == "string"
        out.append(f'm("{n}",{"true" if array else "false"},&[{",".join(rows)}]),')
    out.append("];")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    open(OUT, "w").write("\n".join(out) + "\n")
    print(f"wrote {os.path.relpath(OUT)}: {len(names)} messages")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "extract":
        extract(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "source":
        source(sys.argv[2])
    elif len(sys.argv) == 1:
        generate()
    else:
        sys.exit(__doc__)
