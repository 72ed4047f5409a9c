#!/usr/bin/env bash
# Every test `cargo test` runs, in less wall time: the `sandbox` integration binary (its longest
# tests, the two demos, mostly wait) runs beside the others instead of after them.
#   scripts/test.sh [libtest arguments, e.g. a name filter]
# The sandbox binary runs KCM_SANDBOX_TEST_THREADS tests at a time (default 2) while the others
# keep RUST_TEST_THREADS (4, from .cargo/config.toml): six at once on two cores, which the
# tests' waits allow. Its output is printed when it ends; the exit status is the worst of both.
set -uo pipefail
cd "$(dirname "$0")/.."

# One build first, so that a compile error shows once and both runs start at the same time.
cargo test --no-run --quiet || exit

mapfile -t others < <(for t in tests/*.rs; do b=$(basename "$t" .rs); [[ $b == sandbox ]] || echo "--test=$b"; done)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

RUST_TEST_THREADS=${KCM_SANDBOX_TEST_THREADS:-2} cargo test --quiet --test sandbox -- "$@" >"$log" 2>&1 &
sandbox=$!

cargo test --lib --bins "${others[@]}" -- "$@"
status=$?
cargo test --doc -- "$@" || status=$?

wait "$sandbox"
sandbox_status=$?
echo "== the sandbox integration tests (run beside the others)"
cat "$log"
if ((sandbox_status != 0)); then
  echo "the sandbox integration tests failed (exit $sandbox_status)" >&2
fi
((status == 0 && sandbox_status == 0))
