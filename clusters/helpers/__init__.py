"""What the tests, the benchmarks and the demo use to drive the bed as users would: TrainJob
and runtime manifests (builders), the examples' files, reads through the kubernetes client,
bounded waits, a tenant's own account, and a browser for the web view."""
