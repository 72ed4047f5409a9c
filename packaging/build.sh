#!/usr/bin/env bash
# Builds the .deb or .rpm of kube-controller-manager from a static binary:
#   packaging/build.sh deb|rpm <binary> [out-dir]      (out-dir: target/packages)
# Needs dpkg-deb (deb) or rpmbuild (rpm, Debian's `rpm` package); prints the package's path.
set -euo pipefail

usage() { echo "usage: $0 deb|rpm <static kube-controller-manager binary> [out-dir]" >&2; exit 2; }
[ $# -ge 2 ] || usage
kind=$1
binary=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${3:-$root/target/packages}
name=kube-controller-manager
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
release=1

[ -x "$binary" ] || { echo "$binary: not an executable file" >&2; exit 1; }
# The packages promise a binary that needs nothing from the host: no interpreter, no libraries.
if readelf -lW "$binary" | grep -q 'program interpreter' || readelf -dW "$binary" | grep -q '(NEEDED)'; then
    echo "$binary is dynamically linked; build it with scripts/build-static.sh" >&2
    exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_deb() {
    local arch stage=$work/deb
    arch=$(dpkg --print-architecture)
    install -D -m 0755 "$binary" "$stage/usr/bin/$name"
    install -D -m 0644 "$root/systemd/$name.service" "$stage/lib/systemd/system/$name.service"
    install -D -m 0644 "$here/$name.env" "$stage/etc/default/$name"
    install -D -m 0644 "$here/deb/copyright" "$stage/usr/share/doc/$name/copyright"
    install -d -m 0750 "$stage/var/lib/$name"
    install -d -m 0755 "$stage/DEBIAN"
    local size
    size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
    sed -e "s/@VERSION@/$version-$release/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
        "$here/deb/control.in" >"$stage/DEBIAN/control"
    install -m 0644 "$here/deb/conffiles" "$stage/DEBIAN/conffiles"
    for script in postinst prerm postrm; do
        install -m 0755 "$here/deb/$script" "$stage/DEBIAN/$script"
    done
    local package=$out/${name}_${version}-${release}_${arch}.deb
    dpkg-deb --root-owner-group --build "$stage" "$package" >/dev/null
    echo "$package"
}

build_rpm() {
    local arch top=$work/rpm
    arch=$(uname -m)
    mkdir -p "$top/SOURCES" "$top/BUILD" "$top/RPMS" "$top/SPECS"
    cp "$binary" "$top/SOURCES/$name"
    cp "$root/systemd/$name.service" "$here/$name.env" "$top/SOURCES/"
    rpmbuild -bb --quiet --target "$arch" \
        --define "_topdir $top" --define "pkg_version $version" --define "pkg_release $release" \
        "$here/rpm/$name.spec" >"$work/rpmbuild.log" 2>&1 || { cat "$work/rpmbuild.log" >&2; exit 1; }
    local package=$out/$name-$version-$release.$arch.rpm
    cp "$top/RPMS/$arch/$name-$version-$release.$arch.rpm" "$package"
    echo "$package"
}

case $kind in
    deb) build_deb ;;
    rpm) build_rpm ;;
    *) usage ;;
esac
