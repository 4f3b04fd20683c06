"""The controller's pass and what it runs on: the watch table, one pass per work-queue key
(observe, decide with dispatcher.decisions, execute), the writes (execute and the *_io modules),
the resync loop, the AdmissionChecks, the admission webhooks and the context all of them share."""
