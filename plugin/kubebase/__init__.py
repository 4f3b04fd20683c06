"""What the controller runtime and the kubectl plugin share of Kubernetes itself: an API object's
one name (objects), the coordinates of kinds (kinds), Events, the vetting of kubeconfigs others
hand over, and capacity shared per caller (shares). Nothing of TrainJob."""
