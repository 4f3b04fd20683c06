"""The TrainJob API as its clients read it: the names of its kinds, labels, conditions and
reasons (constants), typed views over its objects and theirs (Workloads, Jobs, pods, Events),
conditions set only when they change, quantities, and the types of the story the manager serves.
Both controllers and the kubectl plugin read it; it ships in the plugin's distribution."""
