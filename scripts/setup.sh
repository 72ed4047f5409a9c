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
