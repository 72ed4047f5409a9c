#!/usr/bin/env bash
# CI's delivery check: builds the static binary, prints its size budget, checks the kubeadm
# patch against kubeadm's manifest, builds the .deb, the .rpm and the image (scripts/image-check.sh),
# checks their contents and metadata, extracts the .rpm and, as root, upgrades a leading
# replica by its .deb and by its image on the real server (tests/runtime/mixed_ha.rs) and
# installs the .deb (dpkg -i, upgrade, remove, purge).
#   scripts/package-check.sh [profile]   (ci-package by default: release without whole-program
#                                         LTO, see packaging/README.md; `release` checks the real one)
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${1:-ci-package}
name=kube-controller-manager
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "package check: $*" >&2; exit 1; }
same() { [ "$1" = "$2" ] || fail "$3:"$'\n'"expected:"$'\n'"$2"$'\n'"got:"$'\n'"$1"; }

# kubectl (the kubeadm patch) and the real control plane (the upgrade test) come with the
# tests' setup; the rest with `scripts/setup.sh package`.
command -v kubectl >/dev/null 2>&1 || fail "kubectl is missing: run scripts/setup.sh test (and scripts/setup.sh package)"

echo "-- static binary ($profile profile)"
started=$SECONDS
binary=$(scripts/build-static.sh "$profile")
echo "built in $((SECONDS - started)) s: $binary"
ldd_says=$(ldd "$binary" 2>&1 || true)
grep -qE 'not a dynamic executable|statically linked' <<<"$ldd_says" || fail "ldd: $ldd_says"
! readelf -dW "$binary" | grep -q '(NEEDED)' || fail "the binary needs shared libraries"
! readelf -lW "$binary" | grep -q 'program interpreter' || fail "the binary needs a program interpreter"
# `--version` says the Kubernetes release matched, as upstream's binary does (crates/base/src/apimachinery/version.rs).
release=$(sed -n 's/^pub const KUBERNETES_RELEASE: Release = Release { major: \([0-9]*\), minor: \([0-9]*\), patch: \([0-9]*\) };$/v\1.\2.\3/p' \
    crates/base/src/apimachinery/version.rs)
[ -n "$release" ] || fail "cannot read KUBERNETES_RELEASE from crates/base/src/apimachinery/version.rs"
"$binary" --version | grep -qx "Kubernetes $release" || fail "--version: $("$binary" --version), expected Kubernetes $release"
scripts/size-budget.sh "$binary" "$profile"
! cargo tree --quiet -p kube-controller-manager -e normal --prefix none | grep -qE '^(rcgen|kcm-sandbox|kcm-envtest) ' ||
    fail "the packaged build contains a development tool (the sandbox, the test bed or rcgen)"

echo "-- shipped flags are accepted by the binary"
# shellcheck disable=SC1091
args=$(set -a && . packaging/$name.env && echo "$KUBE_CONTROLLER_MANAGER_ARGS")
# shellcheck disable=SC2086
"$binary" $args --version >/dev/null || fail "packaging/$name.env has flags the binary rejects"
# systemd reads the file with its own parser (the one environment.d uses): same flags, one line.
generator=/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator
if [ -x "$generator" ]; then
    mkdir -p "$work/env/environment.d"
    cp packaging/$name.env "$work/env/environment.d/10-kcm.conf"
    parsed=$(XDG_CONFIG_HOME=$work/env "$generator" | sed -n 's/^KUBE_CONTROLLER_MANAGER_ARGS="\(.*\)"$/\1/p')
    same "$parsed" "$args" "the flags as systemd reads packaging/$name.env"
fi
pod_args=$(sed -n 's/^    - \(--.*\)$/\1/p' packaging/static-pod/$name.yaml)
[ -n "$pod_args" ] || fail "no flags found in the static Pod manifest"
# shellcheck disable=SC2086
"$binary" $pod_args --version >/dev/null || fail "the static Pod manifest has flags the binary rejects"
grep -q 'path: /healthz' packaging/static-pod/$name.yaml && grep -q 'port: probe-port' packaging/static-pod/$name.yaml \
    && grep -q 'containerPort: 10257' packaging/static-pod/$name.yaml \
    && grep -q 'scheme: HTTPS' packaging/static-pod/$name.yaml || fail "the static Pod's probes are not /healthz:10257 HTTPS"

