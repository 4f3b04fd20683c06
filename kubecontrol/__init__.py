"""The controller runtime, which knows nothing of TrainJob, Kueue or the bed: the API client,
informers and caches, the work queue and write memory, leader election, the webhook server and
its certificates, probes, metrics, and the main loop (controller.run, fed a table of Watches)."""
