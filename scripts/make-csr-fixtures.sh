#!/bin/bash
# Usage: scripts/make-csr-fixtures.sh crates/base/src/x509/testdata/csrs
# Makes the key-type requests of `kcm_base::x509::samples` (unit tests, side-by-side scenario `certificates-hostile`): requests for
# CN=system:node:sbs-node, O=system:nodes, DNS sbs-node.example, one per key type and
# signature algorithm. The keys are thrown away; the requests are committed.
set -euo pipefail
out=${1:?output directory}
subj="/O=system:nodes/CN=system:node:sbs-node"
ext="subjectAltName=DNS:sbs-node.example"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
req() { # name key [openssl req options]
  local name=$1 key=$2; shift 2
  openssl req -new -key "$key" -subj "$subj" -addext "$ext" "$@" -out "$out/$name.pem"
}
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out $work/rsa1024 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1536 -out $work/rsa1536 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -pkeyopt rsa_keygen_pubexp:3 -out $work/rsa2048e3 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $work/rsa2048 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:4096 -out $work/rsa4096 2>/dev/null
for curve in P-224 P-256 P-384 P-521; do
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:$curve -out $work/$curve 2>/dev/null
done
openssl genpkey -algorithm ED25519 -out $work/ed25519
req rsa1024-sha256 $work/rsa1024 -sha256
req rsa1536-sha384 $work/rsa1536 -sha384
req rsa2048-e3-sha256 $work/rsa2048e3 -sha256
req rsa2048-sha1 $work/rsa2048 -sha1
req rsa2048-sha384 $work/rsa2048 -sha384
req rsa2048-pss-sha256 $work/rsa2048 -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest
req rsa4096-sha512 $work/rsa4096 -sha512
req p224-sha256 $work/P-224 -sha256
req p256-sha512 $work/P-256 -sha512
req p256-sha1 $work/P-256 -sha1
req p384-sha256 $work/P-384 -sha256
req p521-sha512 $work/P-521 -sha512
req ed25519 $work/ed25519