echo "-- kubeadm: its manifest with our patch is our static Pod"
# kubectl applies a strategic merge patch as kubeadm does (both use apimachinery's), offline.
pod_json() { kubectl patch --local -f "$1" --type "$2" --patch-file "$3" -o json | jq -S .; }
pod=packaging/static-pod/$name.yaml
echo '{}' >"$work/empty-patch.json"
same "$(pod_json packaging/kubeadm/$name.kubeadm.yaml strategic packaging/kubeadm/patches/$name+strategic.yaml)" \
    "$(pod_json "$pod" merge "$work/empty-patch.json")" "kubeadm's manifest with packaging/kubeadm/patches applied, against $pod"
same "$(pod_json "$pod" merge "$work/empty-patch.json" | jq -r '.spec.containers[0] | .image + " " + .command[0]')" \
    "localhost/kube-controller-manager-rs:v$version kube-controller-manager" \
    "the static Pod's image (packaging/image/build.py's name) and command (found through the image's PATH)"
same "$(pod_json packaging/kubeadm/$name.kubeadm.yaml merge "$work/empty-patch.json" | jq -r '.spec.containers[0].image')" \
    "registry.k8s.io/kube-controller-manager:$release" "kubeadm's manifest's image"

echo "-- packages"
deb=$(packaging/build.sh deb "$binary" "$work/out")
rpm=$(packaging/build.sh rpm "$binary" "$work/out")
ls -l "$deb" "$rpm"
scripts/image-check.sh "$binary"

echo "-- .deb contents and metadata"
deb_files=$(dpkg-deb -c "$deb" | awk '{ sub("^\\./", "/", $6); print $1, $2, $6 }' | grep -v ' /$' | sort)
same "$deb_files" "$(sort <<EOF2
drwxr-xr-x root/root /etc/
drwxr-xr-x root/root /etc/default/
-rw-r--r-- root/root /etc/default/$name
drwxr-xr-x root/root /lib/
drwxr-xr-x root/root /lib/systemd/
drwxr-xr-x root/root /lib/systemd/system/
-rw-r--r-- root/root /lib/systemd/system/$name.service
drwxr-xr-x root/root /usr/
drwxr-xr-x root/root /usr/bin/
-rwxr-xr-x root/root /usr/bin/$name
drwxr-xr-x root/root /usr/share/
drwxr-xr-x root/root /usr/share/doc/
drwxr-xr-x root/root /usr/share/doc/$name/
-rw-r--r-- root/root /usr/share/doc/$name/copyright
drwxr-xr-x root/root /var/
drwxr-xr-x root/root /var/lib/
drwxr-x--- root/root /var/lib/$name/
EOF2
)" ".deb file list"
same "$(dpkg-deb -f "$deb" Package Version Architecture Depends)" \
    "Package: $name
Version: $version-1
Architecture: $(dpkg --print-architecture)
Depends: init-system-helpers (>= 1.54~), passwd" ".deb control fields"
dpkg-deb -e "$deb" "$work/control"
same "$(cat "$work/control/conffiles")" "/etc/default/$name" ".deb conffiles"
for script in postinst prerm postrm; do
    [ -x "$work/control/$script" ] || fail ".deb $script is missing or not executable"
    sh -n "$work/control/$script" || fail ".deb $script does not parse"
    grep -q '/run/systemd/system' "$work/control/$script" || fail ".deb $script does not check for a running systemd"
done
cmp -s <(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/$name) "$binary" || fail ".deb binary differs"

echo "-- .rpm contents and metadata"
rpm_files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}/%{FILEGROUPNAME} %{FILENAMES}\n]' "$rpm" | sort)
same "$rpm_files" "$(sort <<EOF2
-rw-r--r-- root/root /etc/sysconfig/$name
-rwxr-xr-x root/root /usr/bin/$name
-rw-r--r-- root/root /usr/lib/systemd/system/$name.service
drwxr-x--- $name/$name /var/lib/$name
EOF2
)" ".rpm file list"
same "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH}\n' "$rpm")" "$name $version 1 $(uname -m)" ".rpm header"
same "$(rpm -qp --configfiles "$rpm")" "/etc/sysconfig/$name" ".rpm config files"
scripts=$(rpm -qp --scripts "$rpm")
for scriptlet in preinstall postinstall preuninstall postuninstall; do
    grep -q "^$scriptlet scriptlet" <<<"$scripts" || fail ".rpm has no $scriptlet scriptlet"
