#!/usr/bin/env python3
"""Packs a root filesystem directory into an OCI image archive that `ctr images import` reads.

No registry and no container engine: one uncompressed layer (the whole tree, owners and modes as
they are on disk), an image config, a manifest, and index.json naming the image. The archive is
reproducible: entries sorted, times clamped to --epoch.

  oci_image.py --rootfs DIR --name REF --out FILE.tar [--entrypoint JSON] [--cmd JSON]
               [--env K=V]... [--user U] [--workdir DIR] [--epoch SECONDS]
"""
import argparse
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
import tempfile


def layer_tar(rootfs, out, epoch):
    """Writes the tree under rootfs to out (a binary file) as a tar layer; returns nothing."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(top, name)
                rel = os.path.relpath(path, rootfs)
                st = os.lstat(path)
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISFIFO(st.st_mode) \
                        or stat.S_ISSOCK(st.st_mode):
                    continue  # the runtime makes /dev; sockets and fifos are not image content
                info = tar.gettarinfo(path, arcname=rel)
                info.mtime = min(int(st.st_mtime), epoch)
                info.uname = info.gname = ""
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)


def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.size = len(data)
    info.mode = 0o444
    tar.addfile(info, io.BytesIO(data))
    return "sha256:" + digest


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rootfs", required=True)
    p.add_argument("--name", required=True, help="image reference, e.g. example.com/img:v1")
    p.add_argument("--out", required=True)
    p.add_argument("--entrypoint", type=json.loads, default=None)
    p.add_argument("--cmd", type=json.loads, default=None)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--user", default="")
    p.add_argument("--workdir", default="")
    p.add_argument("--epoch", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or 1)
    a = p.parse_args()
    if not os.path.isdir(a.rootfs):
        sys.exit(f"oci_image.py: {a.rootfs} is not a directory")

    with tempfile.TemporaryFile() as layer:
        layer_tar(a.rootfs, layer, a.epoch)
        layer.seek(0)
        h = hashlib.sha256()
        size = 0
        for chunk in iter(lambda: layer.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
        layer_digest = "sha256:" + h.hexdigest()

        env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + a.env
        config = {"architecture": "amd64", "os": "linux",
                  "config": {"Env": env},
                  "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
                  "history": [{"created_by": "tests/cluster/oci_image.py"}]}
        if a.entrypoint is not None:
            config["config"]["Entrypoint"] = a.entrypoint
        if a.cmd is not None:
            config["config"]["Cmd"] = a.cmd
        if a.user:
            config["config"]["User"] = a.user
        if a.workdir:
            config["config"]["WorkingDir"] = a.workdir
        config_bytes = json.dumps(config, sort_keys=True).encode()

        tmp = a.out + ".partial"
        with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
            layer.seek(0)
            info = tarfile.TarInfo("blobs/sha256/" + layer_digest.split(":")[1])
            info.size = size
            info.mode = 0o444
            tar.addfile(info, layer)
            config_digest = blob(tar, config_bytes)
            manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                   "digest": config_digest, "size": len(config_bytes)},
                        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                    "digest": layer_digest, "size": size}]}
            manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
            manifest_digest = blob(tar, manifest_bytes)
            index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                     "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                    "digest": manifest_digest, "size": len(manifest_bytes),
                                    "platform": {"architecture": "amd64", "os": "linux"},
                                    "annotations": {"io.containerd.image.name": a.name,
                                                    "org.opencontainers.image.ref.name": a.name}}]}
            for name, data in (("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
                               ("index.json", json.dumps(index, sort_keys=True).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o444
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, a.out)
    print(a.out)


if __name__ == "__main__":
    main()
