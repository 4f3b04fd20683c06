"""Manager side: the MultiKueue admission-check controller for TrainJobs."""
