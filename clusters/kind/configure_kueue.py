"""Rewrite Kueue's manager ConfigMap (JSON on stdin) the way the local bed configures Kueue."""

import json
import sys

import yaml

cm = json.load(sys.stdin)
cfg = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
integrations = cfg.setdefault("integrations", {})
integrations["frameworks"] = [
    f for f in integrations.get("frameworks", []) if f != "trainer.kubeflow.org/trainjob"
]
integrations["externalFrameworks"] = ["TrainJob.v1alpha1.trainer.kubeflow.org"]
cfg["featureGates"] = dict(g.split("=") for g in sys.argv[1].split(","))
cfg["featureGates"] = {k: v == "true" for k, v in cfg["featureGates"].items()}
# waitForPodsReady stays on (Kueue's default) with the bed's short times (BedConfig's
# wait_for_pods_ready defaults), so the same tests run jobs longer than its timeout.
cfg["waitForPodsReady"] = {"timeout": "20s", "requeuingStrategy": {"backoffBaseSeconds": 5}}
cm["data"]["controller_manager_config.yaml"] = yaml.safe_dump(cfg)
for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
    cm["metadata"].pop(key, None)
json.dump(cm, sys.stdout)
