#!/usr/bin/env bash
# Every test `cargo test` runs, each test binary whatever another one did, then one summary.
#   scripts/test.sh [libtest arguments, e.g. a name filter]
#
# - One build first, with cargo's progress, so that a compile error shows once and every binary
#   starts from the same build.
# - The integration binaries that mostly wait run beside the others instead of after them:
#   `sandbox` (its longest tests, the two demos), `runtime` (leader election, HA, chaos) and `e2e`
#   (upstream's e2e specs), KCM_SANDBOX_TEST_THREADS tests at a time each (default 2), while the
#   others keep RUST_TEST_THREADS (4, from .cargo/config.toml): up to ten at once on two cores,
#   which the tests' waits and deadlines allow. Their output is printed when they end.
# - Every other binary (the tests of the crates, `crates/*`: unit, binary and doc tests; the
#   controller manager's binary's, each `tests/*.rs`) runs in turn, each whatever the ones
#   before it did.
# - The summary names every binary with its result and every failed test, and ends with one
#   line `tests: N passed, N failed`; the exit status is non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace --no-run || exit

logs=$(mktemp -d)
beside=(sandbox runtime e2e)
declare -A beside_pid
# The background runs end with this script (a non-interactive shell's background job would
# otherwise ignore Ctrl-C and live on).
trap 'for pid in "${beside_pid[@]}"; do kill "$pid" 2>/dev/null; done; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

# --no-fail-fast everywhere: a selection of several executables would otherwise stop at the
# first failing one.
for name in "${beside[@]}"; do
  RUST_TEST_THREADS=${KCM_SANDBOX_TEST_THREADS:-2} cargo test --quiet --no-fail-fast --test "$name" -- "$@" \
    >"$logs/$name" 2>&1 &
  beside_pid[$name]=$!
done

# name: cargo's target arguments.
# `crates`: every crate of crates/ at once, with the features of the build above (one crate at
# a time would resolve other features for some dependencies and build them again). The root
# package's library only names the crates (no tests of its own); its binary has unit tests.
targets=("crates:--workspace --exclude=kube-controller-manager" "bins:-p kube-controller-manager --bins")
for t in tests/*.rs; do
  b=$(basename "$t" .rs)
  [[ " ${beside[*]} " == *" $b "* ]] || targets+=("$b:--test=$b")
done

declare -A status
names=()
for entry in "${targets[@]}"; do
  name=${entry%%:*}
  names+=("$name")
  echo "== test binary: $name"
  started=$SECONDS
  read -ra selection <<<"${entry#*:}"
  cargo test --quiet --no-fail-fast "${selection[@]}" -- "$@" 2>&1 | tee "$logs/$name"
  status[$name]=${PIPESTATUS[0]}
  echo "== test binary: $name: exit ${status[$name]} after $((SECONDS - started)) s"
done

for name in "${beside[@]}"; do
  wait "${beside_pid[$name]}"
  status[$name]=$?
  unset "beside_pid[$name]"
  names+=("$name")
  echo "== test binary: $name (run beside the others)"
  cat "$logs/$name"
  echo "== test binary: $name: exit ${status[$name]}"
done

# The summary: each binary's result, the names libtest lists under its last `failures:`, and
# the totals of every `test result:` line.
echo
echo "== summary"
passed=0 failed=0 ignored=0 crashed=0 failing=()
for name in "${names[@]}"; do
  log="$logs/$name"
  while read -r p f i; do
    passed=$((passed + p)) failed=$((failed + f)) ignored=$((ignored + i))
  done < <(sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored;.*/\1 \2 \3/p' "$log")
  if ((status[$name] == 0)); then
    echo "ok      $name"
    continue
  fi
  failing+=("$name")
  echo "FAILED  $name (exit ${status[$name]})"
  # The failed tests, as libtest reports each (`test NAME ... FAILED`, or `NAME --- FAILED` in
  # --quiet's progress lines), once each.
  sed -nE 's/^test (.*) \.\.\. FAILED$/\1/p; s/^([^ ]+) --- FAILED$/\1/p' "$log" | sort -u | sed 's/^/          /'
  # A test executable that ended without its `test result:` line crashed (or did not build).
  runs=$(grep -c '^running [0-9]* tests\?$' "$log")
  results=$(grep -c '^test result:' "$log")
  if ((results < runs || runs == 0)); then
    crashed=$((crashed + 1))
    echo "          (a test executable ended without its result: it crashed or did not build; its output is above)"
  fi
done
((ignored == 0)) || echo "ignored tests: $ignored"
((crashed == 0)) || echo "test executables that crashed or did not build: $crashed"
echo "tests: $passed passed, $failed failed"
if ((${#failing[@]} > 0)); then
  echo "failed test binaries: ${failing[*]}" >&2
  exit 1
fi
