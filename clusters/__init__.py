"""Local multi-cluster test bed: real control planes, kwok nodes and Kueue as processes."""
