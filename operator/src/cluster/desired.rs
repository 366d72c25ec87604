//! The build phase (pure): the Kubernetes objects a `Cluster` stands for, each from its own
//! function — the broker ConfigMap, the headless Service (stable pod DNS names), the client
//! bootstrap Service, the StatefulSet (pod ordinal = broker id, one claim per broker, `OnDelete`
//! updates so the operator orders restarts) and the PodDisruptionBudget. Every object carries
//! the cluster's labels and a controller owner reference, so deleting the Cluster deletes them.
//!
//! Only the StatefulSet's size is not the spec's: the plan decides it (a scale-down keeps the
//! old size until the leaving brokers are drained). Its claim template keeps the size it was
//! created with (Kubernetes never lets it change); bigger claims are made by expanding them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec,
    TopologySpreadConstraint, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::crd::cluster::{ClaimDeletionPolicy, Cluster, ClusterSpec};

use super::names::{self, Names};
use super::overrides;
use super::validate::Valid;

/// The user and group the broker runs as (no root, as a restricted pod security standard asks).
pub const BROKER_UID: i64 = 65532;
/// Default seconds a broker gets to hand over its leaderships and stop.
const DEFAULT_GRACE_SECONDS: i64 = 60;

/// Why the objects could not be built (a broken pod template override).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("spec.pod.template does not make a valid pod template")]
    PodTemplate(#[source] serde_json::Error),
    #[error("the Cluster has no uid yet")]
    NoUid,
}

/// Everything the operator applies for one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub config_map: ConfigMap,
    pub headless_service: Service,
    pub bootstrap_service: Service,
    pub statefulset: StatefulSet,
    pub pdb: PodDisruptionBudget,
}

/// The objects for `cluster` with `replicas` brokers and claims of `claim_size`.
pub fn desired(
    cluster: &Cluster,
    names: &Names,
    valid: &Valid,
    replicas: i32,
    claim_size: &str,
) -> Result<Desired, BuildError> {
    let owner = owner_reference(cluster)?;
    let mut statefulset = statefulset(names, &owner, &cluster.spec, valid, replicas, claim_size)?;
    let hash = template_hash(&statefulset);
    statefulset
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(names::TEMPLATE_HASH_ANNOTATION.into(), hash);
    Ok(Desired {
        config_map: config_map(names, &owner, valid),
        headless_service: headless_service(names, &owner, &cluster.spec),
        bootstrap_service: bootstrap_service(names, &owner, &cluster.spec),
        statefulset,
        pdb: pdb(names, &owner),
    })
}

