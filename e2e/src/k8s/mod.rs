//! Kubernetes for the tests: a real control plane built from Go modules ([`controlplane`]).
//! The pod runner that plays scheduler and kubelet for broker pods comes next (issue 8).

pub mod controlplane;
