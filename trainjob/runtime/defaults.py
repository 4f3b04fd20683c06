"""The defaults Kubeflow Trainer v2.3's runtime CRDs (TrainingRuntime, ClusterTrainingRuntime)
stamp on a runtime's spec, and a comparison of two specs that treats an absent field as its
default (pure).

A worker that runs Trainer holds runtimes under Trainer's CRDs, whose schema fills these in
(`replicatedJobs[].groupName: default`, `ports[].protocol: TCP`, ...); ours stamps none. The
same runtime applied to both therefore reads back differently, and is still the same runtime:
Trainer and JobSet apply the same defaults when they read it. The table is Trainer v2.3.0's
(tests/local/test_defaults.py derives it from that release's CRD and fails when
they part)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Where each default sits in a runtime's `spec`: `a.b` a field, `a[]` every item of list `a`.
POD = "template.spec.replicatedJobs[].template.spec.template.spec."
TRAINER_V23_RUNTIME_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("mlPolicy.flux.numProcPerNode", 1),
    ("mlPolicy.mpi.mpiImplementation", "OpenMPI"),
    ("mlPolicy.mpi.numProcPerNode", 1),
    ("mlPolicy.mpi.runLauncherAsNode", False),
    ("mlPolicy.mpi.sshAuthMountPath", "/root/.ssh"),
    ("podGroupPolicy.coscheduling.scheduleTimeoutSeconds", 60),
    ("podGroupPolicy.volcano.networkTopology.highestTierAllowed", 1),
    ("podGroupPolicy.volcano.networkTopology.mode", "hard"),
    ("template.spec.failurePolicy.restartStrategy", "Recreate"),
    ("template.spec.replicatedJobs[].groupName", "default"),
    ("template.spec.replicatedJobs[].replicas", 1),
    (POD + "containers[].envFrom[].configMapRef.name", ""),
    (POD + "containers[].envFrom[].secretRef.name", ""),
    (POD + "containers[].env[].valueFrom.configMapKeyRef.name", ""),
    (POD + "containers[].env[].valueFrom.fileKeyRef.optional", False),
    (POD + "containers[].env[].valueFrom.secretKeyRef.name", ""),
    (POD + "containers[].livenessProbe.grpc.service", ""),
    (POD + "containers[].ports[].protocol", "TCP"),
    (POD + "containers[].readinessProbe.grpc.service", ""),
    (POD + "containers[].startupProbe.grpc.service", ""),
    (POD + "ephemeralContainers[].envFrom[].configMapRef.name", ""),
    (POD + "ephemeralContainers[].envFrom[].secretRef.name", ""),
    (POD + "ephemeralContainers[].env[].valueFrom.configMapKeyRef.name", ""),
    (POD + "ephemeralContainers[].env[].valueFrom.fileKeyRef.optional", False),
    (POD + "ephemeralContainers[].env[].valueFrom.secretKeyRef.name", ""),
    (POD + "ephemeralContainers[].livenessProbe.grpc.service", ""),
    (POD + "ephemeralContainers[].ports[].protocol", "TCP"),
    (POD + "ephemeralContainers[].readinessProbe.grpc.service", ""),
    (POD + "ephemeralContainers[].startupProbe.grpc.service", ""),
    (POD + "imagePullSecrets[].name", ""),
    (POD + "initContainers[].envFrom[].configMapRef.name", ""),
    (POD + "initContainers[].envFrom[].secretRef.name", ""),
    (POD + "initContainers[].env[].valueFrom.configMapKeyRef.name", ""),
    (POD + "initContainers[].env[].valueFrom.fileKeyRef.optional", False),
    (POD + "initContainers[].env[].valueFrom.secretKeyRef.name", ""),
    (POD + "initContainers[].livenessProbe.grpc.service", ""),
    (POD + "initContainers[].ports[].protocol", "TCP"),
    (POD + "initContainers[].readinessProbe.grpc.service", ""),
    (POD + "initContainers[].startupProbe.grpc.service", ""),
    (POD + "volumes[].azureDisk.fsType", "ext4"),
    (POD + "volumes[].azureDisk.readOnly", False),
    (POD + "volumes[].cephfs.secretRef.name", ""),
    (POD + "volumes[].cinder.secretRef.name", ""),
    (POD + "volumes[].configMap.name", ""),
    (POD + "volumes[].csi.nodePublishSecretRef.name", ""),
    (POD + "volumes[].flexVolume.secretRef.name", ""),
    (POD + "volumes[].iscsi.iscsiInterface", "default"),
    (POD + "volumes[].iscsi.secretRef.name", ""),
    (POD + "volumes[].projected.sources[].configMap.name", ""),
    (POD + "volumes[].projected.sources[].secret.name", ""),
    (POD + "volumes[].rbd.keyring", "/etc/ceph/keyring"),
    (POD + "volumes[].rbd.pool", "rbd"),
    (POD + "volumes[].rbd.secretRef.name", ""),
    (POD + "volumes[].rbd.user", "admin"),
    (POD + "volumes[].scaleIO.fsType", "xfs"),
    (POD + "volumes[].scaleIO.secretRef.name", ""),
    (POD + "volumes[].scaleIO.storageMode", "ThinProvisioned"),
    (POD + "volumes[].storageos.secretRef.name", ""),
    ("template.spec.volumeClaimPolicies[].retentionPolicy.whenDeleted", "Delete"),
)

_DEFAULT = "\0default"  # a trie node's default value, under a key no field can have
_MISSING = object()


def _trie(paths: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path, value in paths:
        node = root
        for part in path.split("."):
            node = node.setdefault(part, {})
        node[_DEFAULT] = value
    return root


_RUNTIME_TRIE = _trie(TRAINER_V23_RUNTIME_DEFAULTS)


def _same(a: Any, b: Any, node: Mapping[str, Any]) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            child = node.get(key) or node.get(f"{key}[]") or {}
            left, right = a.get(key, _MISSING), b.get(key, _MISSING)
            if left is _MISSING:
                left = child.get(_DEFAULT, _MISSING)
            if right is _MISSING:
                right = child.get(_DEFAULT, _MISSING)
            if left is _MISSING or right is _MISSING or not _same(left, right, child):
                return False
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, node) for x, y in zip(a, b, strict=True))
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def same_runtime_spec(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two runtime specs are the same once Trainer v2.3's defaults are filled in where
    a field is absent (an object or list that is itself absent stays absent, as the API
    server's defaulting leaves it)."""
    return _same(dict(a), dict(b), _RUNTIME_TRIE)
