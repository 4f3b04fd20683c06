"""The read API the manager serves through the aggregation layer: a TrainJob's story (its
Workload, copies, pods, Events and log tails in one answer) and the list of workers."""
