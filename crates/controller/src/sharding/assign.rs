//! Which member owns a key: rendezvous (highest random weight) hashing over the live members.
//!
//! Each member `m` gives each key `k` a pseudo-random weight `w(m, k)`; the owner of `k` is the
//! member of greatest weight (ties, which need a 64-bit collision, go to the greater identity).
//! Compared with a hash ring it needs no virtual nodes to spread keys evenly, and a change of
//! membership moves the fewest keys possible, with a proof that fits in a line: a key's weights
//! for the members that stay do not change, so its owner changes only if the new member beats
//! them all (a join) or the owner itself left (a leave). The cost, `O(members)` hashes per key,
//! is nothing beside the API calls an assignment makes, for the tens of members a ring has.
//!
//! Invariants, each checked by the property test of the same name (rules SH1–SH4 in
//! docs/semantics.md):
//! - SH1 `every_key_has_exactly_one_owner_among_the_members`: with at least one member, a key
//!   has one owner and it is a member; with none, it has none.
//! - SH2 `a_join_moves_keys_only_to_the_new_member`: after a member joins, every key that
//!   changed owner now belongs to the new member, and they are about `1/(N+1)` of the keys.
//! - SH3 `a_leave_moves_only_the_leavers_keys`: after a member leaves, only the keys it owned
//!   changed owner.
//! - SH4 `the_owner_does_not_depend_on_the_members_order`: members are a set; the order in
//!   which a replica listed the Leases (or duplicates in the list) changes nothing.
//!
//! ## Why a hash of our own, not `std`'s
//!
//! Every replica, and the sharder after a restart or an upgrade, must compute the same owner for
//! the same key and members, or two of them would each believe the other owns an object (or both
//! that they do). `std`'s `HashMap` hasher (`RandomState`) is seeded at random per process, by
//! design against hash flooding; and even `DefaultHasher::new()`, fixed-keyed today, is
//! documented as free to change its algorithm between Rust releases, so two replicas built by
//! different toolchains could disagree. The weight here is FNV-1a (64-bit) over a
//! length-prefixed `member, key`, finished by the MurmurHash3 64-bit finalizer (FNV alone mixes
//! its last bytes poorly, and keys often differ only there: `ns/w-1`, `ns/w-2`): fixed here, bit
//! for bit, and pinned by a test. Flooding is not a concern: keys and identities come from the
//! cluster, and a skew costs balance, never safety (the fence is elsewhere, see
//! docs/sharding.md).

/// FNV-1a, 64 bits: offset basis and prime from the FNV specification.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// MurmurHash3's `fmix64`: every input bit affects every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The weight member `member` gives `key`: the same on every machine, process and build.
/// The member is length-prefixed so that `("ab", "c")` and `("a", "bc")` hash apart.
pub fn weight(member: &str, key: &str) -> u64 {
    let length = (member.len() as u64).to_le_bytes();
    let hash = fnv1a(FNV_OFFSET, &length);
    let hash = fnv1a(hash, member.as_bytes());
    fmix64(fnv1a(hash, key.as_bytes()))
}

