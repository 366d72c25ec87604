//! What the pod runner writes into a pod's configMap, secret, downwardAPI and projected
//! volumes (pure: the kubelet has fetched the objects; it writes the files, and asks the
//! TokenRequest API for service-account tokens).
//!
//! Kubernetes' rules: without `items` every key becomes a file of its name, with `items` only
//! the listed keys, at their paths; an object that is absent, or a listed key it lacks, stops
//! the pod unless the source is `optional` (then it adds nothing); a file's mode is its item's
//! `mode`, else the volume's `defaultMode`, else 0644.
//!
//! One liberty, the same as for arguments ([`podspec::rewrite_mounts`]): the text of a
//! ConfigMap or Secret file has the container's mount paths rewritten to the volumes'
//! directories, since the process has no mount namespace: a `broker.toml` naming
//! `/var/lib/strom/data` must reach the claim's directory, not the host's `/var/lib`.
//! Content that is not UTF-8 is written as it is.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use super::podspec::{self, Kind, LaunchError, Objects, Placement};

/// Kubernetes' `defaultMode` when a volume sets none (0644).
const DEFAULT_MODE: u32 = 0o644;

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    pub volume: String,
    /// Relative to the volume's directory.
    pub path: String,
    pub content: Content,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Bytes(Vec<u8>),
    /// A token of the pod's service account, bound to the pod, that the kubelet requests.
    ServiceAccountToken {
        audience: Option<String>,
        expiration_seconds: i64,
    },
}

/// Whether the runner gives volume `v` a directory of its own under the pod's uid (the others
/// it can provide are claims, whose directory is their PV's).
pub fn is_per_pod(v: &Volume) -> bool {
    v.empty_dir.is_some()
        || v.config_map.is_some()
        || v.secret.is_some()
        || v.projected.is_some()
        || v.downward_api.is_some()
}