/// Hash of a StatefulSet's pod template as the operator builds it, kept in an annotation on
/// the StatefulSet: a status computed before an apply tells from it that the apply changes the
/// template (a rolling restart is about to start: not Ready yet).
pub fn template_hash(sts: &StatefulSet) -> String {
    let template = sts.spec.as_ref().map(|s| serde_json::to_vec(&s.template).unwrap_or_default()).unwrap_or_default();
    let digest = Sha256::digest(&template);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn owner_reference(cluster: &Cluster) -> Result<OwnerReference, BuildError> {
    use kube::Resource;
    cluster.controller_owner_ref(&()).ok_or(BuildError::NoUid)
}

fn meta(name: String, names: &Names, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(names.namespace.clone()),
        labels: Some(names.labels()),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// Hash of the broker config; on the pod template, so that a config change rolls the brokers.
pub fn config_hash(valid: &Valid) -> String {
    let digest = Sha256::digest(valid.broker_config.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn config_map(names: &Names, owner: &OwnerReference, valid: &Valid) -> ConfigMap {
    ConfigMap {
        metadata: meta(names.config_map(), names, owner),
        data: Some(BTreeMap::from([(names::CONFIG_FILE.to_string(), valid.broker_config.clone())])),
        ..ConfigMap::default()
    }
}

fn ports(spec: &ClusterSpec) -> Vec<ServicePort> {
    let port = |name: &str, port: i32| ServicePort {
        name: Some(name.to_string()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    let l = &spec.listeners;
    vec![port("kafka", l.kafka), port("internal", l.internal), port("http", l.http)]
}

fn headless_service(names: &Names, owner: &OwnerReference, spec: &ClusterSpec) -> Service {
    Service {
        metadata: meta(names.headless_service(), names, owner),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            // Brokers find each other by these names before they are Ready (the quorum forms
            // first), so the names exist as soon as the pods do.
            publish_not_ready_addresses: Some(true),
            selector: Some(names.selector_labels()),
            ports: Some(ports(spec)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn bootstrap_service(names: &Names, owner: &OwnerReference, spec: &ClusterSpec) -> Service {
    let kafka = ports(spec).into_iter().filter(|p| p.name.as_deref() == Some("kafka")).collect();
    Service {
        metadata: meta(names.bootstrap_service(), names, owner),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(names.selector_labels()),
            ports: Some(kafka),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn pdb(names: &Names, owner: &OwnerReference) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(names.pdb(), names, owner),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector { match_labels: Some(names.selector_labels()), ..LabelSelector::default() }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

fn statefulset(
    names: &Names,
    owner: &OwnerReference,
    spec: &ClusterSpec,
    valid: &Valid,
    replicas: i32,
    claim_size: &str,
) -> Result<StatefulSet, BuildError> {
    let policy = match spec.storage.claim_deletion_policy {
        ClaimDeletionPolicy::Retain => "Retain",
        ClaimDeletionPolicy::Delete => "Delete",
    };
    let claim = PersistentVolumeClaim {
        // No labels: a claim template can never change, and the claims outlive the pods.
        metadata: ObjectMeta { name: Some("data".into()), ..ObjectMeta::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(claim_size.to_string()))])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    };
    Ok(StatefulSet {
        metadata: meta(names.statefulset(), names, owner),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(names.headless_service()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), rolling_update: None }),
            selector: LabelSelector { match_labels: Some(names.selector_labels()), ..LabelSelector::default() },
            template: pod_template(names, spec, valid)?,
            volume_claim_templates: Some(vec![claim]),
            persistent_volume_claim_retention_policy: Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(policy.into()),
                when_scaled: Some(policy.into()),
            }),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    })
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: path.to_string(), api_version: None }),
            ..EnvVarSource::default()
        }),
        value: None,
    }
}

/// The broker's command line: everything per broker comes from the downward API.
fn args(names: &Names, spec: &ClusterSpec) -> Vec<String> {
    let l = &spec.listeners;
    let dns = format!("$(POD_NAME).{}.$(POD_NAMESPACE).svc.{}", names.headless_service(), names.cluster_domain);
    let advertised_kafka = match &l.external {
        Some(external) => external.advertised_address_template.replace("{id}", "$(NODE_ID)"),
        None => format!("{dns}:{}", l.kafka),
    };
    let mut args = vec![
        "serve".to_string(),
        format!("--config={}/{}", names::CONFIG_DIR, names::CONFIG_FILE),
        "--node-id=$(NODE_ID)".to_string(),
        format!("--data-dir={}", names::DATA_DIR),
        // The pod's own address: a broker pod has one network interface that matters, and
        // binding it (not 0.0.0.0) is what lets several brokers share a host in tests.
        format!("--kafka-listen=$(POD_IP):{}", l.kafka),
        format!("--internal-listen=$(POD_IP):{}", l.internal),
        format!("--http-listen=$(POD_IP):{}", l.http),
        format!("--advertised-kafka={advertised_kafka}"),
        format!("--advertised-internal={dns}:{}", l.internal),
    ];
    if spec.rack.is_some() {
        args.push(format!("--rack-from-file={}/annotations", names::POD_INFO_DIR));
        args.push(format!("--rack-key={}", names::RACK_ANNOTATION));
    }
    args
}

fn probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(2),
        ..Probe::default()
    }
}