/// The owner of `key` among `members` (rendezvous hashing), `None` when there are none.
/// Duplicates and order do not matter (SH4).
///
/// ```
/// use controller::sharding::owner_of;
///
/// let members = ["pod-a", "pod-b", "pod-c"];
/// let owner = owner_of("default/web", members).unwrap();
/// assert!(members.contains(&owner));
/// // Another replica listing the members in another order agrees.
/// assert_eq!(owner_of("default/web", ["pod-c", "pod-a", "pod-b"]), Some(owner));
/// ```
pub fn owner_of<'a, I>(key: &str, members: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    members
        .into_iter()
        .map(|member| (weight(member, key), member))
        .max()
        .map(|(_, member)| member)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn fnv1a_matches_the_specifications_test_vectors() {
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_weight_is_pinned_so_that_every_build_assigns_alike() {
        // Computed once from the definition above by an independent implementation (Python);
        // a change here reassigns objects of every ring, mixed versions disagreeing during a
        // rolling upgrade: never change it lightly.
        assert_eq!(weight("pod-a", "default/web"), 0x4e36_237f_a4f1_0c73);
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }

    #[test]
    fn no_members_no_owner() {
        assert_eq!(owner_of("ns/a", std::iter::empty()), None);
    }

    fn members() -> impl Strategy<Value = BTreeSet<String>> {
        prop::collection::btree_set("[a-z][a-z0-9-]{0,11}", 1..9)
    }

    fn keys(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}/obj-{i}")).collect()
    }

    fn assignment<'a>(
        keys: &'a [String],
        members: &'a BTreeSet<String>,
    ) -> HashMap<&'a str, &'a str> {
        keys.iter()
            .map(|k| {
                (
                    k.as_str(),
                    owner_of(k, members.iter().map(String::as_str)).unwrap(),
                )
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_key_has_exactly_one_owner_among_the_members(
            members in members(),
            key in "[a-z0-9-]{1,20}/[a-z0-9.-]{1,40}",
        ) {
            let owner = owner_of(&key, members.iter().map(String::as_str));
            let owner = owner.expect("a key has an owner while there are members");
            prop_assert!(members.contains(owner));
            // The one owner: no other member outweighs it.
            for member in &members {
                prop_assert!(member == owner || weight(member, &key) <= weight(owner, &key));
            }
        }

        #[test]
        fn a_join_moves_keys_only_to_the_new_member(
            members in members(),
            joiner in "[a-z][a-z0-9-]{0,11}",
            prefix in "[a-z]{1,8}",
        ) {
            prop_assume!(!members.contains(&joiner));
            let keys = keys(&prefix, 3000);
            let before = assignment(&keys, &members);
            let mut grown = members.clone();
            grown.insert(joiner.clone());
            let after = assignment(&keys, &grown);
            let moved: Vec<&str> = keys.iter().map(String::as_str).filter(|k| before[k] != after[k]).collect();
            for key in &moved {
                prop_assert_eq!(after[key], joiner.as_str(), "{} moved to a member that was already there", key);
            }
            // About 1/(N+1) of the keys; a binomial's spread at 3000 keys is under a tenth of
            // the mean for N+1 ≤ 9, so these bounds are many deviations wide.
            let expected = keys.len() as f64 / grown.len() as f64;
            let share = moved.len() as f64;
            prop_assert!(share > 0.5 * expected && share < 1.5 * expected,
                "{} keys moved to the new member of {}, expected about {:.0}", share, grown.len(), expected);
        }

        #[test]
        fn a_leave_moves_only_the_leavers_keys(
            members in prop::collection::btree_set("[a-z][a-z0-9-]{0,11}", 2..9),
            leaver_index in any::<prop::sample::Index>(),
            prefix in "[a-z]{1,8}",
        ) {
            let leaver = leaver_index.get(&members.iter().cloned().collect::<Vec<_>>()).clone();
            let keys = keys(&prefix, 1000);
            let before = assignment(&keys, &members);
            let mut shrunk = members.clone();
            shrunk.remove(&leaver);
            let after = assignment(&keys, &shrunk);
            for key in &keys {
                let key = key.as_str();
                if before[key] != leaver.as_str() {
                    prop_assert_eq!(before[key], after[key], "{} moved though its owner stayed", key);
                }
            }
        }

        #[test]
        fn the_owner_does_not_depend_on_the_members_order(
            members in prop::collection::vec("[a-z][a-z0-9-]{0,11}", 1..9),
            shuffle_seed in any::<u64>(),
            key in "[a-z0-9-]{1,20}/[a-z0-9.-]{1,40}",
        ) {
            let mut shuffled = members.clone();
            // A Fisher–Yates shuffle from the seed, plus a duplicate.
            let mut state = shuffle_seed;
            for i in (1..shuffled.len()).rev() {
                state = fmix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
                shuffled.swap(i, (state % (i as u64 + 1)) as usize);
            }
            shuffled.push(members[0].clone());
            prop_assert_eq!(
                owner_of(&key, members.iter().map(String::as_str)),
                owner_of(&key, shuffled.iter().map(String::as_str))
            );
        }
    }
}
