"""`kubectl trainjob`: one view of TrainJobs across a MultiKueue manager and its workers."""
