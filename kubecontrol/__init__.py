"""A small controller runtime for Kubernetes: the API client (libcurl), informers and their
caches, a work queue, write memory, leader election on a Lease, an admission webhook server
with its own certificates, probes and metrics, and the main loop that ties them together
(`controller.run`, fed one table of `Watch`es).

It knows nothing of TrainJob, Kueue or the test bed (an import-linter contract keeps it so):
the controllers in `dispatcher/` and `worker_controller/`, and the domain in `trainjob/`, sit
on it.
"""
