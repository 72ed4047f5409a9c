#!/usr/bin/env bash
# The house rules that the compiler cannot check (docs/architecture.md). The layers are crates
# (crates/), so the compiler holds them: a crate that imports one above it does not build. What
# is left:
#  1. A controller's canonical name appears once in the controller manager's code (the product's
#     crates, not the development tools), in the table of crates/app/src/app/controllers.rs:
#     comments, unit tests and upstream's help texts quoted in the flag table aside (a path segment such as
#     `kubernetes.io/job-controller`, a Job's `managedBy`, is no name).
#  2. A controller never uses another controller's files, only the helpers they share (below);
#     the node lifecycle controller runs the taint eviction controller inside itself, as upstream.
set -euo pipefail
cd "$(dirname "$0")/.."

failed=0

# The code lines of files, as `file:line:text`: no `//` comment lines, nothing from a
# `#[cfg(test)]` module on (unit tests sit at the end of a file).
code_lines() {
  awk 'FNR == 1 { in_test = 0 } /^#\[cfg\(test\)\]/ { in_test = 1 } !in_test && !/^[[:space:]]*\/\// { print FILENAME ":" FNR ":" $0 }' "$@"
}

# `code_lines` with each `use` statement on one line and its groups spelled out path by path
# (`use crate::{client::Client, runtime::{a, b}};` becomes
# `use crate::client::Client crate::runtime::a crate::runtime::b`), so that a grouped import is
# checked as its paths are.
use_paths() {
  code_lines "$@" | awk '
    function expand(tree,    open, depth, i, c, shut, prefix, inner, item, out, start) {
      open = index(tree, "{")
      if (open == 0) return tree
      depth = 0
      for (i = open; i <= length(tree); i++) {
        c = substr(tree, i, 1)
        if (c == "{") depth++
        else if (c == "}" && --depth == 0) { shut = i; break }
      }
      prefix = substr(tree, 1, open - 1); inner = substr(tree, open + 1, shut - open - 1)
      out = ""; depth = 0; start = 1
      for (i = 1; i <= length(inner) + 1; i++) {
        c = substr(inner, i, 1)
        if (c == "{") depth++
        else if (c == "}") depth--
        else if ((c == "," && depth == 0) || i > length(inner)) {
          item = substr(inner, start, i - start); start = i + 1
          if (item != "") out = out " " expand(prefix item)
        }
      }
      return substr(out, 2)
    }
    FNR == 1 { statement = "" }
    {
      split($0, parts, ":"); text = substr($0, length(parts[1]) + length(parts[2]) + 3)
      if (statement == "" && text !~ /^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?use[[:space:]]/) { print; next }
      if (statement == "") where = parts[1] ":" parts[2] ":"
      statement = statement text
      if (text !~ /;/) next
      tree = statement; sub(/^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?use[[:space:]]+/, "", tree)
      sub(/;.*/, "", tree); gsub(/[[:space:]]/, "", tree)
      print where "use " expand(tree)
      statement = ""
    }'
}

# Every canonical name of the table, then where else the controller manager's code says it.
mapfile -t names < <(tr '\n' ' ' <crates/app/src/app/controllers.rs |
  grep -oE '(^|[^a-z_])(plain|gated|cloud|off_by_default|off_by_default_gated)\(\s*"[a-z0-9-]+"' | grep -oE '"[a-z0-9-]+"' | tr -d '"')
if ((${#names[@]} < 40)); then
  echo "names: found only ${#names[@]} controllers in crates/app/src/app/controllers.rs; the check is out of date" >&2
  exit 1
fi
mapfile -t files < <(find src crates -name '*.rs' ! -path 'crates/sandbox/*' ! -path 'crates/envtest/*' \
  ! -path 'crates/sandbox-cli/*' ! -path crates/app/src/app/controllers.rs ! -name 'tests.rs' ! -name '*_tests.rs' | sort)
alternation=$(IFS='|'; echo "${names[*]}")
if hits=$(code_lines "${files[@]}" | grep -vE '^crates/app/src/app/flags/table\.rs:[0-9]+:[[:space:]]+"' |
  grep -E "(^|[^a-z0-9./-])(${alternation})([^a-z0-9.-]|$)"); then
  echo "names: a controller is named outside the controller table:" >&2
  echo "$hits" >&2
  failed=1
fi

# Modules of the controllers crate that are shared helpers rather than controllers.
shared='podutil|nodeutil|endpointutil|jobutil|history|volumeutil|resourceclaimutil|finalizerutil|syncmetrics'
mapfile -t files < <(find crates/controllers/src/controllers -name '*.rs' ! -name 'tests.rs' ! -name '*_tests.rs' | sort)
if hits=$(use_paths "${files[@]}" | awk -v shared="^($shared)$" '
  {
    split($0, parts, "/"); owner = parts[5]; sub(/\.rs:.*/, "", owner); sub(/:.*/, "", owner)
    text = $0
    while (match(text, /crate::controllers::[a-z_0-9]+/)) {
      used = substr(text, RSTART + 20, RLENGTH - 20); text = substr(text, RSTART + RLENGTH)
      if (used != owner && used !~ shared && !(owner == "nodelifecycle" && used == "tainteviction")) print
    }
  }' | grep .); then
  echo "controllers: a controller uses another controller's files (share a helper instead):" >&2
  echo "$hits" >&2
  failed=1
fi
if ((failed)); then
  exit 1
fi
echo "controller names and files: ok (${#names[@]} controllers, $(find src crates -name '*.rs' | wc -l) files)"
