//! Reviews in, responses out: what kube-apiserver would receive.
