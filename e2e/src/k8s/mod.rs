//! Kubernetes for the tests: a real control plane built from Go modules ([`controlplane`]),
//! and a pod runner that plays scheduler and kubelet for one fake Node ([`kubelet`]), running
//! each pod's container as a local process ([`podspec`]: what a pod spec becomes) with its
//! DNS names in `/etc/hosts` ([`hosts`]).

pub mod controlplane;
pub mod hosts;
pub mod kubelet;
pub mod podspec;
