//! Stream context configuration: the aliases a group key expands to
//! (`node` → `labels.node_id`, `nodeID`, … `labels.file`) and the fields a
//! stream remembers once seen (sticky `nodeID`). The decoder owns it — it
//! resolves keys from fields, labels and sticky values — and rule files
//! only override it, so decoding needs nothing from the rules.

use std::collections::BTreeMap;

/// Group key configuration: aliases and sticky fields.
#[derive(Debug, Clone)]
pub struct KeyConfig {
    /// Alias name → candidate paths, first present wins. A path is a field
    /// path (`nodeID`, `source.host`), `labels.NAME` for stream context, or
    /// `after:LITERAL` for the token following a literal in the text
    /// (`after:pod/` reads `kubectl get events` table lines).
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Sticky field names.
    pub sticky: Vec<String>,
}

impl Default for KeyConfig {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut aliases = BTreeMap::new();
        aliases.insert(
            "node".to_string(),
            v(&[
                "labels.node_id",
                "labels.node",
                "nodeID",
                "node_id",
                "node",
                "labels.host",
                "host",
                "hostname",
                "_HOSTNAME",
                "source.host",
                "kubernetes.host",
                "labels.pod",
                "pod",
                "kubernetes.pod_name",
                "labels.file",
            ]),
        );
        aliases.insert(
            "pod".to_string(),
            v(&[
                "labels.pod",
                "involvedObject.name",
                "pod",
                "k8s.pod.name",
                "kubernetes.pod_name",
                "after:pod/",
            ]),
        );
        aliases.insert(
            "host".to_string(),
            v(&[
                "labels.host",
                "host",
                "hostname",
                "_HOSTNAME",
                "source.host",
                "labels.node",
            ]),
        );
        aliases.insert(
            "container".to_string(),
            v(&[
                "labels.container",
                "involvedObject.fieldPath",
                "containerName",
                "container",
            ]),
        );
        aliases.insert(
            "namespace".to_string(),
            v(&["labels.namespace", "involvedObject.namespace", "namespace"]),
        );
        aliases.insert(
            "upstream".to_string(),
            v(&[
                "upstream",
                "target",
                "addr",
                "remote_addr",
                "peer.address",
                "peer",
            ]),
        );
        KeyConfig {
            aliases,
            sticky: v(&["nodeID", "node_id"]),
        }
    }
}

/// The name of the derived key that maps a pod name to its workload.
pub const WORKLOAD_KEY: &str = "workload";
