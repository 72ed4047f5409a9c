#!/usr/bin/env bash
# The container image's check (scripts/package-check.sh runs it): builds the image of a static
# binary twice with packaging/image/build.py and compares the archives byte for byte, checks the
# OCI layout, manifest, config and layer (jq, tar), has skopeo read both archives and umoci unpack
# the root filesystem, and, as root: runs the binary there as the image's user with no shell
# (chroot), loads both archives into podman (vfs storage in a temporary root), and imports both
# into a containerd of its own (ctr) and runs the image as kubeadm's static Pod does: the command
# `kube-controller-manager`, found through the image's PATH.
#   scripts/image-check.sh BINARY
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: scripts/image-check.sh BINARY" >&2; exit 2; }
binary=$(realpath -e -- "$1")
cd "$(dirname "$0")/.."

name=kube-controller-manager
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
tag=v$version
ref=localhost/kube-controller-manager-rs:$tag
entrypoint=/usr/local/bin/$name
user=65532:65532

fail() { echo "image check: $*" >&2; exit 1; }
same() { [ "$1" = "$2" ] || fail "$3:"$'\n'"expected:"$'\n'"$2"$'\n'"got:"$'\n'"$1"; }
for tool in python3 jq skopeo umoci; do
    command -v $tool >/dev/null 2>&1 || fail "$tool is missing: run scripts/setup.sh package (as root)"
done

release=$(sed -n 's/^pub const KUBERNETES_RELEASE: Release = Release { major: \([0-9]*\), minor: \([0-9]*\), patch: \([0-9]*\) };$/v\1.\2.\3/p' \
    crates/base/src/apimachinery/version.rs)
[ -n "$release" ] || fail "cannot read KUBERNETES_RELEASE from crates/base/src/apimachinery/version.rs"
revision=${KCM_IMAGE_REVISION:-$(git log -1 --format=%H)} || fail "no git commit here: set KCM_IMAGE_REVISION and SOURCE_DATE_EPOCH"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)} || fail "no git commit here: set KCM_IMAGE_REVISION and SOURCE_DATE_EPOCH"
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
description=$(sed -n 's/^description = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
licence=$(sed -n 's/^License: //p' packaging/deb/copyright | head -n 1)
case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) fail "no image architecture known for $(uname -m)" ;;
esac

work=$(mktemp -d)
containerd_pid=
cleanup() {
    if [ -n "$containerd_pid" ]; then
        kill "$containerd_pid" 2>/dev/null || true
        wait "$containerd_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
# skopeo and podman unpack archives into TMPDIR (/var/tmp by default).
export TMPDIR=$work/tmp
mkdir "$TMPDIR"

echo "-- image: two builds, byte-identical"
started=$SECONDS
oci=$work/a/kube-controller-manager-rs-$tag.oci.tar
docker=$work/a/kube-controller-manager-rs-$tag.docker.tar
printed=$(python3 packaging/image/build.py "$binary" "$work/a") || fail "packaging/image/build.py failed"
same "$printed" "$oci"$'\n'"$docker" "the paths build.py printed"
python3 packaging/image/build.py "$binary" "$work/b" >/dev/null 2>"$work/b.log" || fail "the second build failed: $(cat "$work/b.log")"
for archive in "$oci" "$docker"; do
    cmp "$archive" "$work/b/${archive##*/}" || fail "two builds of ${archive##*/} differ: the build is not reproducible"
done
ls -l "$oci" "$docker"

# Each tar: USTAR, every entry owned by 0/0 with no user or group name (tar then shows the
# numbers), mtime SOURCE_DATE_EPOCH, entries in sorted order.
check_tar() {
    local names
    cmp -s <(head -c 263 "$1" | tail -c 6) <(printf 'ustar\0') || fail "$2 is not a USTAR archive"
    ! TZ=UTC tar --full-time -tvf "$1" | awk -v t="$(date -u -d "@$epoch" '+%Y-%m-%d %H:%M:%S')" '$2 != "0/0" || $4 " " $5 != t' | grep . ||
        fail "$2 has entries not owned by 0/0 (with no names) or not dated $created (above)"
    names=$(tar -tf "$1")
    same "$names" "$(LC_ALL=C sort <<<"$names")" "$2's entries are not sorted"
}

echo "-- OCI layout, manifest and config"
check_tar "$oci" "the oci-archive"
mkdir "$work/oci"
tar -xf "$oci" -C "$work/oci"
blobs=$work/oci/blobs/sha256
same "$(cat "$work/oci/oci-layout")" '{"imageLayoutVersion":"1.0.0"}' "oci-layout"
for blob in "$blobs"/*; do
    same "sha256:$(sha256sum <"$blob" | cut -d' ' -f1)" "sha256:${blob##*/}" "the digest of blob ${blob##*/}"
done
# The JSON is written with sorted keys and no spaces (jq -cS writes it so).
for json in "$work/oci/index.json" "$blobs"/*; do
    if jq -e . "$json" >/dev/null 2>&1; then
        cmp -s <(jq -jcS . "$json") "$json" || fail "${json#"$work"/oci/} is not written with sorted keys and no spaces"
    fi
done
manifest_digest=$(jq -r '.manifests[0].digest' "$work/oci/index.json")
manifest=$blobs/${manifest_digest#sha256:}
[ -f "$manifest" ] || fail "index.json names a manifest $manifest_digest that is not in the layout"
same "$(jq -S . "$work/oci/index.json")" "$(jq -nS --arg digest "$manifest_digest" --argjson size "$(stat -c %s "$manifest")" \
    --arg tag "$tag" --arg ref "$ref" --arg arch "$arch" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $digest, size: $size,
            platform: {architecture: $arch, os: "linux"},
            annotations: {"org.opencontainers.image.ref.name": $tag, "io.containerd.image.name": $ref}}]}')" "index.json"
config_digest=$(jq -r .config.digest "$manifest")
layer_digest=$(jq -r '.layers[0].digest' "$manifest")
config=$blobs/${config_digest#sha256:}
layer=$blobs/${layer_digest#sha256:}
for blob in "$config" "$layer"; do
    [ -f "$blob" ] || fail "the manifest names a blob that is not in the layout: ${blob##*/}"
