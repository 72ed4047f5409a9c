#!/usr/bin/env bash
# Builds the fully static kube-controller-manager that the packages ship and prints its path:
#   scripts/build-static.sh [profile]      (release by default; CI packages `ci-package`)
# `+crt-static` links glibc statically (static-pie: ASLR is kept). The explicit --target makes
# RUSTFLAGS apply to the target only, so build scripts and proc-macros (serde_derive) are still
# built for the host as the dynamic libraries they must be. The package holds the product's
# crates only: the development tools (sandbox, test bed) are packages of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${1:-release}
target=$(rustc -vV | sed -n 's/^host: //p')
case $target in
    *-linux-gnu) ;;
    *) echo "static builds are set up for *-linux-gnu hosts; this one is $target" >&2; exit 1 ;;
esac
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --quiet --profile "$profile" -p kube-controller-manager --bin kube-controller-manager --target "$target"
echo "${CARGO_TARGET_DIR:-$PWD/target}/$target/$profile/kube-controller-manager"
