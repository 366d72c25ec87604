//! Which of several resources naming the same thing in a cluster (two Topics for one Kafka
//! topic, two ConsumerGroups for one group id) manages it: the oldest, then the first by name
//! (pure). The others change nothing, and their deletion deletes nothing.

use kube::ResourceExt;

/// None when `me` manages what `key` names; else the name of the resource that does.
/// Resources being deleted do not count.
pub fn claimed_by<'a, K, Key>(
    me: &'a K,
    all: impl IntoIterator<Item = &'a K>,
    key: impl Fn(&K) -> Key,
) -> Option<String>
where
    K: ResourceExt + 'a,
    Key: PartialEq,
{
    let order = |r: &K| (r.meta().creation_timestamp.clone().map(|c| c.0), r.name_any());
    let mine = key(me);
    all.into_iter()
        .filter(|r| r.meta().deletion_timestamp.is_none() && key(r) == mine)
        .chain(std::iter::once(me))
        .min_by_key(|r| order(r))
        .filter(|first| first.name_any() != me.name_any())
        .map(|first| first.name_any())
}

/// Another resource, not being deleted, names what `me` names: deleting `me` must leave it
/// (a resource renamed in Git is created under its new name before the old one is pruned).
pub fn named_by_another<'a, K, Key>(me: &'a K, all: impl IntoIterator<Item = &'a K>, key: impl Fn(&K) -> Key) -> bool
where
    K: ResourceExt + 'a,
    Key: PartialEq,
{
    let mine = key(me);
    all.into_iter().any(|r| r.name_any() != me.name_any() && r.meta().deletion_timestamp.is_none() && key(r) == mine)
}
