//! Kubernetes for the tests: a real control plane built from Go modules ([`controlplane`]),
//! and a pod runner that plays scheduler and kubelet for one fake Node ([`kubelet`]), running
//! each pod's container as a local process ([`podspec`]: what a pod spec becomes;
//! [`volumes`]: the files of its ConfigMap, Secret and projected volumes; [`container`]: the
//! process, its restarts and status; [`probes`]: startup, liveness and readiness;
//! [`mountns`]: the ServiceAccount directory at its fixed path, for in-cluster clients) with its DNS
//! names and those of the Services selecting it in `/etc/hosts` ([`hosts`], [`services`]).
//! The operator under test: [`operator`] runs `strom-operator` as a process against a control
//! plane; [`operated`] is a Cluster applied with kubectl and reconciled by it, with what the
//! operator's tests share. [`helm`] is the real Helm CLI and the chart; [`suite`] the user's path
//! (install, examples, scale, restarts) for any cluster kubectl reaches, a real one included.

pub mod container;
pub mod controlplane;
pub mod helm;
pub mod hosts;
pub mod kubelet;
pub mod mountns;
pub mod operated;
pub mod operator;
pub mod podspec;
pub mod probes;
pub mod services;
pub mod suite;
pub mod volumes;
