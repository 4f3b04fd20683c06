// The pause program of the bed's real nodes (no registry to pull registry.k8s.io/pause from).
module trainjob.local/bed/pause

go 1.26.0
