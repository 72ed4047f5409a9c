#!/usr/bin/env python3
"""Builds the OCI image of the static kube-controller-manager, without a container daemon.

    packaging/image/build.py BINARY OUT_DIR

Writes, and prints the paths of (the manifest digest goes to stderr):
  OUT_DIR/kube-controller-manager-rs-v<version>.oci.tar     an oci-archive (a tar of an OCI image
                                                             layout, gzip-compressed layer)
  OUT_DIR/kube-controller-manager-rs-v<version>.docker.tar  a docker-archive, as `docker save`
                                                             writes it (uncompressed layer)
both named localhost/kube-controller-manager-rs:v<version>.

The image has one layer: BINARY at /usr/local/bin/kube-controller-manager (where upstream's
registry.k8s.io/kube-controller-manager has it) and its three parent directories; no shell, no CA
certificates, no /tmp (the binary writes no temporary files: it keeps a generated serving
certificate in memory unless --cert-dir names a folder, which a Pod mounts). It runs as
65532:65532. The architecture is the one BINARY is built for (its ELF header).

Reproducible: the same BINARY and the same commit give byte-identical archives. Every tar entry
has mtime SOURCE_DATE_EPOCH, uid/gid 0 and no user/group names, in sorted order, in USTAR format;
gzip has mtime 0 and no file name; JSON has sorted keys and no spaces. (The compressed layer's
bytes, so the manifest digest, also depend on zlib's version; the config and diff_id do not.)

Inputs besides BINARY: the version and licence from Cargo.toml's [workspace.package], the Kubernetes
release from crates/base/src/apimachinery/version.rs, and the commit: SOURCE_DATE_EPOCH and
KCM_IMAGE_REVISION from the environment when set, else `git log -1 --format=%ct` / `%H` of this
checkout. From a source tarball without git, set both.

Python 3.11+ standard library only (tomllib, tarfile, gzip, hashlib, json).
"""

import datetime
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "kube-controller-manager"
REPOSITORY = "localhost/kube-controller-manager-rs"
BINARY_PATH = "usr/local/bin/" + NAME
USER = "65532:65532"
ENV_PATH = "PATH=/usr/local/bin:/usr/bin:/bin"

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"

# ELF e_machine (little-endian binaries) -> GOARCH, as OCI's platform.architecture spells it.
ARCHITECTURES = {62: "amd64", 183: "arm64", 243: "riscv64", 21: "ppc64le", 22: "s390x"}


def die(message):
    print(f"image build: {message}", file=sys.stderr)
    sys.exit(1)


def canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor(media_type, data, **extra):
    return {"mediaType": media_type, "digest": sha256(data), "size": len(data), **extra}


def read_versions():
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        cargo = tomllib.load(f)
    try:
        version = cargo["workspace"]["package"]["version"]
    except KeyError:
        die("no [workspace.package] version in Cargo.toml")
    description = cargo.get("package", {}).get("description", "")
    licence = cargo["workspace"]["package"].get("license")
    if not licence:
        die("no [workspace.package] license in Cargo.toml")
    # The line scripts/package-check.sh reads, read the same way.
    version_rs = os.path.join(ROOT, "crates/base/src/apimachinery/version.rs")
    with open(version_rs, encoding="utf-8") as f:
        found = re.search(
            r"^pub const KUBERNETES_RELEASE: Release = Release \{ major: ([0-9]+), minor: ([0-9]+), patch: ([0-9]+) \};$",
            f.read(),
            re.MULTILINE,
        )
    if not found:
        die(f"cannot read KUBERNETES_RELEASE from {version_rs}")
    return version, "v{}.{}.{}".format(*found.groups()), description, licence