done
grep -q 'useradd --system' <<<"$scripts" || fail ".rpm does not create the system user"
rpm -qpR "$rpm" | grep -qx 'shadow-utils' || fail ".rpm does not require shadow-utils"
mkdir "$work/rpm-root"
(cd "$work/rpm-root" && rpm2cpio "$rpm" | cpio -idm --quiet)
same "$(cd "$work/rpm-root" && find . -mindepth 1 \( -type f -o -path ./var/lib/$name \) | sed 's/^\.//' | sort)" \
    "$(printf '%s\n' /etc/sysconfig/$name /usr/bin/$name /usr/lib/systemd/system/$name.service /var/lib/$name | sort)" \
    ".rpm payload"
cmp -s "$work/rpm-root/usr/bin/$name" "$binary" || fail ".rpm binary differs"
cmp -s "$work/rpm-root/usr/lib/systemd/system/$name.service" systemd/$name.service || fail ".rpm unit differs"

echo "-- systemd unit"
score=$(systemd-analyze security --offline=true "systemd/$name.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
echo "exposure score: $score"
awk -v s="$score" 'BEGIN { exit !(s != "" && s < 2.0) }' || fail "the unit's exposure score is ${score:-unknown}, not below 2.0"

if [ "$(id -u)" != 0 ]; then
    echo "-- *** not root: the upgrade of a leading replica (containerd) and the install test (dpkg -i, upgrade," \
        "remove, purge) are SKIPPED (both need root; CI runs as root) ***" >&2
    exit 0
fi

echo "-- a leading replica upgraded by its .deb and by its image on the real server (tests/runtime/mixed_ha.rs)"
if KCM_STATIC_BINARY=$binary cargo test --quiet --test runtime -- --ignored --exact --nocapture \
    mixed_ha::ours_upgraded_by_deb_and_by_image_while_leading_hands_over_without_losing_work >"$work/upgrade.log" 2>&1; then
    grep -E '^(mixed HA:|test result:)' "$work/upgrade.log"
else
    tail -n 80 "$work/upgrade.log" >&2
    fail "the upgrade of a leading replica failed (above)"
fi

if dpkg -s $name >/dev/null 2>&1; then
    fail "$name is installed on this machine already: the install test needs a machine without it"
fi

echo "-- dpkg -i"
dpkg -i "$deb" >/dev/null
"/usr/bin/$name" --version
same "$(getent passwd $name | cut -d: -f6,7)" "/var/lib/$name:/usr/sbin/nologin" "the system user"
same "$(stat -c '%U:%G %a' /var/lib/$name)" "$name:$name 750" "the state directory"
[ -L /etc/systemd/system/multi-user.target.wants/$name.service ] || fail "the service is not enabled"
systemd-analyze verify /lib/systemd/system/$name.service || fail "systemd-analyze verify failed"

echo "-- upgrade (the same version again) keeps an edited configuration"
echo '# edited by the administrator' >>/etc/default/$name
dpkg -i "$deb" >/dev/null
grep -q '^# edited by the administrator$' /etc/default/$name || fail "the upgrade replaced /etc/default/$name"

echo "-- dpkg -r keeps configuration and state; dpkg -P removes them"
touch /var/lib/$name/state
dpkg -r $name >/dev/null 2>&1
[ ! -e /usr/bin/$name ] && [ ! -e /lib/systemd/system/$name.service ] || fail "remove left the binary or the unit"
[ -f /etc/default/$name ] && [ -f /var/lib/$name/state ] || fail "remove dropped the configuration or the state"
dpkg -P $name >/dev/null 2>&1
[ ! -e /etc/default/$name ] && [ ! -e /var/lib/$name ] || fail "purge left the configuration or the state"
[ ! -e /etc/systemd/system/multi-user.target.wants/$name.service ] || fail "purge left the service enabled"
[ ! -L /etc/systemd/system/$name.service ] || fail "purge left the service masked"
! dpkg -s $name >/dev/null 2>&1 || fail "the package is still known to dpkg"
echo "package check passed"
