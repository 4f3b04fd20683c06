"""Shared core: TrainJob models, the runtime framework and the Kueue integration."""
