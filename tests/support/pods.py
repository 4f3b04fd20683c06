"""Pod specs the unit tests share."""

from __future__ import annotations

from kubebase.objects import Dict

# A pod spec with a field of nearly every kind a tenant's runtime can give (PodSpec and Container
# of Kubernetes 1.34), each set to something that a change of can be told apart.
RICH_CONTAINER: Dict = {
    "name": "trainer",
    "image": "pytorch:2.6",
    "command": ["torchrun"],
    "args": ["train.py"],
    "workingDir": "/w",
    "env": [{"name": "EPOCHS", "value": "3"}],
    "envFrom": [{"secretRef": {"name": "creds"}}],
    "ports": [{"containerPort": 29500}],
    "resources": {
        "requests": {"cpu": "2"},
        "limits": {"memory": "4Gi"},
        "claims": [{"name": "gpu"}],
    },
    "restartPolicy": "Always",
    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    "securityContext": {"runAsUser": 1000},
    "readinessProbe": {"exec": {"command": ["true"]}},
    "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
    "imagePullPolicy": "IfNotPresent",
    "stdin": False,
    "tty": False,
}
RICH_POD: Dict = {
    "initContainers": [{**RICH_CONTAINER, "name": "init"}],
    "containers": [RICH_CONTAINER],
    "volumes": [{"name": "data", "emptyDir": {}}],
    "resources": {"requests": {"cpu": "1"}},
    "overhead": {"cpu": "250m"},
    "runtimeClassName": "kata",
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    "nodeSelector": {"pool": "a"},
    "tolerations": [{"key": "gpu", "operator": "Exists"}],
    "affinity": {"nodeAffinity": {}},
    "schedulingGates": [{"name": "wait"}],
    "priorityClassName": "high",
    "serviceAccountName": "trainer",
    "hostname": "h",
    "subdomain": "s",
    "restartPolicy": "Never",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "securityContext": {"fsGroup": 1000},
    "imagePullSecrets": [{"name": "pull"}],
    "topologySpreadConstraints": [{"maxSkew": 1}],
    "hostNetwork": False,
    "shareProcessNamespace": False,
    "enableServiceLinks": True,
    "schedulerName": "default-scheduler",
    "os": {"name": "linux"},
    "hostIPC": False,
}
