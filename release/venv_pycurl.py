"""The development venv's pycurl, compiled as the image's is: against libcurl from Debian 12's
bookworm-backports (8.1 or later), with the system's OpenSSL, from the source and the build
tools the image's locks name by hash. `./run` runs this when it makes the venv, so that the
controllers the tests and benchmarks start hold what a replica of the image holds.

    python -m release.venv_pycurl    # into the venv running it

The host's own libcurl is left alone: backports' `libcurl4` and `libcurl4-openssl-dev` are
fetched by apt (signatures checked against the host's Debian keys) with a package list of their
own, unpacked into the venv (`<venv>/libcurl/`), and pycurl is linked to that copy by its
runtime path. DEBIAN_MIRROR names the mirror (default deb.debian.org). Off Debian 12 (another
system, or no apt-get or dpkg) pycurl's wheel stays, which bundles a libcurl of its own, and
that is said.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from release import lock

SUITE = "bookworm-backports"
PACKAGES = ("libcurl4", "libcurl4-openssl-dev")
# Earlier libcurls never free what a paused HTTP/2 stream buffered when that stream ends while
# its connection serves others (curl 8.1 fixed it); the controllers pause streams.
MIN_LIBCURL = (8, 1, 0)
OS_RELEASE = Path("/etc/os-release")
# Backports' index is taken only when Debian's archive key signed it, whatever other keys the
# host's apt trusts.
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
MIRROR = re.compile(r"https?://[^][\s]+")  # a plain URL: no apt options, no second line


def say(message: str) -> None:
    print(f"[setup] pycurl: {message}", file=sys.stderr)


def source_line(mirror: str) -> str:
    """The backports line of the package list: signed by Debian's archive key alone, a
    snapshot.debian.org date's index taken after its week of validity."""
    if not MIRROR.fullmatch(mirror):
        raise SystemExit(f"DEBIAN_MIRROR is not an http(s) URL: {mirror!r}")
    options = f"signed-by={KEYRING}"
    if re.match(r"https?://snapshot\.debian\.org/", mirror):
        options += " check-valid-until=no"
    return f"deb [{options}] {mirror} {SUITE} main\n"


def apt(state: Path, mirror: str, *args: str) -> None:
    """apt-get with a package list of its own under `state` (the host's lists untouched)."""
    sources = state / "sources.list"
    sources.write_text(source_line(mirror))
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    options = {
        "Dir::Etc::SourceList": str(sources),
        "Dir::Etc::SourceParts": str(state / "none"),
        "Dir::State::Lists": str(state / "lists"),
        "Dir::Cache": str(state / "cache"),
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else "",  # _apt may not read `state`
    }
    flags = [f"-o{key}={value}" for key, value in options.items() if value]
    subprocess.run(["apt-get", "-qq", *flags, *args], check=True, cwd=state)


def unpack(state: Path, root: Path) -> Path:
    """backports' libcurl unpacked under `root`; its curl-config, pointing there."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for deb in sorted(state.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    (config,) = root.glob("usr/bin/curl-config")
    text = re.sub(r"^prefix=.*$", f"prefix={root / 'usr'}", config.read_text(), count=1, flags=re.M)
    config.write_text(text)
    return config


def libdir(root: Path) -> Path:
    (found,) = {p.parent for p in root.glob("usr/lib/*/libcurl.so.4")}
    return found


def build(root: Path, config: Path, work: Path) -> Path:
    """pycurl's wheel, from the source of the image's lock, by the tools of its build lock."""
    tools = work / "tools"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
    # No wheel from pip's cache: one built before against another libcurl would be taken.
    pip = [str(tools / "bin" / "python"), "-m", "pip", "--quiet", "--disable-pip-version-check",
           "--no-cache-dir"]  # fmt: skip
    subprocess.run(
        [*pip, "install", "--no-deps", "--only-binary=:all:", "--require-hashes",
         "-r", str(lock.BUILD_LOCK)],
        check=True,
    )  # fmt: skip
    entry = lock.read_lock(lock.LOCK.read_text()).get("pycurl")  # its source's hash alone
    if entry is None:
        raise SystemExit(f"no pycurl in {lock.LOCK}")
    requirement = work / "pycurl.txt"
    requirement.write_text(f"{entry[0]} --hash=sha256:{entry[1]}\n")
    lib = libdir(root)
    env = dict(
        os.environ,
        PYCURL_CURL_CONFIG=str(config),
        PYCURL_SSL_LIBRARY="openssl",
        CFLAGS=f"-g0 -I{root / 'usr' / 'include'} -I{root / 'usr' / 'include' / lib.name}",
        LDFLAGS=f"-L{lib} -Wl,-rpath,{lib}",
    )
    wheels = work / "wheels"
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-binary=pycurl", "--no-build-isolation",
         "--require-hashes", "--wheel-dir", str(wheels), "-r", str(requirement)],
        check=True,
        env=env,
    )  # fmt: skip
    (wheel,) = wheels.glob("pycurl-*.whl")
    return wheel


def linked_libcurl(venv_python: Path) -> tuple[tuple[int, ...], str]:
    """The libcurl the venv's pycurl runs on: its version, and the file it was loaded from."""
    probe = (
        "import pycurl\n"
        "print(pycurl.version_info()[1])\n"
        "print(next((l.split()[-1] for l in open('/proc/self/maps') if 'libcurl' in l), ''))\n"
    )
    out = subprocess.run(
        [str(venv_python), "-c", probe], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    return tuple(int(p) for p in out[0].split("-")[0].split(".")), out[1]


def main() -> int:
    venv = Path(sys.prefix)
    venv_python = venv / "bin" / "python"
    release = OS_RELEASE.read_text() if OS_RELEASE.exists() else ""
    if not re.search(r"^VERSION_CODENAME=bookworm$", release, re.M):
        say("not Debian 12 here: pycurl's wheel stays (its own libcurl and OpenSSL)")
        return 0
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        say("no apt-get here: pycurl's wheel stays (its own libcurl and OpenSSL)")
        return 0
    mirror = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
    source_line(mirror)  # refused before anything runs
    if not KEYRING.exists():
        raise SystemExit(f"{KEYRING} is missing (Debian's debian-archive-keyring package)")
    root = venv / "libcurl" / "root"
    with tempfile.TemporaryDirectory(prefix="venv-pycurl-") as tmp:
        work = Path(tmp)
        say(f"libcurl from {SUITE} ({mirror}), unpacked into {root}")
        apt(work, mirror, "update")
        apt(work, mirror, "download", *(f"{name}/{SUITE}" for name in PACKAGES))
        config = unpack(work, root)
        say("compiled against it (the image's locked source and build tools)")
        wheel = build(root, config, work)
        subprocess.run(
            [str(venv_python), "-m", "pip", "install", "--quiet", "--no-deps",
             "--force-reinstall", str(wheel)],
            check=True,
        )  # fmt: skip
    version, path = linked_libcurl(venv_python)
    if version < MIN_LIBCURL or not path.startswith(str(root)):
        raise SystemExit(f"pycurl runs on libcurl {version} from {path}, not {SUITE}'s in {root}")
    say(f"on libcurl {'.'.join(map(str, version))} ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
