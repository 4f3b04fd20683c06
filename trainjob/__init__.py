"""The domain both controllers share: TrainJobs and their runtimes (runtime -> PodSets), Kueue's
job integration for them (Workloads, start on admission, stop on eviction, PodsReady), the
admission rules, the typed cache reads, names and status writes."""