done
same "$(find "$blobs" -type f -printf '%f\n' | sort)" "$(printf '%s\n' "${manifest_digest#sha256:}" "${config_digest#sha256:}" "${layer_digest#sha256:}" | sort)" \
    "the layout's blobs (the manifest, the config, one layer)"
labels=$(jq -nS --arg version "$version" --arg revision "$revision" --arg created "$created" --arg description "$description" \
    --arg licence "$licence" --arg release "$release" '{
        "org.opencontainers.image.title": "kube-controller-manager",
        "org.opencontainers.image.description": $description,
        "org.opencontainers.image.version": $version,
        "org.opencontainers.image.revision": $revision,
        "org.opencontainers.image.created": $created,
        "org.opencontainers.image.licenses": $licence,
        "io.k8s.kubernetes.version": $release}')
same "$(jq -S . "$manifest")" "$(jq -nS --arg config "$config_digest" --argjson config_size "$(stat -c %s "$config")" \
    --arg layer "$layer_digest" --argjson layer_size "$(stat -c %s "$layer")" --argjson labels "$labels" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $config_size},
        layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $layer_size}],
        annotations: $labels}')" "the manifest (blob $manifest_digest)"

# gzip: magic, deflate, no flags (so no file name), mtime 0.
same "$(od -An -tx1 -N8 "$layer" | tr -s ' ')" " 1f 8b 08 00 00 00 00 00" "the layer's gzip header (no name, mtime 0)"
gunzip -c "$layer" >"$work/layer.tar"
diff_id=sha256:$(sha256sum <"$work/layer.tar" | cut -d' ' -f1)
same "$(jq -S 'del(.history)' "$config")" "$(jq -nS --arg arch "$arch" --arg created "$created" --arg user "$user" \
    --arg entrypoint "$entrypoint" --arg diff_id "$diff_id" --argjson labels "$labels" '{
        architecture: $arch, os: "linux", created: $created,
        config: {User: $user, Entrypoint: [$entrypoint], Env: ["PATH=/usr/local/bin:/usr/bin:/bin"], Labels: $labels},
        rootfs: {type: "layers", diff_ids: [$diff_id]}}')" "the config (blob $config_digest; diff_id = sha256 of the uncompressed layer)"
jq -e --arg created "$created" '.history | length == 1 and .[0].created == $created and (.[0].created_by | length > 0)' \
    "$config" >/dev/null || fail "the config's history is not one entry created $created: $(jq -c .history "$config")"

