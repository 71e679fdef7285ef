//! The per-group counters the engine exports for Prometheus: the hits of
//! every group of the cluster-wide rules (spread, share) and when each
//! group of their population was last seen, bounded per rule, so a
//! sharded deployment can evaluate those rules over every replica.

use rustc_hash::FxHashMap;

/// Most series (partition, group) exported per cluster-wide rule; hits
/// of further groups are counted under [`OTHER_GROUP`] of their partition
/// (or of partition [`OTHER_GROUP`] when the partition is new too), so
/// `/metrics` stays bounded whatever the number of nodes.
pub const MAX_EXPORTED_GROUPS: usize = 2000;
/// The group (and partition) that collects hits beyond [`MAX_EXPORTED_GROUPS`].
pub const OTHER_GROUP: &str = "_other";

/// Per-group counters of the cluster-wide rules (spread, share): their
/// signature hits and when each group of their population was last seen,
/// so Prometheus can evaluate them over every shard (docs/scaling.md).
/// Looked up by `&str` on every hit and population sighting: nothing is
/// allocated once a group is known.
#[derive(Debug, Clone, Default)]
pub struct Exports {
    /// rule → (series held, partition → group → counts).
    rules: FxHashMap<String, (usize, Partitions)>,
    /// Never read: where a lookup that cannot fail would write if it did.
    spare: Counts,
}

/// partition → group → counts.
type Partitions = FxHashMap<String, FxHashMap<String, Counts>>;

/// What is exported of one group.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Signature hits.
    pub hits: u64,
    /// Last seen (event time, ns).
    pub seen: i64,
}

impl Exports {
    fn slot(&mut self, rule: &str, partition: &str, group: &str) -> &mut Counts {
        // contains_key then get_mut: a known key allocates nothing.
        if !self.rules.contains_key(rule) {
            self.rules
                .insert(rule.to_string(), (0, FxHashMap::default()));
        }
        let Some((held, parts)) = self.rules.get_mut(rule) else {
            return &mut self.spare;
        };
        let known = parts.get(partition).is_some_and(|g| g.contains_key(group));
        let (partition, group) = if known || *held < MAX_EXPORTED_GROUPS {
            (partition, group)
        } else if parts.contains_key(partition) {
            (partition, OTHER_GROUP)
        } else {
            (OTHER_GROUP, OTHER_GROUP)
        };
        if !parts.contains_key(partition) {
            parts.insert(partition.to_string(), FxHashMap::default());
        }
        let Some(groups) = parts.get_mut(partition) else {
            return &mut self.spare;
        };
        if !groups.contains_key(group) {
            *held += 1;
            groups.insert(
                group.to_string(),
                Counts {
                    hits: 0,
                    seen: i64::MIN,
                },
            );
        }
        match groups.get_mut(group) {
            Some(c) => c,
            None => &mut self.spare,
        }
    }

    pub(super) fn hit(&mut self, rule: &str, partition: &str, group: &str) {
        self.slot(rule, partition, group).hits += 1;
    }

    pub(super) fn seen(&mut self, rule: &str, partition: &str, group: &str, t: i64) {
        let c = self.slot(rule, partition, group);
        c.seen = c.seen.max(t);
    }

    /// Every (rule, partition, group) with its counts, sorted.
    pub fn series(&self) -> Vec<((&str, &str, &str), Counts)> {
        let mut v: Vec<((&str, &str, &str), Counts)> = self
            .rules
            .iter()
            .flat_map(|(r, (_, parts))| {
                parts.iter().flat_map(move |(p, groups)| {
                    groups
                        .iter()
                        .map(move |(g, c)| ((r.as_str(), p.as_str(), g.as_str()), *c))
                })
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The counts of one group.
    pub fn get(&self, rule: &str, partition: &str, group: &str) -> Option<Counts> {
        self.rules.get(rule)?.1.get(partition)?.get(group).copied()
    }
}
