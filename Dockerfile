# The product's image: both controllers and the commands trainjob-worker-secret and
# trainjob-kueue-config, on Debian 12 (bookworm) with its Python 3.11, running as user 65532.
#   docker build -t <registry>/trainjob-multicluster:<tag> --build-arg VERSION=<tag> .
#   (podman build and buildah build take the same arguments)
# BASE is any Debian 12 image; the default is Docker Hub's debian:bookworm-slim by digest.
# `./run image` builds this file offline from a base made with mmdebstrap (docs/operators/image.md).
# The Python packages are the wheels of deploy/image/requirements.lock, each checked against
# its sha256; the project is built into two wheels of its own (plugin/, the kubectl plugin and
# the modules it shares, then the product). The final stage runs nothing: the image needs no
# shell, and its command is a console script started directly.
ARG BASE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

# Debian's python3, and nothing of apt's left behind. With SOURCE_DATE_EPOCH set, Debian
# compiles its Python modules to hash-checked bytecode, which stays valid whatever time the
# image's files are given (a reproducible build sets every file's time to it).
FROM ${BASE} AS runtime
ARG SOURCE_DATE_EPOCH
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /var/cache/ldconfig/aux-cache \
           /var/lib/dpkg/*-old /var/cache/debconf/*-old

# The wheels, installed into /usr/local as pip does for root on Debian, and the user. Their
# bytecode is compiled here as Debian compiles its own: hash-checked (valid whatever the files'
# times), in one process with a fixed hash seed (the same bytes in every build), so that no
# replica compiles them again at each start (docs/operators/image.md).
# PIP_INDEX_URL, and a CA bundle given as the build secret `pip-ca` (a TLS-inspecting proxy's:
# --secret id=pip-ca,src=<bundle>), serve a build behind a mirror or a proxy.
FROM runtime AS build
ARG PIP_INDEX_URL=https://pypi.org/simple
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip python3-venv >/dev/null
COPY deploy/image/requirements.lock /src/requirements.lock
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
      --dest /tmp/wheels -r /src/requirements.lock
COPY pyproject.toml README.md LICENSE /src/
COPY dispatcher /src/dispatcher
COPY worker_controller /src/worker_controller
COPY trainjob /src/trainjob
COPY kubecontrol /src/kubecontrol
COPY plugin /src/plugin
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m pip wheel --quiet --no-deps --wheel-dir /tmp/wheels /src/plugin /src \
 && python3 -m pip install --quiet --no-index --no-deps --no-compile --break-system-packages \
      --root-user-action=ignore /tmp/wheels/*.whl \
 && python3 -m pip check \
 && for cmd in trainjob-dispatcher trainjob-worker-controller trainjob-worker-secret trainjob-kueue-config; do \
      test -x /usr/local/bin/$cmd || { echo "$cmd is missing" >&2; exit 1; }; done \
 && python3 -B -c 'import orjson, pycurl; print(pycurl.version)' \
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