def git(*args):
    """`git log -1 --format=...` of this checkout; None when ROOT is not a git work tree's top."""
    try:
        top = subprocess.run(["git", "-C", ROOT, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) != os.path.realpath(ROOT):
            return None
        return subprocess.run(["git", "-C", ROOT, "log", "-1", *args],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def read_commit():
    epoch = os.environ.get("SOURCE_DATE_EPOCH") or git("--format=%ct")
    revision = os.environ.get("KCM_IMAGE_REVISION") or git("--format=%H")
    if not epoch or not revision:
        die("no git checkout here: set SOURCE_DATE_EPOCH (the commit's time, seconds since 1970) "
            "and KCM_IMAGE_REVISION (the commit's sha)")
    if not re.fullmatch(r"[0-9]+", epoch):
        die(f"SOURCE_DATE_EPOCH is not a number of seconds: {epoch!r}")
    if not re.fullmatch(r"[0-9a-f]{7,64}", revision):
        die(f"KCM_IMAGE_REVISION is not a commit sha: {revision!r}")
    return int(epoch), revision


def architecture(binary):
    with open(binary, "rb") as f:
        header = f.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        die(f"{binary} is not an ELF executable")
    if header[5] != 1:
        die(f"{binary} is a big-endian ELF: no image architecture for it here")
    machine = int.from_bytes(header[18:20], "little")
    if machine not in ARCHITECTURES:
        die(f"{binary} is built for ELF machine {machine}: no image architecture for it here")
    return ARCHITECTURES[machine]


def tar_bytes(entries, mtime):
    """A USTAR archive of entries [(name, mode, data or None for a directory)], sorted by name."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, mode, data in sorted(entries, key=lambda entry: entry[0]):
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def gzip_bytes(data):
    out = io.BytesIO()
    # No file name in the header (filename=""), mtime 0; level 6, gzip's default: level 9
    # takes three times as long for under 1% less.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(data)
    return out.getvalue()


def write(path, data):
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, path)


def main():
    if len(sys.argv) != 3:
        print("usage: packaging/image/build.py BINARY OUT_DIR", file=sys.stderr)
        sys.exit(2)
    binary, out_dir = sys.argv[1], sys.argv[2]
    version, kubernetes, description, licence = read_versions()
    epoch, revision = read_commit()
    arch = architecture(binary)
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    tag = "v" + version
    image_name = f"{REPOSITORY}:{tag}"
    with open(binary, "rb") as f:
        binary_data = f.read()

    layer = tar_bytes([("usr", 0o755, None), ("usr/local", 0o755, None), ("usr/local/bin", 0o755, None),
                       (BINARY_PATH, 0o755, binary_data)], epoch)
    layer_gz = gzip_bytes(layer)
    labels = {
        "org.opencontainers.image.title": NAME,
        "org.opencontainers.image.description": description,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.licenses": licence,
        "io.k8s.kubernetes.version": kubernetes,
    }
    config = canonical_json({
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {
            "User": USER,
            "Entrypoint": ["/" + BINARY_PATH],
            "Env": [ENV_PATH],
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
        "history": [{
            "created": created,
            "created_by": f"packaging/image/build.py: the static {NAME} at /{BINARY_PATH}",
            "comment": f"{NAME} {version} (Kubernetes {kubernetes}), commit {revision}",
        }],
    })
    manifest = canonical_json({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": descriptor(CONFIG_TYPE, config),
        "layers": [descriptor(LAYER_TYPE, layer_gz)],
        "annotations": labels,
    })
    index = canonical_json({
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "manifests": [descriptor(MANIFEST_TYPE, manifest,
                                 platform={"architecture": arch, "os": "linux"},
                                 annotations={"org.opencontainers.image.ref.name": tag,
                                              "io.containerd.image.name": image_name})],
    })

    def blob(data):
        return ("blobs/sha256/" + hashlib.sha256(data).hexdigest(), 0o644, data)

    oci = tar_bytes([("blobs", 0o755, None), ("blobs/sha256", 0o755, None),
                     blob(config), blob(layer_gz), blob(manifest),
                     ("index.json", 0o644, index),
                     ("oci-layout", 0o644, canonical_json({"imageLayoutVersion": "1.0.0"}))], epoch)
    config_hex, layer_hex = hashlib.sha256(config).hexdigest(), hashlib.sha256(layer).hexdigest()
    # `docker save`'s layout before Docker 25: the config as <id>.json, each layer as
    # <diff_id>/layer.tar. No legacy `repositories` or <layer>/json: every loader that reads
    # manifest.json (docker load >= 1.10, containers/image, containerd) ignores them.
    docker = tar_bytes([(config_hex + ".json", 0o644, config),
                        (layer_hex, 0o755, None),
                        (layer_hex + "/layer.tar", 0o644, layer),
                        ("manifest.json", 0o644, canonical_json([{
                            "Config": config_hex + ".json",
                            "RepoTags": [image_name],
                            "Layers": [layer_hex + "/layer.tar"],
                        }]))], epoch)

    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"kube-controller-manager-rs-{tag}")
    write(base + ".oci.tar", oci)
    write(base + ".docker.tar", docker)
    print(base + ".oci.tar")
    print(base + ".docker.tar")
    print(f"{image_name} ({arch}): manifest {sha256(manifest)}, config {sha256(config)}", file=sys.stderr)


if __name__ == "__main__":
    main()