fn broker_container(names: &Names, spec: &ClusterSpec) -> Container {
    let env = vec![
        field_env("NODE_ID", &format!("metadata.labels['{}']", names::POD_INDEX_LABEL)),
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        field_env("POD_IP", "status.podIP"),
    ];
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    };
    let l = &spec.listeners;
    Container {
        name: "broker".into(),
        image: Some(spec.image.clone()),
        image_pull_policy: spec.image_pull_policy.clone(),
        command: Some(vec!["strom".into()]),
        args: Some(args(names, spec)),
        env: Some(env),
        ports: Some(vec![port("kafka", l.kafka), port("internal", l.internal), port("http", l.http)]),
        // /healthz answers once the broker has recovered its logs, which can take long
        // after a crash: the startup probe allows an hour before liveness counts.
        startup_probe: Some(probe("/healthz", 2, 1800)),
        liveness_probe: Some(probe("/healthz", 10, 6)),
        // /readyz: registered with the controller, unfenced, caught up with the metadata.
        readiness_probe: Some(probe("/readyz", 2, 3)),
        resources: spec.resources.clone(),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(
            vec![
                VolumeMount { name: "data".into(), mount_path: names::DATA_MOUNT.into(), ..VolumeMount::default() },
                VolumeMount {
                    name: "config".into(),
                    mount_path: names::CONFIG_DIR.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
                VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..VolumeMount::default() },
            ]
            .into_iter()
            .chain(spec.rack.as_ref().map(|_| VolumeMount {
                name: "pod-info".into(),
                mount_path: names::POD_INFO_DIR.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }))
            .collect(),
        ),
        ..Container::default()
    }
}

