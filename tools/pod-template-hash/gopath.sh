#!/bin/sh
# Builds a GOPATH in which driver/main.go compiles with Debian's Go (1.19, GOPATH mode, no module
# proxy): the schema/ declarations as k8s.io/api/core/v1 and apimachinery's meta/v1, and, taken
# unchanged from a Kubernetes source tree, go-spew and k8s.io/utils/dump as kube-controller-manager
# vendors them, gopkg.in/inf.v0, and apimachinery's resource, intstr and types packages. The two
# packages those import only for CBOR and logging are stubbed (never called by the driver).
#
# Usage: tools/pod-template-hash/gopath.sh KUBERNETES_TREE GOPATH_DIR
# then:  cd tools/pod-template-hash/driver && GO111MODULE=off GOPATH=GOPATH_DIR go run main.go < ../cases.json
set -eu
kube=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$out/src
apim=$kube/staging/src/k8s.io/apimachinery/pkg

mkdir -p "$src/k8s.io/api/core/v1" "$src/k8s.io/apimachinery/pkg/apis/meta/v1"
cp "$here/schema/core_v1_types.go" "$src/k8s.io/api/core/v1/types.go"
cp "$here/schema/meta_v1_types.go" "$src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go"

copy_package() { # $1: source dir, $2: import path; the package's non-test, non-generated files
	mkdir -p "$src/$2"
	for f in "$1"/*.go; do
		case $f in *_test.go | */generated.pb.go | */zz_generated.* | */quantity_proto.go | */instr_fuzz.go) continue ;; esac
		cp "$f" "$src/$2/"
	done
}
copy_package "$kube/vendor/github.com/davecgh/go-spew/spew" github.com/davecgh/go-spew/spew
copy_package "$kube/vendor/k8s.io/utils/dump" k8s.io/utils/dump
copy_package "$kube/vendor/gopkg.in/inf.v0" gopkg.in/inf.v0
copy_package "$apim/api/resource" k8s.io/apimachinery/pkg/api/resource
copy_package "$apim/util/intstr" k8s.io/apimachinery/pkg/util/intstr
mkdir -p "$src/k8s.io/apimachinery/pkg/types"
cp "$apim/types/uid.go" "$src/k8s.io/apimachinery/pkg/types/"

mkdir -p "$src/k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct" "$src/k8s.io/klog/v2"
cat >"$src/k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct/direct.go" <<'EOF'
// Package direct is a stub: the driver never encodes CBOR.
package direct

import "errors"

func Marshal(src interface{}) ([]byte, error) { return nil, errors.New("cbor: not in this build") }

func Unmarshal(src []byte, dst interface{}) error { return errors.New("cbor: not in this build") }
EOF
cat >"$src/k8s.io/klog/v2/klog.go" <<'EOF'
// Package klog is a stub: the driver's decoding logs nothing worth keeping.
package klog

func Errorf(format string, args ...interface{}) {}
EOF
