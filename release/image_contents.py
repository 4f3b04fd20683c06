"""Compare what two OCI image archives hold, file by file, after their layers are applied.

    python -m release.image_contents A.oci.tar B.oci.tar

Prints how many files each holds, the files only one of them has, and the files whose
contents, mode or link target differ (times and owners aside: a build sets those), grouped by
top directory. Exit status 0 when the two hold the same files with the same contents.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

Entry = tuple[str, int, str]  # kind, mode, sha256 of the contents or the link target


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    return _blob_or_file(archive, "blobs/" + digest.replace(":", "/"))


def _manifest(archive: tarfile.TarFile) -> dict[str, Any]:
    index = json.loads(_blob_or_file(archive, "index.json"))
    return json.loads(_blob(archive, index["manifests"][0]["digest"]))  # type: ignore[no-any-return]


def config(path: Path) -> dict[str, Any]:
    """The image's configuration (user, command, labels, history)."""
    with tarfile.open(path) as archive:
        return json.loads(_blob(archive, _manifest(archive)["config"]["digest"]))  # type: ignore[no-any-return]


def read(path: Path, name: str) -> bytes:
    """One regular file of the image, from the last layer that holds it."""
    return read_all(path, [name])[name]


def read_all(path: Path, names: list[str]) -> dict[str, bytes]:
    """Regular files of the image, each from the last layer that holds it, in one pass over
    the layers; KeyError names the first one missing."""
    wanted = set(names)
    found: dict[str, bytes] = {}
    with tarfile.open(path) as archive:
        for layer in _manifest(archive)["layers"]:
            with tarfile.open(
                fileobj=io.BytesIO(_blob(archive, layer["digest"])), mode="r:*"
            ) as tar:
                for member in tar:
                    name = str(PurePosixPath("/", member.name))
                    if member.isfile() and name in wanted:
                        handle = tar.extractfile(member)
                        found[name] = handle.read() if handle else b""
    for name in names:
        if name not in found:
            raise KeyError(name)
    return found


def flatten(path: Path) -> dict[str, Entry]:
    """The image's files after its layers are applied in order (whiteouts honoured)."""
    files: dict[str, Entry] = {}
    with tarfile.open(path) as archive:
        for layer in _manifest(archive)["layers"]:
            data = _blob(archive, layer["digest"])
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for member in tar:
                    name = str(PurePosixPath("/", member.name))
                    base = PurePosixPath(name)
                    if base.name == ".wh..wh..opq":
                        prefix = str(base.parent) + "/"
                        files = {k: v for k, v in files.items() if not k.startswith(prefix)}
                        continue
                    if base.name.startswith(".wh."):
                        gone = str(base.parent / base.name[4:])
                        files = {
                            k: v
                            for k, v in files.items()
                            if k != gone and not k.startswith(gone + "/")
                        }
                        continue
                    files[name] = _entry(tar, member)
    return files


def _blob_or_file(archive: tarfile.TarFile, name: str) -> bytes:
    for candidate in (name, "./" + name):
        try:
            member = archive.extractfile(candidate)
        except KeyError:
            continue
        if member is not None:
            return member.read()
    raise KeyError(name)


def _entry(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Entry:
    mode = member.mode & 0o7777
    if member.isdir():
        return ("dir", mode, "")
    if member.issym() or member.islnk():
        kind = "symlink" if member.issym() else "hardlink"
        return (kind, mode, member.linkname)
    handle = tar.extractfile(member)
    body = handle.read() if handle else b""
    return ("file", mode, hashlib.sha256(body).hexdigest())


def _top(name: str) -> str:
    parts = PurePosixPath(name).parts
    return "/".join(parts[1:4]) if len(parts) > 3 else "/".join(parts[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--show", type=int, default=20, help="files listed per group")
    args = parser.parse_args(argv)
    a, b = flatten(args.first), flatten(args.second)
    # A hard link and the file it names hold the same bytes: compare them as files.
    print(f"{args.first}: {len(a)} entries; {args.second}: {len(b)} entries")
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    differ = sorted(
        k for k in set(a) & set(b) if a[k] != b[k] and "hardlink" not in (a[k][0], b[k][0])
    )
    for title, names in (
        (f"only in {args.first.name}", only_a),
        (f"only in {args.second.name}", only_b),
        ("differ", differ),
    ):
        print(f"{title}: {len(names)}")
        for top, count in Counter(_top(n) for n in names).most_common(args.show):
            print(f"  {count:5d}  {top}")
    return 0 if not (only_a or only_b or differ) else 1


if __name__ == "__main__":
    sys.exit(main())