/// The files of every configMap, secret, downwardAPI and projected volume of `pod`, with the
/// `objects` they refer to and the container's `mounts` ([`podspec::Launch::mounts`]).
pub fn files(
    pod: &Pod,
    objects: &Objects,
    at: Placement<'_>,
    mounts: &[(String, PathBuf)],
) -> Result<Vec<VolumeFile>, LaunchError> {
    let mut out = Vec::new();
    for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        let mut volume = Files { volume: &v.name, objects, mounts, out: &mut out };
        let mode = |m: Option<i32>| m.map_or(DEFAULT_MODE, mode_bits);
        if let Some(cm) = &v.config_map {
            let source =
                Keyed { kind: Kind::ConfigMap, name: &cm.name, items: cm.items.as_deref(), optional: cm.optional };
            volume.keyed(&source, mode(cm.default_mode))?;
        } else if let Some(s) = &v.secret {
            let name = s.secret_name.as_deref().unwrap_or("");
            let source = Keyed { kind: Kind::Secret, name, items: s.items.as_deref(), optional: s.optional };
            volume.keyed(&source, mode(s.default_mode))?;
        } else if let Some(d) = &v.downward_api {
            volume.downward(pod, d.items.as_deref().unwrap_or_default(), at, mode(d.default_mode))?;
        } else if let Some(p) = &v.projected {
            let default_mode = mode(p.default_mode);
            for source in p.sources.iter().flatten() {
                if let Some(t) = &source.service_account_token {
                    let content = Content::ServiceAccountToken {
                        audience: t.audience.clone(),
                        expiration_seconds: t.expiration_seconds.unwrap_or(3607),
                    };
                    volume.push(&t.path, content, default_mode)?;
                }
                if let Some(cm) = &source.config_map {
                    let items = cm.items.as_deref();
                    volume.keyed(
                        &Keyed { kind: Kind::ConfigMap, name: &cm.name, items, optional: cm.optional },
                        default_mode,
                    )?;
                }
                if let Some(s) = &source.secret {
                    let items = s.items.as_deref();
                    volume.keyed(
                        &Keyed { kind: Kind::Secret, name: &s.name, items, optional: s.optional },
                        default_mode,
                    )?;
                }
                if let Some(d) = &source.downward_api {
                    volume.downward(pod, d.items.as_deref().unwrap_or_default(), at, default_mode)?;
                }
                if source.cluster_trust_bundle.is_some() || source.pod_certificate.is_some() {
                    return Err(
                        volume.fail("projected clusterTrustBundle and podCertificate sources are not supported")
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The downward-API files of `pod` alone (downwardAPI volumes and projected downwardAPI
/// sources): what the kubelet keeps current while the pod runs, since labels and annotations
/// may change.
pub fn downward_files(pod: &Pod, at: Placement<'_>) -> Result<Vec<VolumeFile>, LaunchError> {
    let objects = Objects::default();
    let mut out = Vec::new();
    for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        let mut volume = Files { volume: &v.name, objects: &objects, mounts: &[], out: &mut out };
        let mode = |m: Option<i32>| m.map_or(DEFAULT_MODE, mode_bits);
        if let Some(d) = &v.downward_api {
            volume.downward(pod, d.items.as_deref().unwrap_or_default(), at, mode(d.default_mode))?;
        } else if let Some(p) = &v.projected {
            for d in p.sources.iter().flatten().filter_map(|s| s.downward_api.as_ref()) {
                volume.downward(pod, d.items.as_deref().unwrap_or_default(), at, mode(p.default_mode))?;
            }
        }
    }
    Ok(out)
}

/// A ConfigMap or Secret source of a volume.
struct Keyed<'a> {
    kind: Kind,
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: Option<bool>,
}

/// The files of one volume being collected.
struct Files<'a> {
    volume: &'a str,
    objects: &'a Objects,
    mounts: &'a [(String, PathBuf)],
    out: &'a mut Vec<VolumeFile>,
}

impl Files<'_> {
    fn fail(&self, reason: &str) -> LaunchError {
        LaunchError::Volume { volume: self.volume.to_string(), reason: reason.to_string() }
    }

    fn push(&mut self, path: &str, content: Content, mode: u32) -> Result<(), LaunchError> {
        let inside = !path.is_empty() && Path::new(path).components().all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(self.fail(&format!("path {path:?} must be relative, without ..")));
        }
        self.out.push(VolumeFile { volume: self.volume.to_string(), path: path.to_string(), content, mode });
        Ok(())
    }

    fn keyed(&mut self, source: &Keyed<'_>, default_mode: u32) -> Result<(), LaunchError> {
        let (kind, name) = (source.kind, source.name);
        let optional = source.optional == Some(true);
        let Some(data) = self.objects.file_data(kind, name) else {
            return if optional { Ok(()) } else { Err(self.fail(&format!("{kind} {name} not found"))) };
        };
        let items: Vec<(String, String, u32)> = match source.items {
            Some(items) => {
                items.iter().map(|i| (i.key.clone(), i.path.clone(), i.mode.map_or(default_mode, mode_bits))).collect()
            }
            None => data.keys().map(|k| (k.clone(), k.clone(), default_mode)).collect(),
        };
        for (key, path, mode) in items {
            let Some(value) = data.get(&key) else {
                if optional {
                    continue;
                }
                return Err(self.fail(&format!("{kind} {name} has no key {key}")));
            };
            let content = match std::str::from_utf8(value) {
                Ok(text) => podspec::rewrite_mounts(text, self.mounts).into_bytes(),
                Err(_) => value.clone(),
            };
            self.push(&path, Content::Bytes(content), mode)?;
        }
        Ok(())
    }

    fn downward(
        &mut self,
        pod: &Pod,
        items: &[DownwardAPIVolumeFile],
        at: Placement<'_>,
        default_mode: u32,
    ) -> Result<(), LaunchError> {
        for item in items {
            let Some(field) = &item.field_ref else {
                return Err(self.fail(&format!("downwardAPI {}: only fieldRef is supported", item.path)));
            };
            let value = podspec::field_value(pod, &field.field_path, at)
                .map_err(|e| self.fail(&format!("downwardAPI {}: {e}", item.path)))?;
            self.push(&item.path, Content::Bytes(value.into_bytes()), item.mode.map_or(default_mode, mode_bits))?;
        }
        Ok(())
    }
}

fn mode_bits(mode: i32) -> u32 {
    u32::try_from(mode).unwrap_or(DEFAULT_MODE) & 0o7777
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    const AT: Placement<'static> =
        Placement { pod_ip: Ipv4Addr::new(127, 16, 0, 3), host_ip: Ipv4Addr::LOCALHOST, node_name: "n" };

    fn pod(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "strom-0", "namespace": "ns"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes},
        }))
        .expect("pod")
    }

    fn objects() -> Objects {
        let config = ConfigMap {
            data: Some(BTreeMap::from([
                ("broker.toml".to_string(), "data_dir = \"/var/lib/strom/data\"\nnum_partitions = 3\n".to_string()),
                ("log.level".to_string(), "info".to_string()),
            ])),
            binary_data: Some(BTreeMap::from([("blob".to_string(), ByteString(vec![0xff, 0x00, 0x2f]))])),
            ..ConfigMap::default()
        };
        let secret = Secret {
            data: Some(BTreeMap::from([("password".to_string(), ByteString(b"s3cret".to_vec()))])),
            ..Secret::default()
        };
        Objects {
            config_maps: BTreeMap::from([("strom-config".to_string(), config)]),
            secrets: BTreeMap::from([("strom-creds".to_string(), secret)]),
        }
    }

    fn file(volume: &str, path: &str, content: &[u8], mode: u32) -> VolumeFile {
        VolumeFile { volume: volume.into(), path: path.into(), content: Content::Bytes(content.to_vec()), mode }
    }

    #[test]
    fn a_config_map_volume_holds_every_key_with_mount_paths_in_its_text_rewritten() {
        let pod = pod(json!([{"name": "config", "configMap": {"name": "strom-config"}}]));
        let mounts = vec![("/var/lib/strom".to_string(), PathBuf::from("/pv/data-strom-0"))];
        let files = files(&pod, &objects(), AT, &mounts).expect("files");
        assert_eq!(
            files,
            [
                file("config", "blob", &[0xff, 0x00, 0x2f], 0o644),
                file("config", "broker.toml", b"data_dir = \"/pv/data-strom-0/data\"\nnum_partitions = 3\n", 0o644),
                file("config", "log.level", b"info", 0o644),
            ]
        );
    }

    #[test]
    fn items_choose_keys_paths_and_modes() {
        let pod = pod(json!([
            {"name": "config", "configMap": {"name": "strom-config", "defaultMode": 0o600,
                "items": [{"key": "broker.toml", "path": "conf/broker.toml"}, {"key": "log.level", "path": "level", "mode": 0o444}]}},
            {"name": "creds", "secret": {"secretName": "strom-creds", "items": [{"key": "password", "path": "pw"}]}}
        ]));
        let files = files(&pod, &objects(), AT, &[]).expect("files");
        assert_eq!(
            files,
            [
                file("config", "conf/broker.toml", b"data_dir = \"/var/lib/strom/data\"\nnum_partitions = 3\n", 0o600),
                file("config", "level", b"info", 0o444),
                file("creds", "pw", b"s3cret", 0o644),
            ]
        );
    }

    #[test]
    fn an_absent_object_or_key_stops_the_pod_unless_the_source_is_optional() {
        let absent = pod(json!([{"name": "creds", "secret": {"secretName": "nope"}}]));
        let err = files(&absent, &objects(), AT, &[]).expect_err("a missing Secret");
        assert_eq!(err.to_string(), "volume creds: Secret nope not found");
        let optional = pod(json!([{"name": "creds", "secret": {"secretName": "nope", "optional": true}}]));
        assert_eq!(files(&optional, &objects(), AT, &[]).expect("optional"), []);

        let no_key = pod(json!([{"name": "config", "configMap": {"name": "strom-config",
            "items": [{"key": "missing", "path": "m"}, {"key": "log.level", "path": "level"}]}}]));
        let err = files(&no_key, &objects(), AT, &[]).expect_err("a missing key");
        assert_eq!(err.to_string(), "volume config: ConfigMap strom-config has no key missing");
        let mut optional_key = no_key.clone();
        let volumes = optional_key.spec.as_mut().and_then(|s| s.volumes.as_mut()).expect("volumes");
        volumes[0].config_map.as_mut().expect("configMap").optional = Some(true);
        assert_eq!(
            files(&optional_key, &objects(), AT, &[]).expect("optional"),
            [file("config", "level", b"info", 0o644)]
        );

        let escape = pod(json!([{"name": "config", "configMap": {"name": "strom-config",
            "items": [{"key": "log.level", "path": "../level"}]}}]));
        assert!(files(&escape, &objects(), AT, &[]).is_err(), "a path out of the volume");
    }

    #[test]
    fn a_projected_volume_holds_a_token_config_map_secret_and_downward_api_files() {
        let pod = pod(json!([{"name": "api", "projected": {"defaultMode": 0o640, "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
            {"configMap": {"name": "strom-config", "items": [{"key": "log.level", "path": "level"}]}},
            {"secret": {"name": "strom-creds"}},
            {"secret": {"name": "absent", "optional": true}},
            {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}
        ]}}]));
        let files = files(&pod, &objects(), AT, &[]).expect("files");
        let token = VolumeFile {
            volume: "api".into(),
            path: "token".into(),
            content: Content::ServiceAccountToken { audience: None, expiration_seconds: 600 },
            mode: 0o640,
        };
        assert_eq!(
            files,
            [
                token,
                file("api", "level", b"info", 0o640),
                file("api", "password", b"s3cret", 0o640),
                file("api", "name", b"strom-0", 0o640),
            ]
        );
    }
}
