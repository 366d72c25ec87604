//! Names and labels of what the operator makes for a `Cluster` named `c`: StatefulSet
//! `c-broker` (pods `c-broker-<id>`), headless Service `c-brokers` (pod DNS names), client
//! Service `c-bootstrap`, ConfigMap `c-broker-config`, PodDisruptionBudget `c-broker`.

use std::collections::BTreeMap;

/// Field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "strom-operator";
/// Label of the pods' ordinal, set by the StatefulSet controller (Kubernetes >= 1.28).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Label of the StatefulSet revision a pod was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// Pod template annotation: hash of the broker config, so a config change rolls the pods.
pub const CONFIG_HASH_ANNOTATION: &str = "strom.dev/config-hash";
/// StatefulSet annotation: hash of the pod template the operator built last.
pub const TEMPLATE_HASH_ANNOTATION: &str = "strom.dev/template-hash";
/// Label on everything the operator manages for a cluster: the Cluster's name.
pub const CLUSTER_LABEL: &str = "strom.dev/cluster";
/// Where the ConfigMap's broker config is mounted, and its file name.
pub const CONFIG_DIR: &str = "/etc/strom";
pub const CONFIG_FILE: &str = "broker.toml";
/// Pod annotation with the broker's rack, copied by the operator from its node's topology
/// label once the pod is scheduled (Kubernetes does not tell pods their node's labels).
pub const RACK_ANNOTATION: &str = "strom.dev/rack";
/// Where the pod's annotations are (a downward-API volume the kubelet keeps current).
pub const POD_INFO_DIR: &str = "/etc/podinfo";
/// Where the broker's claim is mounted; the data directory is a folder inside it (a fresh
/// volume's root may hold `lost+found`).
pub const DATA_MOUNT: &str = "/var/lib/strom";
pub const DATA_DIR: &str = "/var/lib/strom/data";

/// The names of one cluster's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub cluster: String,
    pub namespace: String,
    pub cluster_domain: String,
}

impl Names {
    pub fn new(cluster: &str, namespace: &str, cluster_domain: &str) -> Names {
        Names {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            cluster_domain: cluster_domain.to_string(),
        }
    }

    pub fn statefulset(&self) -> String {
        format!("{}-broker", self.cluster)
    }

    pub fn pod(&self, id: i32) -> String {
        format!("{}-{id}", self.statefulset())
    }

    pub fn headless_service(&self) -> String {
        format!("{}-brokers", self.cluster)
    }

    pub fn bootstrap_service(&self) -> String {
        format!("{}-bootstrap", self.cluster)
    }

    pub fn config_map(&self) -> String {
        format!("{}-broker-config", self.cluster)
    }

    pub fn pdb(&self) -> String {
        self.statefulset()
    }

    /// The claim of broker `id` (template `data`, as the StatefulSet controller names it).
    pub fn claim(&self, id: i32) -> String {
        format!("data-{}", self.pod(id))
    }

    /// Broker `id`'s stable DNS name (through the headless Service).
    pub fn pod_fqdn(&self, id: i32) -> String {
        format!("{}.{}.{}.svc.{}", self.pod(id), self.headless_service(), self.namespace, self.cluster_domain)
    }

    /// The bootstrap address clients inside Kubernetes use.
    pub fn bootstrap_servers(&self, kafka_port: i32) -> String {
        format!("{}.{}.svc:{kafka_port}", self.bootstrap_service(), self.namespace)
    }

    /// Labels that select the cluster's broker pods (the StatefulSet's selector).
    pub fn selector_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "strom".to_string()),
            ("app.kubernetes.io/instance".to_string(), self.cluster.clone()),
            ("app.kubernetes.io/component".to_string(), "broker".to_string()),
        ])
    }

    /// The selector as a label-selector string (for `status.selector` and list calls).
    pub fn selector_string(&self) -> String {
        self.selector_labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Labels of every object the operator makes for the cluster.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert("app.kubernetes.io/managed-by".to_string(), FIELD_MANAGER.to_string());
        labels.insert(CLUSTER_LABEL.to_string(), self.cluster.clone());
        labels
    }
}

/// A broker pod's ordinal from its name (`<statefulset>-<ordinal>`).
pub fn ordinal(statefulset: &str, pod: &str) -> Option<i32> {
    pod.strip_prefix(statefulset)?.strip_prefix('-')?.parse().ok().filter(|o: &i32| *o >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_cluster_name() {
        let n = Names::new("orders", "prod", "cluster.local");
        assert_eq!(n.pod(2), "orders-broker-2");
        assert_eq!(n.pod_fqdn(2), "orders-broker-2.orders-brokers.prod.svc.cluster.local");
        assert_eq!(n.bootstrap_servers(9092), "orders-bootstrap.prod.svc:9092");
        assert_eq!(n.claim(0), "data-orders-broker-0");
        assert_eq!(ordinal("orders-broker", "orders-broker-12"), Some(12));
        assert_eq!(ordinal("orders-broker", "orders-broker-x"), None);
        assert_eq!(ordinal("orders-broker", "orders-brokers-1"), None);
    }
}
