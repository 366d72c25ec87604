//! Service names for the pod runner, standing in for cluster DNS plus kube-proxy (pure): a
//! Service with a selector resolves, as `<service>.<namespace>.svc.cluster.local`, `.svc`
//! and `<service>.<namespace>`, to the loopback address of one pod it selects — the one it
//! resolved to before while that pod still qualifies, else the first that does by name.
//!
//! A pod qualifies as the EndpointSlice controller would mark it ready: Ready and not being
//! deleted; with `publishNotReadyAddresses`, any pod whose process runs (deleted or not).
//! There is no virtual IP: a client reaches the pod on the port it dialled, so a Service
//! works here only where its `port` equals its `targetPort`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;

/// A pod of the runner as a Service sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub pod: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub ip: Ipv4Addr,
    /// Its process runs.
    pub running: bool,
    /// Ready by its probes.
    pub ready: bool,
    /// The pod is being deleted.
    pub terminating: bool,
}

/// The address `service` resolves to, given the runner's pods and the address it resolved to
/// until now (`current`); `None` when no pod qualifies or the Service selects nothing.
pub fn backend(service: &Service, candidates: &[Candidate<'_>], current: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
    let spec = service.spec.as_ref()?;
    let selector = spec.selector.as_ref().filter(|s| !s.is_empty())?;
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let mut qualified: Vec<&Candidate<'_>> = candidates
        .iter()
        .filter(|c| selector.iter().all(|(k, v)| c.labels.get(k) == Some(v)))
        .filter(|c| if publish_not_ready { c.running } else { c.running && c.ready && !c.terminating })
        .collect();
    if let Some(kept) = qualified.iter().find(|c| Some(c.ip) == current) {
        return Some(kept.ip);
    }
    qualified.sort_by_key(|c| c.pod);
    qualified.first().map(|c| c.ip)
}

/// The names cluster DNS gives a Service (not the bare `<service>`: the runner's names are
/// seen by every namespace on the machine).
pub fn names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}"),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service(publish_not_ready: bool) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "bootstrap"},
            "spec": {"selector": {"app": "strom"}, "publishNotReadyAddresses": publish_not_ready,
                     "ports": [{"port": 9092}]},
        }))
        .expect("service")
    }

    fn labels(app: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), app.to_string()), ("other".to_string(), "x".to_string())])
    }

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, 16, 0, last)
    }

    fn candidate<'a>(pod: &'a str, labels: &'a BTreeMap<String, String>, last: u8, ready: bool) -> Candidate<'a> {
        Candidate { pod, labels, ip: ip(last), running: true, ready, terminating: false }
    }

    #[test]
    fn a_service_resolves_to_a_ready_pod_it_selects() {
        let (strom, other) = (labels("strom"), labels("other"));
        let pods = [
            candidate("strom-2", &strom, 4, true),
            candidate("strom-0", &strom, 2, false),
            candidate("web-0", &other, 5, true),
            candidate("strom-1", &strom, 3, true),
        ];
        assert_eq!(backend(&service(false), &pods, None), Some(ip(3)), "the first ready one by name");
        assert_eq!(backend(&service(false), &pods, Some(ip(4))), Some(ip(4)), "kept while it qualifies");
        assert_eq!(backend(&service(false), &pods, Some(ip(2))), Some(ip(3)), "re-pointed once it is not ready");
        assert_eq!(backend(&service(false), &pods, Some(ip(9))), Some(ip(3)), "re-pointed once it is gone");
    }

    #[test]
    fn a_service_with_no_qualifying_pod_resolves_to_nothing() {
        let strom = labels("strom");
        let mut deleted = candidate("strom-0", &strom, 2, true);
        deleted.terminating = true;
        let mut stopped = candidate("strom-1", &strom, 3, false);
        stopped.running = false;
        let pods = [deleted, stopped, candidate("strom-2", &strom, 4, false)];
        assert_eq!(backend(&service(false), &pods, Some(ip(2))), None);
        let mut no_selector = service(false);
        no_selector.spec.as_mut().expect("spec").selector = None;
        assert_eq!(backend(&no_selector, &[candidate("strom-3", &strom, 5, true)], None), None);
    }

    #[test]
    fn publish_not_ready_addresses_takes_any_pod_whose_process_runs() {
        let strom = labels("strom");
        let mut stopped = candidate("strom-0", &strom, 2, false);
        stopped.running = false;
        let mut deleted = candidate("strom-2", &strom, 4, false);
        deleted.terminating = true;
        let pods = [stopped, candidate("strom-1", &strom, 3, false), deleted];
        assert_eq!(backend(&service(true), &pods, None), Some(ip(3)));
        assert_eq!(backend(&service(true), &pods, Some(ip(4))), Some(ip(4)), "a deleted pod still running");
    }

    #[test]
    fn names_are_the_service_forms_cluster_dns_answers() {
        assert_eq!(names("bootstrap", "ns"), ["bootstrap.ns.svc.cluster.local", "bootstrap.ns.svc", "bootstrap.ns"]);
    }
}