/// The pod's annotations as a file, for `--rack-from-file` (the kubelet rewrites it when the
/// operator adds the rack annotation).
fn pod_info_volume() -> Volume {
    Volume {
        name: "pod-info".into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![DownwardAPIVolumeFile {
                path: "annotations".into(),
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.annotations".into(), api_version: None }),
                ..DownwardAPIVolumeFile::default()
            }]),
            ..DownwardAPIVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn pod_template(names: &Names, spec: &ClusterSpec, valid: &Valid) -> Result<PodTemplateSpec, BuildError> {
    let pod = &spec.pod;
    let mut labels = pod.labels.clone();
    labels.extend(names.labels());
    let mut annotations = pod.annotations.clone();
    annotations.insert(names::CONFIG_HASH_ANNOTATION.to_string(), config_hash(valid));
    let selector = LabelSelector { match_labels: Some(names.selector_labels()), ..LabelSelector::default() };
    // Brokers prefer distinct nodes; required anti-affinity would leave a broker unscheduled
    // on a small cluster, which is worse than two brokers sharing a node.
    let affinity = Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: PodAffinityTerm {
                    label_selector: Some(selector.clone()),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..PodAffinityTerm::default()
                },
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    };
    let spread = spec.rack.as_ref().map(|rack| {
        vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: rack.topology_key.clone(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: Some(selector.clone()),
            ..TopologySpreadConstraint::default()
        }]
    });
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels), annotations: Some(annotations), ..ObjectMeta::default() }),
        spec: Some(PodSpec {
            containers: vec![broker_container(names, spec)],
            service_account_name: pod.service_account_name.clone(),
            automount_service_account_token: Some(pod.service_account_name.is_some()),
            termination_grace_period_seconds: Some(
                pod.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECONDS),
            ),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(BROKER_UID),
                run_as_group: Some(BROKER_UID),
                fs_group: Some(BROKER_UID),
                fs_group_change_policy: Some("OnRootMismatch".into()),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
                ..PodSecurityContext::default()
            }),
            affinity: Some(affinity),
            topology_spread_constraints: spread,
            node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
            tolerations: (!pod.tolerations.is_empty()).then(|| pod.tolerations.clone()),
            volumes: Some(
                vec![
                    Volume {
                        name: "config".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: names.config_map(),
                            items: Some(vec![KeyToPath {
                                key: names::CONFIG_FILE.into(),
                                path: names::CONFIG_FILE.into(),
                                mode: None,
                            }]),
                            ..ConfigMapVolumeSource::default()
                        }),
                        ..Volume::default()
                    },
                    Volume {
                        name: "tmp".into(),
                        empty_dir: Some(EmptyDirVolumeSource::default()),
                        ..Volume::default()
                    },
                ]
                .into_iter()
                .chain(spec.rack.as_ref().map(|_| pod_info_volume()))
                .collect(),
            ),
            ..PodSpec::default()
        }),
    };
    match &pod.template {
        None => Ok(template),
        Some(over) => {
            let base = serde_json::to_value(&template).map_err(BuildError::PodTemplate)?;
            let mut merged: PodTemplateSpec =
                serde_json::from_value(overrides::merge(base, over)).map_err(BuildError::PodTemplate)?;
            // The selector labels are the StatefulSet's; an override may not take them away.
            merged
                .metadata
                .get_or_insert_with(ObjectMeta::default)
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(names.selector_labels());
            Ok(merged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::validate::{tests::spec, validate};

    fn cluster(spec: ClusterSpec) -> Cluster {
        let mut c = Cluster::new("c", spec);
        c.metadata.namespace = Some("ns".into());
        c.metadata.uid = Some("uid-1".into());
        c
    }

    fn build(spec: ClusterSpec, replicas: i32) -> Desired {
        let names = Names::new("c", "ns", "cluster.local");
        let c = cluster(spec);
        let valid = validate(&c.spec, &names).expect("valid");
        desired(&c, &names, &valid, replicas, "1Gi").expect("objects")
    }

    fn container(d: &Desired) -> Container {
        d.statefulset.spec.clone().expect("spec").template.spec.expect("pod").containers[0].clone()
    }

    #[test]
    fn every_object_is_owned_by_the_cluster_and_labelled() {
        let d = build(spec(3), 3);
        let metas = [
            &d.config_map.metadata,
            &d.headless_service.metadata,
            &d.bootstrap_service.metadata,
            &d.statefulset.metadata,
            &d.pdb.metadata,
        ];
        for m in metas {
            let owners = m.owner_references.clone().expect("owner");
            assert_eq!(owners.len(), 1);
            assert_eq!((owners[0].kind.as_str(), owners[0].uid.as_str()), ("Cluster", "uid-1"));
            assert_eq!(owners[0].controller, Some(true));
            assert_eq!(m.labels.as_ref().and_then(|l| l.get("strom.dev/cluster")).map(String::as_str), Some("c"));
            assert_eq!(m.namespace.as_deref(), Some("ns"));
        }
    }

    #[test]
    fn the_statefulset_runs_one_broker_per_ordinal_with_ondelete_updates_and_a_claim_each() {
        let d = build(spec(3), 5);
        let sts = d.statefulset.spec.clone().expect("spec");
        assert_eq!(sts.replicas, Some(5), "the plan's size, not the spec's");
        assert_eq!(sts.service_name.as_deref(), Some("c-brokers"));
        assert_eq!(sts.update_strategy.and_then(|u| u.type_).as_deref(), Some("OnDelete"));
        let claims = sts.volume_claim_templates.expect("claims");
        assert_eq!(claims[0].metadata.labels, None, "no labels copied onto claims");
        let c = container(&d);
        assert_eq!(c.command, Some(vec!["strom".to_string()]));
        let args = c.args.expect("args");
        assert!(args.contains(&"--node-id=$(NODE_ID)".to_string()), "{args:?}");
        assert!(
            args.contains(
                &"--advertised-kafka=$(POD_NAME).c-brokers.$(POD_NAMESPACE).svc.cluster.local:9092".to_string()
            ),
            "{args:?}"
        );
        let node_id = c.env.expect("env").into_iter().find(|e| e.name == "NODE_ID").expect("NODE_ID");
        assert_eq!(
            node_id.value_from.and_then(|v| v.field_ref).map(|f| f.field_path).as_deref(),
            Some("metadata.labels['apps.kubernetes.io/pod-index']")
        );
        assert_eq!(c.readiness_probe.and_then(|p| p.http_get).and_then(|h| h.path).as_deref(), Some("/readyz"));
    }

    #[test]
    fn broker_pods_run_under_the_restricted_pod_security_standard() {
        let d = build(spec(3), 3);
        let pod = d.statefulset.spec.expect("spec").template.spec.expect("pod");
        let psc = pod.security_context.expect("pod security context");
        assert_eq!((psc.run_as_non_root, psc.run_as_user), (Some(true), Some(BROKER_UID)));
        assert_eq!(psc.seccomp_profile.map(|s| s.type_).as_deref(), Some("RuntimeDefault"));
        let sc = pod.containers[0].security_context.clone().expect("container security context");
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]));
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    #[test]
    fn a_config_change_changes_the_pod_template_and_nothing_else_of_the_statefulset() {
        let a = build(spec(3), 3);
        let mut changed = spec(3);
        changed.config.insert("log.retention.ms".into(), "1000".into());
        let b = build(changed, 3);
        let hash = |d: &Desired| {
            d.statefulset.spec.clone().expect("spec").template.metadata.expect("meta").annotations.expect("ann")
                [names::CONFIG_HASH_ANNOTATION]
                .clone()
        };
        assert_ne!(hash(&a), hash(&b));
        assert!(b.config_map.data.clone().expect("data")[names::CONFIG_FILE].contains("log_retention_ms = 1000"));
        let replicas = |d: &Desired| d.statefulset.spec.clone().expect("spec").replicas;
        assert_eq!(replicas(&a), replicas(&b));
    }

    #[test]
    fn claims_follow_the_deletion_policy_and_the_rack_key_spreads_pods() {
        let mut s = spec(3);
        s.storage.claim_deletion_policy = ClaimDeletionPolicy::Delete;
        s.rack = Some(crate::crd::cluster::Rack { topology_key: "topology.kubernetes.io/zone".into() });
        let d = build(s, 3);
        let sts = d.statefulset.spec.expect("spec");
        let policy = sts.persistent_volume_claim_retention_policy.expect("policy");
        assert_eq!((policy.when_deleted.as_deref(), policy.when_scaled.as_deref()), (Some("Delete"), Some("Delete")));
        let pod = sts.template.spec.expect("pod");
        assert_eq!(pod.topology_spread_constraints.expect("spread")[0].topology_key, "topology.kubernetes.io/zone");
        let args = pod.containers[0].args.clone().expect("args");
        assert!(args.contains(&"--rack-from-file=/etc/podinfo/annotations".to_string()), "{args:?}");
        let volume = pod.volumes.expect("volumes").into_iter().find(|v| v.name == "pod-info").expect("pod-info");
        let items = volume.downward_api.and_then(|d| d.items).expect("items");
        assert_eq!(items[0].field_ref.as_ref().map(|f| f.field_path.as_str()), Some("metadata.annotations"));
    }

    #[test]
    fn a_pod_template_override_adds_without_losing_the_selector_labels() {
        let mut s = spec(3);
        s.pod.template = Some(serde_json::json!({
            "metadata": {"labels": {"app.kubernetes.io/instance": "hijacked", "team": "payments"}},
            "spec": {"priorityClassName": "high", "containers": [{"name": "broker", "env": [{"name": "EXTRA", "value": "1"}]}]}
        }));
        let d = build(s, 3);
        let template = d.statefulset.spec.expect("spec").template;
        let labels = template.metadata.expect("meta").labels.expect("labels");
        assert_eq!(labels["app.kubernetes.io/instance"], "c");
        assert_eq!(labels["team"], "payments");
        let pod = template.spec.expect("pod");
        assert_eq!(pod.priority_class_name.as_deref(), Some("high"));
        let env = pod.containers[0].env.clone().expect("env");
        assert!(env.iter().any(|e| e.name == "EXTRA") && env.iter().any(|e| e.name == "NODE_ID"));
    }

    #[test]
    fn an_external_listener_is_advertised_per_broker_id() {
        let mut s = spec(3);
        s.listeners.external = Some(crate::crd::cluster::ExternalListener {
            advertised_address_template: "b{id}.kafka.example.com:19092".into(),
        });
        let args = container(&build(s, 3)).args.expect("args");
        assert!(args.contains(&"--advertised-kafka=b$(NODE_ID).kafka.example.com:19092".to_string()), "{args:?}");
    }
}
