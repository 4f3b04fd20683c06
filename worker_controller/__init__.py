"""Worker side: the TrainJob controller (PodSets -> Indexed Jobs, headless Service)."""
