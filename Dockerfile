# The product's image: both controllers and the commands trainjob-worker-secret and
# trainjob-kueue-config, on Debian 12 (bookworm) with its Python 3.11, running as user 65532.
#   docker build -t <registry>/trainjob-multicluster:<tag> --build-arg VERSION=<tag> .
#   (podman build and buildah build take the same arguments)
# BASE is any Debian 12 image; the default is Docker Hub's debian:bookworm-slim by digest.
# `./run image` builds this file offline from a base made with mmdebstrap (docs/operators/image.md).
# The Python packages are the wheels of deploy/image/requirements.lock, each checked against
# its sha256, and pycurl compiled from its source (also checked) against Debian's libcurl from
# bookworm-backports, so that each process holds one OpenSSL fewer (the system's serves Python,
# libcurl and pycurl). DEBIAN_MIRROR names the Debian mirror backports come from (a
# snapshot.debian.org date too: backports' index is otherwise refused a week after that date);
# its index is taken only when Debian's own archive key signed it (signed-by), whatever other
# keys the base image trusts, and a mirror that is no plain http(s) URL is refused.
# the project is built into two wheels of its own (plugin/, the kubectl plugin and the modules
# it shares, then the product). The final stage runs nothing: the image needs no
# shell, and its command is a console script started directly.
ARG BASE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

# Debian's python3, libcurl from bookworm-backports, and nothing of apt's left behind. Debian
# 12's own libcurl (7.88.1) never frees what a paused HTTP/2 stream buffered (up to 32 MiB) when
# that stream ends while its connection serves others (curl 8.1 fixed it); the controllers pause
# streams whose reader falls behind. Only libcurl4 is taken from backports, its dependencies
# from Debian 12 itself, and backports' updates of it reach a later build as Debian 12's do.
# With SOURCE_DATE_EPOCH set, Debian compiles its Python modules to hash-checked bytecode,
# which stays valid whatever time the image's files are given (a reproducible build sets every
# file's time to it).
FROM ${BASE} AS runtime
ARG SOURCE_DATE_EPOCH
ARG DEBIAN_MIRROR=http://deb.debian.org/debian
RUN printf '%s' "${DEBIAN_MIRROR}" | grep -zEqx 'https?://[^][[:space:]]+' \
 || { echo "DEBIAN_MIRROR is not an http(s) URL: ${DEBIAN_MIRROR}" >&2; exit 1; } \
 && case "${DEBIAN_MIRROR}" in http://snapshot.debian.org/*|https://snapshot.debian.org/*) valid=" check-valid-until=no" ;; *) valid="" ;; esac \
 && echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg${valid}] ${DEBIAN_MIRROR} bookworm-backports main" \
      > /etc/apt/sources.list.d/bookworm-backports.list \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 ca-certificates libcurl4/bookworm-backports >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /var/cache/ldconfig/aux-cache \
           /var/lib/dpkg/*-old /var/cache/debconf/*-old

# The wheels, installed into /usr/local as pip does for root on Debian, and the user. Their
# bytecode is compiled here as Debian compiles its own: hash-checked (valid whatever the files'
# times), in one process with a fixed hash seed (the same bytes in every build), so that no
# replica compiles them again at each start (docs/operators/image.md).
# pycurl and the project's wheels are built by the tools of deploy/image/build-requirements.lock
# (hash-checked, in a venv of the build stage alone, made before anything reads a source: pip
# never builds with tools it fetched unpinned, --no-build-isolation); pycurl without debug
# information (it would name the build's temporary directory), so that the same inputs give
# the same bytes, and a libcurl older than 8.1 is refused.
# PIP_INDEX_URL, and a CA bundle given as the build secret `pip-ca` (a TLS-inspecting proxy's:
# --secret id=pip-ca,src=<bundle>), serve a build behind a mirror or a proxy.
FROM runtime AS build
ARG PIP_INDEX_URL=https://pypi.org/simple
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip python3-venv \
      gcc libc6-dev python3-dev libssl-dev libcurl4-openssl-dev/bookworm-backports >/dev/null
COPY deploy/image/requirements.lock deploy/image/build-requirements.lock /src/
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /tmp/build-tools \
 && /tmp/build-tools/bin/pip install --quiet --no-deps --only-binary=:all: --require-hashes \
      -r /src/build-requirements.lock \
 && /tmp/build-tools/bin/pip download --quiet --no-deps --only-binary=:all: --no-binary=pycurl \
      --no-build-isolation --require-hashes --dest /tmp/wheels -r /src/requirements.lock \
 && CFLAGS=-g0 /tmp/build-tools/bin/pip wheel --quiet --no-deps --no-build-isolation \
      --wheel-dir /tmp/wheels /tmp/wheels/pycurl-*.tar.gz \
 && rm /tmp/wheels/pycurl-*.tar.gz
COPY pyproject.toml README.md LICENSE /src/
COPY dispatcher /src/dispatcher
COPY worker_controller /src/worker_controller
COPY trainjob /src/trainjob
COPY kubecontrol /src/kubecontrol
COPY plugin /src/plugin
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && /tmp/build-tools/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /tmp/wheels \
      /src/plugin /src \
 && python3 -m pip install --quiet --no-index --no-deps --no-compile --break-system-packages \
      --root-user-action=ignore /tmp/wheels/*.whl \
 && python3 -m pip check \
 && for cmd in trainjob-dispatcher trainjob-worker-controller trainjob-worker-secret trainjob-kueue-config; do \
      test -x /usr/local/bin/$cmd || { echo "$cmd is missing" >&2; exit 1; }; done \
 && python3 -B -c 'import sys, orjson, pycurl; print(pycurl.version); sys.exit(pycurl.version_info()[2] < 0x080100)' \
 && ! ls -d /usr/local/lib/python3*/dist-packages/pycurl.libs 2>/dev/null \
 && find /usr/local -name __pycache__ -type d -prune -exec rm -rf {} + \
 && PYTHONHASHSEED=0 python3 -m compileall -q --invalidation-mode checked-hash /usr/local/lib \
 && echo "trainjob:x:65532:65532:trainjob:/nonexistent:/usr/sbin/nologin" >> /etc/passwd \
 && echo "trainjob:x:65532:" >> /etc/group

FROM runtime
ARG VERSION=dev
COPY --from=build /usr/local /usr/local
COPY --from=build /etc/passwd /etc/group /etc/
ENV PATH=/usr/local/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
LABEL org.opencontainers.image.title=trainjob-multicluster \
      org.opencontainers.image.source=https://github.com/trainjob-dev/trainjob-multicluster \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${VERSION}
CMD ["trainjob-dispatcher", "--help"]
