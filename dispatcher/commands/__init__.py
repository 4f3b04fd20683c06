"""The commands operators run (trainjob-fleet, trainjob-worker-secret, trainjob-kueue-config):
once, with their own kubeconfig, never inside the dispatcher's process."""
