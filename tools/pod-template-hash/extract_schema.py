#!/usr/bin/env python3
"""Writes schema/core_v1_types.go and schema/meta_v1_types.go from upstream's own declarations:
every struct and named type reachable from `v1.PodTemplateSpec`, in upstream's source order,
with comments and protobuf tags dropped (only the `json` tag is kept, which is all that
gen_schema.py and the Go driver need). Run it on a new Kubernetes release, then gen_schema.py.

Usage:
  tools/pod-template-hash/extract_schema.py CORE_V1_TYPES_GO META_V1_GO...
with the files of the release, from the Kubernetes tree:
`staging/src/k8s.io/api/core/v1/types.go`, then
`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go` and, since 1.35, that package's
`fieldsv1_byte.go` (`FieldsV1` as built without the `fieldsv1string` tag, as kube-controller-manager is).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUILTIN = {'bool', 'byte', 'int32', 'int64', 'string', 'uint32'}
# Types from other packages that the driver provides itself (see the README).
FOREIGN = {'resource.Quantity', 'intstr.IntOrString', 'types.UID', 'time.Time'}
# `metav1.Time` is declared in meta/v1's time.go (`time.Time` embedded, `protobuf:"-"`);
# gen_schema.py prints it by hand, the driver decodes it through the embedded `time.Time`.
META_TIME = 'type Time struct {\n\ttime.Time `json:",inline"`\n}\n'


def strip_comments(src):
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    return re.sub(r'//[^\n]*', '', src)


def parse(path, pkg):
    """Declarations of a file: {qualified name: (index, kind, body)} where kind is 'struct'
    (body: [(name or None, type, json tag)]) or 'named' (body: the underlying type)."""
    src = strip_comments(open(path).read())
    decls = {}
    for m in re.finditer(r'^type (\w+) struct \{\n(.*?)^\}', src, re.S | re.M):
        fields = []
        for line in m.group(2).split('\n'):
            line = line.strip()
            if not line:
                continue
            tag = re.search(r'`(.*)`', line)
            json = re.search(r'json:"([^"]*)"', tag.group(1)).group(1) if tag else None
            head = line.split('`')[0].split()
            if len(head) == 1:
                fields.append((None, head[0], json))
            else:
                fields.append((head[0], head[1], json))
        decls[pkg + '.' + m.group(1)] = (m.start(), 'struct', fields)
    for m in re.finditer(r'^type (\w+) ((?!struct)[^\n=]+)$', src, re.M):
        decls[pkg + '.' + m.group(1)] = (m.start(), 'named', m.group(2).strip())
    return decls


def referenced(ty, pkg):
    """The qualified named types a type expression mentions."""
    out = []
    for name in re.findall(r'[\w.]+', ty.replace('map[', ' ').replace(']', ' ')):
        if name in BUILTIN:
            continue
        if name.startswith('metav1.'):
            out.append('meta.' + name[len('metav1.'):])
        elif '.' in name:
            out.append(name)
        else:
            out.append(pkg + '.' + name)
    return out


def reachable(decls, root):
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name in FOREIGN:
            continue
        if name not in decls:
            sys.exit('undeclared type %s' % name)
        seen.add(name)
        pkg = name.split('.')[0]
        _, kind, body = decls[name]
        types = [t for _, t, _ in body] if kind == 'struct' else [body or '']
        for ty in types:
            todo.extend(referenced(ty, pkg))
    return seen


def render(decls, names, pkg, header):
    out = [header]
    for name in sorted((n for n in names if n.startswith(pkg + '.')), key=lambda n: decls[n][0]):
        short = name.split('.', 1)[1]
        _, kind, body = decls[name]
        if name == 'meta.Time':
            out.append(META_TIME)
            continue
        if kind == 'named':
            out.append('type %s %s\n' % (short, body))
            continue
        lines = []
        for field, ty, json in body:
            tag = ' `json:"%s"`' % json if json is not None else ''
            lines.append('\t%s%s' % ((field + ' ' if field else '') + ty, tag))
        out.append('type %s struct {\n%s\n}\n' % (short, '\n'.join(lines)))
    return '\n'.join(out)


CORE_HEADER = '''package v1

import (
\t"k8s.io/apimachinery/pkg/api/resource"
\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
\t"k8s.io/apimachinery/pkg/util/intstr"
)
'''

META_HEADER = '''package v1

import (
\t"time"

\t"k8s.io/apimachinery/pkg/types"
)
'''


def main():
    core, metas = sys.argv[1], sys.argv[2:]
    decls = parse(core, 'core')
    for i, meta in enumerate(metas):
        # Declarations of later files sort after those of earlier ones.
        decls.update({k: (i * 10**9 + at, kind, body) for k, (at, kind, body) in parse(meta, 'meta').items()})
    decls['meta.Time'] = (len(metas) * 10**9, 'named', None)
    names = reachable(decls, 'core.PodTemplateSpec')
    with open(os.path.join(HERE, 'schema', 'core_v1_types.go'), 'w') as f:
        f.write(render(decls, names, 'core', CORE_HEADER))
    with open(os.path.join(HERE, 'schema', 'meta_v1_types.go'), 'w') as f:
        f.write(render(decls, names, 'meta', META_HEADER))


main()
