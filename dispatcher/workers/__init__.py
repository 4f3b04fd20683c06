"""The worker connections: one per MultiKueueCluster (its kubeconfig vetted, or a
ClusterProfile's), the watches and caches of each worker, the ledger of copies sent, and the
reads of a copy's pods and their log tails."""
