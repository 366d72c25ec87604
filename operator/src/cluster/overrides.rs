//! `spec.pod.template`: a partial pod template merged over the one the operator builds, for
//! what the Cluster spec has no field for (sidecars, extra volumes, affinity, ...). Pure.
//!
//! The merge is JSON merge patch (RFC 7386: objects merge key by key, `null` removes a key)
//! with one change taken from Kubernetes' strategic merge: lists whose items are objects with
//! a `name` (containers, volumes, env, volumeMounts, ports) merge item by item by name, so an
//! override can change one container or add one env variable without restating the rest.

use serde_json::Value;

/// `base` with `over` merged in.
pub fn merge(base: Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(mut b), Value::Object(o)) => {
            for (key, value) in o {
                if value.is_null() {
                    b.remove(key);
                    continue;
                }
                let merged = match b.remove(key) {
                    Some(existing) => merge(existing, value),
                    None => value.clone(),
                };
                b.insert(key.clone(), merged);
            }
            Value::Object(b)
        }
        (Value::Array(b), Value::Array(o)) if named(&b) && named(o) => {
            let mut out = b;
            for item in o {
                let name = item.get("name").cloned();
                match out.iter_mut().find(|existing| existing.get("name") == name.as_ref()) {
                    Some(existing) => *existing = merge(existing.take(), item),
                    None => out.push(item.clone()),
                }
            }
            Value::Array(out)
        }
        (_, over) => over.clone(),
    }
}

fn named(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|i| i.get("name").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_and_env_merge_by_name_and_other_lists_are_replaced() {
        let base = json!({
            "metadata": {"labels": {"a": "1"}},
            "spec": {
                "containers": [{"name": "broker", "image": "strom:1", "env": [{"name": "A", "value": "1"}]}],
                "tolerations": [{"key": "x"}],
            }
        });
        let over = json!({
            "metadata": {"labels": {"b": "2"}},
            "spec": {
                "containers": [
                    {"name": "broker", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "one"}]},
                    {"name": "sidecar", "image": "busybox"}
                ],
                "tolerations": [{"key": "y"}],
                "priorityClassName": "high",
            }
        });
        let merged = merge(base, &over);
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(merged["spec"]["containers"][0]["image"], "strom:1");
        assert_eq!(
            merged["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "one"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(merged["spec"]["containers"][1]["name"], "sidecar");
        assert_eq!(merged["spec"]["tolerations"], json!([{"key": "y"}]));
        assert_eq!(merged["spec"]["priorityClassName"], "high");
    }

    #[test]
    fn null_removes_a_key() {
        let merged = merge(json!({"spec": {"affinity": {"x": 1}, "a": 1}}), &json!({"spec": {"affinity": null}}));
        assert_eq!(merged, json!({"spec": {"a": 1}}));
    }
}
