//! Sharding a Loki consumer across replicas (`--shard I/N`): each replica
//! keeps the streams whose label hash falls to it, so all lines of one
//! stream — one pod, one node — reach the same replica and per-node rules
//! see everything of their node. The hash is FNV-1a 64 over the chosen
//! labels (`--shard-by`, default every stream label) sorted by name: stable
//! across versions, processes and machines, so N replicas agree without
//! talking to each other.

use std::hash::Hasher;

/// This replica's part of the streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// This replica's index, from 0.
    pub index: u32,
    /// How many replicas share the streams.
    pub count: u32,
    /// Labels hashed (empty: all of the stream's labels).
    pub by: Vec<String>,
}

impl Shard {
    /// Parses `I/N` (0 ≤ I < N).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: use I/N, e.g. 0/2 (replica 0 of 2)"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: the index {i:?} is not a number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: the count {n:?} is not a number"))?;
        if count == 0 || index >= count {
            return Err(format!(
                "{s:?}: the index must be below the count (0/2 and 1/2 make two shards)"
            ));
        }
        Ok(Shard {
            index,
            count,
            by: Vec::new(),
        })
    }

    /// Whether more than one replica shares the streams.
    pub fn is_split(&self) -> bool {
        self.count > 1
    }

    /// The shard a stream (its labels, any order) falls to.
    pub fn of(&self, labels: &[(String, String)]) -> u32 {
        (self.hash(labels) % u64::from(self.count.max(1))) as u32
    }

    /// The stream's hash (changing it would move streams between shards
    /// during a rolling upgrade: a test pins it).
    pub fn hash(&self, labels: &[(String, String)]) -> u64 {
        let mut chosen: Vec<&(String, String)> = labels
            .iter()
            .filter(|(k, _)| self.by.is_empty() || self.by.iter().any(|b| b == k))
            .collect();
        chosen.sort();
        let mut h = fnv::FnvHasher::default();
        for (k, v) in chosen {
            h.write(k.as_bytes());
            h.write(&[0]);
            h.write(v.as_bytes());
            h.write(&[1]);
        }
        h.finish()
    }

    /// Whether this replica takes the stream.
    pub fn owns(&self, labels: &[(String, String)]) -> bool {
        self.of(labels) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::labels;

    #[test]
    fn parse_and_reject() {
        assert_eq!(Shard::parse("1/3").unwrap().count, 3);
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_stream_goes_to_exactly_one_shard_and_spreads() {
        let shards: Vec<Shard> = (0..3)
            .map(|i| Shard::parse(&format!("{i}/3")).unwrap())
            .collect();
        let mut per = [0u32; 3];
        for p in 0..300 {
            let l = labels(&[("namespace", "media"), ("pod", &format!("egress-{p}"))]);
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns(&l))
                .map(|s| s.index)
                .collect();
            assert_eq!(owners.len(), 1);
            per[owners[0] as usize] += 1;
        }
        assert!(per.iter().all(|n| *n > 60), "{per:?}");
    }

    const PINNED: u64 = 17_925_524_467_192_123_378;

    #[test]
    fn label_order_does_not_matter_and_by_restricts_the_hash() {
        let s = Shard::parse("0/4").unwrap();
        let a = labels(&[("pod", "p1"), ("namespace", "n")]);
        let b = labels(&[("namespace", "n"), ("pod", "p1")]);
        assert_eq!(s.of(&a), s.of(&b));
        let by_pod = Shard {
            by: vec!["pod".into()],
            ..s.clone()
        };
        // Only the pod counts: another container of the same pod goes along.
        let c = labels(&[("pod", "p1"), ("container", "sidecar"), ("namespace", "n")]);
        assert_eq!(by_pod.of(&a), by_pod.of(&c));
        // Pinned: the same answer on every version, run and machine.
        assert_eq!(s.hash(&labels(&[("pod", "livekit-0")])), PINNED);
    }
}