echo "-- the layer"
check_tar "$work/layer.tar" "the layer"
same "$(tar -tvf "$work/layer.tar" | awk '{ print $1, $2, $6 }')" "drwxr-xr-x 0/0 usr/
drwxr-xr-x 0/0 usr/local/
drwxr-xr-x 0/0 usr/local/bin/
-rwxr-xr-x 0/0 usr/local/bin/$name" "the layer's entries"
cmp -s <(tar -xOf "$work/layer.tar" "usr/local/bin/$name") "$binary" || fail "the layer's binary differs from $binary"

echo "-- docker-archive"
check_tar "$docker" "the docker-archive"
diff_hex=${diff_id#sha256:}
# In name order (check_tar), which the digests decide: sorted here too.
same "$(tar -tf "$docker")" "$(LC_ALL=C sort <<EOF2
${config_digest#sha256:}.json
$diff_hex/
$diff_hex/layer.tar
manifest.json
EOF2
)" "the docker-archive's entries"
mkdir "$work/docker"
tar -xf "$docker" -C "$work/docker"
same "$(jq -S . "$work/docker/manifest.json")" "$(jq -nS --arg config "${config_digest#sha256:}.json" --arg ref "$ref" \
    --arg layer "$diff_hex/layer.tar" '[{Config: $config, RepoTags: [$ref], Layers: [$layer]}]')" "the docker-archive's manifest.json"
cmp -s "$work/docker/${config_digest#sha256:}.json" "$config" || fail "the docker-archive's config differs from the OCI one"
cmp -s "$work/docker/$diff_hex/layer.tar" "$work/layer.tar" || fail "the docker-archive's layer differs from the OCI one"

echo "-- skopeo reads both archives"
cmp -s <(skopeo inspect --raw "oci-archive:$oci:$tag") "$manifest" || fail "skopeo sees another manifest in the oci-archive"
cmp -s <(skopeo inspect --config --raw "oci-archive:$oci:$tag") "$config" || fail "skopeo sees another config in the oci-archive"
same "$(skopeo inspect "oci-archive:$oci:$tag" | jq -c '[.Digest, .Architecture, .Os, .Layers]')" \
    "$(jq -nc --arg d "$manifest_digest" --arg a "$arch" --arg l "$layer_digest" '[$d, $a, "linux", [$l]]')" \
    "skopeo inspect oci-archive: digest, architecture, os, layers"
cmp -s <(skopeo inspect --config --raw "docker-archive:$docker:$ref") "$config" || fail "skopeo sees another config in the docker-archive"
same "$(skopeo inspect --raw "docker-archive:$docker:$ref" | jq -c '[.config.digest, [.layers[].digest]]')" \
    "$(jq -nc --arg c "$config_digest" --arg l "$diff_id" '[$c, [$l]]')" "skopeo inspect docker-archive: config and layer digests"
echo "skopeo: oci-archive manifest $manifest_digest, both archives config $config_digest"

echo "-- umoci unpacks the root filesystem"
skopeo copy --quiet "oci-archive:$oci:$tag" "oci:$work/layout:$tag"
same "$(jq -r '.manifests[0].digest' "$work/layout/index.json")" "$manifest_digest" "the manifest digest after skopeo copy"
rootless=()
owners=" 0:0"
if [ "$(id -u)" != 0 ]; then
    rootless=(--rootless)
    owners=" $(id -u):$(id -g)"
fi
umoci unpack "${rootless[@]}" --image "$work/layout:$tag" "$work/bundle" >/dev/null
rootfs=$work/bundle/rootfs
same "$(cd "$rootfs" && find . -mindepth 1 -printf "%M %U:%G %P\n" | sort -k 3)" "drwxr-xr-x$owners usr
drwxr-xr-x$owners usr/local
drwxr-xr-x$owners usr/local/bin
-rwxr-xr-x$owners usr/local/bin/$name" "the unpacked root filesystem"
cmp -s "$rootfs/usr/local/bin/$name" "$binary" || fail "the unpacked binary differs from $binary"
same "$(jq -c '.process | [.user.uid, .user.gid, .args, (.env | index("PATH=/usr/local/bin:/usr/bin:/bin") != null)]' \
    "$work/bundle/config.json")" "[65532,65532,[\"$entrypoint\"],true]" "the runtime config umoci made: user, args, PATH"
echo "build, archives, skopeo and umoci: $((SECONDS - started)) s"

if [ "$(id -u)" != 0 ]; then
    echo "-- *** not root: running the binary as $user in the unpacked root filesystem (chroot), podman load" \
        "and containerd's import and run are SKIPPED (chroot, podman's and containerd's stores need root; CI runs as root) ***" >&2
    exit 0
fi
for tool in podman containerd ctr; do
    command -v $tool >/dev/null 2>&1 || fail "$tool is missing: run scripts/setup.sh package"
done

echo "-- the binary runs in the unpacked root filesystem as $user, with nothing else in it"
out=$(chroot --userspec=$user "$rootfs" "$entrypoint" --version) || fail "chroot ... $entrypoint --version failed: $out"
same "$out" "Kubernetes $release" "--version in the image's root filesystem"
help=$(chroot --userspec=$user "$rootfs" "$entrypoint" --help) || fail "chroot ... $entrypoint --help failed"
grep -q -- '--leader-elect' <<<"$help" || fail "--help in the image's root filesystem does not mention --leader-elect"
echo "$out"

echo "-- podman loads both archives"
podman=(podman --root "$work/podman/root" --runroot "$work/podman/run" --tmpdir "$work/podman/tmp"
    --storage-driver vfs --events-backend none)
for archive in "$oci" "$docker"; do
    loaded=$("${podman[@]}" load -q -i "$archive" 2>&1) || fail "podman load -i ${archive##*/}: $loaded"
    same "$loaded" "Loaded image: $ref" "podman load -i ${archive##*/}"
    same "$("${podman[@]}" image inspect --format '{{.Id}} {{.Config.User}} {{.Config.Entrypoint}}' "$ref")" \
        "${config_digest#sha256:} $user [$entrypoint]" "podman's image from ${archive##*/}: id (config digest), user, entrypoint"
    [ "$archive" != "$oci" ] || same "$("${podman[@]}" image inspect --format '{{.Digest}}' "$ref")" "$manifest_digest" \
        "podman's manifest digest of the oci-archive"
    "${podman[@]}" rmi -f "$ref" >/dev/null
done

echo "-- containerd imports both archives and runs the image (ctr)"
ctd=$work/containerd
mkdir -p "$ctd"
cat >"$ctd/config.toml" <<EOF
version = 2
root = "$ctd/root"
state = "$ctd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$ctd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$ctd/opt"
EOF
containerd --config "$ctd/config.toml" >"$ctd/log" 2>&1 &
containerd_pid=$!
ctr=(ctr --address "$ctd/containerd.sock" --namespace kcm-image-check)
for _ in $(seq 100); do
    "${ctr[@]}" version >/dev/null 2>&1 && break
    kill -0 "$containerd_pid" 2>/dev/null || break
    sleep 0.1
done
"${ctr[@]}" version >/dev/null 2>&1 || fail "containerd did not start:"$'\n'"$(tail -n 20 "$ctd/log")"
# The native snapshotter (plain copies) works where overlayfs does not (in a container, say).
run=("${ctr[@]}" run --snapshotter native --fifo-dir "$ctd/fifo" --runc-root "$ctd/runc" --cgroup "")
for archive in "$oci" "$docker"; do
    imported=$("${ctr[@]}" images import --snapshotter native "$archive" 2>&1) || fail "ctr images import ${archive##*/}: $imported"
    listed=$("${ctr[@]}" images ls | awk 'NR > 1 { print $1, $3 }')
    same "${listed%% *}" "$ref" "the image ctr imported from ${archive##*/}"
    same "$("${ctr[@]}" content get "${listed#* }" | jq -r .config.digest)" "$config_digest" \
        "the config of the image ctr imported from ${archive##*/}"
    [ "$archive" != "$oci" ] || same "${listed#* }" "$manifest_digest" "ctr's manifest digest of the oci-archive"
    # kubeadm's static Pod: command `kube-controller-manager`, found through the image's PATH.
    out=$("${run[@]}" "$ref" "kcm-image-check-$$" $name --version 2>&1) || fail "ctr run ($ref from ${archive##*/}): $out"
    same "$out" "Kubernetes $release" "kube-controller-manager --version in a container of the image from ${archive##*/}"
    same "$("${ctr[@]}" containers info "kcm-image-check-$$" | jq -c '.Spec.process | [.user.uid, .user.gid, .env]')" \
        '[65532,65532,["PATH=/usr/local/bin:/usr/bin:/bin"]]' "the container's user and environment"
    "${ctr[@]}" containers rm "kcm-image-check-$$" >/dev/null
    "${ctr[@]}" images rm "$ref" >/dev/null
done
echo "$out"
echo "image check passed ($((SECONDS - started)) s)"
