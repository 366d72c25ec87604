//! Replica placement for new partitions: a pure function, no randomness.
//!
//! Each new partition's leader (its first replica) goes to the broker leading the fewest
//! partitions (then holding the fewest replicas, then the lowest id); each follower to the
//! broker holding the fewest replicas, preferring racks the partition does not use yet. The
//! load is updated as partitions are placed, so a topic of 12 partitions on 3 equally loaded
//! brokers is led 4/4/4.

use std::collections::{BTreeMap, BTreeSet};

use super::super::image::MetadataImage;

/// A broker that can take replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: i32,
    pub rack: Option<String>,
}

/// Partitions led (as preferred leader) and replicas held, per broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerLoad {
    pub leaders: BTreeMap<i32, usize>,
    pub replicas: BTreeMap<i32, usize>,
}

impl BrokerLoad {
    /// The load the image puts on each broker.
    pub fn of(image: &MetadataImage) -> BrokerLoad {
        let mut load = BrokerLoad::default();
        for (_, _, p) in image.partitions() {
            if let Some(first) = p.replicas.first() {
                *load.leaders.entry(*first).or_default() += 1;
            }
            for r in &p.replicas {
                *load.replicas.entry(*r).or_default() += 1;
            }
        }
        load
    }

    fn leaders_of(&self, id: i32) -> usize {
        self.leaders.get(&id).copied().unwrap_or(0)
    }

    fn replicas_of(&self, id: i32) -> usize {
        self.replicas.get(&id).copied().unwrap_or(0)
    }
}

/// Why partitions could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("replication factor {rf} is larger than the {live} available broker(s)")]
    NotEnoughBrokers { rf: usize, live: usize },
    #[error("replication factor must be at least 1")]
    ZeroReplicationFactor,
}

/// Replicas for `partitions` new partitions of replication factor `rf` on `brokers`,
/// updating `load` as it goes.
pub fn place(
    brokers: &[Candidate],
    load: &mut BrokerLoad,
    partitions: usize,
    rf: usize,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if rf == 0 {
        return Err(PlacementError::ZeroReplicationFactor);
    }
    if rf > brokers.len() {
        return Err(PlacementError::NotEnoughBrokers { rf, live: brokers.len() });
    }
    let mut out = Vec::with_capacity(partitions);
    for _ in 0..partitions {
        let mut replicas: Vec<i32> = Vec::with_capacity(rf);
        let mut racks: BTreeSet<&str> = BTreeSet::new();
        let leader = brokers
            .iter()
            .min_by_key(|b| (load.leaders_of(b.id), load.replicas_of(b.id), b.id))
            .expect("rf <= brokers.len() and rf >= 1, so there is a broker");
        replicas.push(leader.id);
        if let Some(r) = &leader.rack {
            racks.insert(r);
        }
        *load.leaders.entry(leader.id).or_default() += 1;
        *load.replicas.entry(leader.id).or_default() += 1;
        while replicas.len() < rf {
            let follower = brokers
                .iter()
                .filter(|b| !replicas.contains(&b.id))
                .min_by_key(|b| {
                    let rack_used = b.rack.as_deref().is_some_and(|r| racks.contains(r));
                    (rack_used, load.replicas_of(b.id), b.id)
                })
                .expect("fewer replicas than brokers, so one is left");
            replicas.push(follower.id);
            if let Some(r) = &follower.rack {
                racks.insert(r);
            }
            *load.replicas.entry(follower.id).or_default() += 1;
        }
        out.push(replicas);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn brokers(racks: &[Option<&str>]) -> Vec<Candidate> {
        racks
            .iter()
            .enumerate()
            .map(|(i, r)| Candidate { id: i32::try_from(i).unwrap_or(0), rack: r.map(str::to_string) })
            .collect()
    }

    #[test]
    fn twelve_partitions_on_three_brokers_are_led_four_each() {
        let mut load = BrokerLoad::default();
        let placed = place(&brokers(&[None, None, None]), &mut load, 12, 1).expect("place");
        let mut leaders = BTreeMap::new();
        for p in &placed {
            *leaders.entry(p[0]).or_insert(0) += 1;
        }
        assert_eq!(leaders, BTreeMap::from([(0, 4), (1, 4), (2, 4)]));
    }

    #[test]
    fn a_replication_factor_above_the_broker_count_is_refused() {
        let mut load = BrokerLoad::default();
        assert_eq!(
            place(&brokers(&[None, None]), &mut load, 1, 3),
            Err(PlacementError::NotEnoughBrokers { rf: 3, live: 2 })
        );
        assert_eq!(place(&brokers(&[None]), &mut load, 1, 0), Err(PlacementError::ZeroReplicationFactor));
    }

    #[test]
    fn new_topics_go_to_the_least_loaded_brokers_first() {
        let mut load = BrokerLoad::default();
        load.leaders.insert(0, 5);
        load.replicas.insert(0, 5);
        let placed = place(&brokers(&[None, None, None]), &mut load, 2, 1).expect("place");
        assert_eq!(placed, vec![vec![1], vec![2]]);
    }

    proptest! {
        #[test]
        fn replicas_are_distinct_spread_over_racks_and_leaders_balanced(
            rack_of in proptest::collection::vec(proptest::option::of(0u8..4), 1..9),
            partitions in 1usize..40,
            rf_seed in 1usize..4,
        ) {
            let names: Vec<Option<String>> = rack_of.iter().map(|r| r.map(|r| format!("rack-{r}"))).collect();
            let candidates: Vec<Candidate> = names
                .iter()
                .enumerate()
                .map(|(i, r)| Candidate { id: i32::try_from(i).unwrap_or(0), rack: r.clone() })
                .collect();
            let rf = rf_seed.min(candidates.len());
            let mut load = BrokerLoad::default();
            let placed = place(&candidates, &mut load, partitions, rf).expect("rf <= brokers");
            prop_assert_eq!(placed.len(), partitions);
            let all_racked = names.iter().all(Option::is_some);
            let distinct_racks: BTreeSet<&String> = names.iter().flatten().collect();
            for replicas in &placed {
                prop_assert_eq!(replicas.len(), rf);
                let unique: BTreeSet<i32> = replicas.iter().copied().collect();
                prop_assert_eq!(unique.len(), rf, "replicas on distinct brokers: {:?}", replicas);
                if all_racked && distinct_racks.len() >= rf {
                    let used: BTreeSet<&String> = replicas
                        .iter()
                        .filter_map(|b| names[usize::try_from(*b).unwrap_or(0)].as_ref())
                        .collect();
                    prop_assert_eq!(used.len(), rf, "replicas on distinct racks: {:?}", replicas);
                }
            }
            let mut leaders: BTreeMap<i32, usize> = candidates.iter().map(|c| (c.id, 0)).collect();
            for replicas in &placed {
                *leaders.entry(replicas[0]).or_default() += 1;
            }
            let (min, max) = (leaders.values().min().copied().unwrap_or(0), leaders.values().max().copied().unwrap_or(0));
            prop_assert!(max - min <= 1, "leader counts {:?}", leaders);
        }
    }
}
