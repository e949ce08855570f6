//! Range mode's hand-over, decided from claims: each member publishes the virtual ranges it
//! *holds* (acts on, or waits to act on) in a ConfigMap of its own, and acts on a range only
//! when no other live member's published claims name it.
//!
//! ```text
//!   member m, every tick:  table = RangeTable(live members)      desired = table.ranges_of(m)
//!     release  held − desired   stop admitting, let reconciles in flight finish, touch the
//!                               keys whose last write got no answer, then unpublish
//!     claim    desired − held   publish first (ConfigMap <ring>-ranges-<m>, data.held)
//!     act      held ∩ desired   after the publish, a fresh list of every member's claims:
//!                               another LIVE member claims it  ─► wait
//!                               only DEAD members claim it     ─► touch every object, then act
//!                               nobody else claims it          ─► act
//! ```
//!
//! Rules (SH21–SH23 in docs/semantics.md):
//! - SH21 (claim before act): a member acts on a range only after its own claim of the range
//!   was stored and a listing of every member's claims, read after that, showed no other live
//!   member claiming it. Two members that both claim a range each store their claim before
//!   they read the other's, so (the server's reads being linearizable) at least one of them sees
//!   the other's claim and waits: two live members never act on one range at once.
//! - SH22 (release after the answers): a member unpublishes a range only after it stopped
//!   admitting its keys, every reconcile of them in flight finished, and every key whose last
//!   write got no answer (a timeout, a broken connection: its fate unknown) was touched by the
//!   member itself; so none of its writes to that range can land after the release.
//! - SH23 (touch what the dead held): a range claimed by a member that is not live (its Lease
//!   ran out on the observer's clock, or was released), or held by this member's previous
//!   incarnation, is touched before anyone acts on it: one write per object, conditioned on the
//!   version seen, that changes the object's resourceVersion; every write the dead member sent
//!   earlier was conditioned on an older version and is refused if it arrives later.
//!
//! [`decide`] is this logic alone, pure: the runtime that publishes, lists, touches and moves
//! informers is [`RangeShard`](super::RangeShard).

use std::collections::{BTreeMap, BTreeSet};

use super::ranges::{RangeTable, VIRTUAL_RANGES};

/// The name of `identity`'s claims ConfigMap in `ring`: `<ring>-ranges-<identity>`.
pub fn claims_name(ring: &str, identity: &str) -> String {
    format!("{ring}-ranges-{identity}")
}

/// The key of a claims ConfigMap's `data` that lists the held ranges.
pub const CLAIMS_KEY: &str = "held";

/// A claims ConfigMap whose `data.held` is not a list of virtual ranges.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claims {value:?}: {reason}")]
pub struct ClaimsError {
    /// The value read (a list of small numbers: never secret).
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// `held` as stored: the indices in increasing order, comma-separated (`""` for none).
pub fn encode_claims(held: &BTreeSet<u32>) -> String {
    let parts: Vec<String> = held.iter().map(u32::to_string).collect();
    parts.join(",")
}

/// The ranges a stored `data.held` names; an index that is not a number below
/// [`VIRTUAL_RANGES`] is an error naming it (a member that cannot read another's claims must
/// not act as if it had none).
pub fn parse_claims(value: &str) -> Result<BTreeSet<u32>, ClaimsError> {
    let error = |reason: String| ClaimsError {
        value: value.chars().take(200).collect(),
        reason,
    };
    let mut held = BTreeSet::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let index: u32 = part
            .parse()
            .map_err(|_| error(format!("{part:?} is not a range index")))?;
        if index >= VIRTUAL_RANGES {
            return Err(error(format!(
                "range {index} is not below {VIRTUAL_RANGES}"
            )));
        }
        held.insert(index);
    }
    Ok(held)
}

/// Another member's claims, as the last listing showed them, and whether that member is live on
/// the observer's clock (its shard Lease held and not run out, SH5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerClaims {
    /// The member.
    pub member: String,
    /// Whether its shard Lease is live.
    pub live: bool,
    /// The ranges it published.
    pub held: BTreeSet<u32>,
}

/// What a member does with each range this tick ([`decide`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeDecision {
    /// Held and no longer the member's: stop admitting, drain, then unpublish (SH22).
    pub release: BTreeSet<u32>,
    /// The member's and not yet held: publish the claim (SH21).
    pub claim: BTreeSet<u32>,
    /// Held, the member's, not yet acted on, and no other member claims it: act.
    pub act: BTreeSet<u32>,
    /// Held and the member's, but claimed by these live members: wait for them to release.
    pub wait: BTreeMap<u32, Vec<String>>,
    /// Held and the member's, claimed by members that are not live (or by the member's own
    /// previous incarnation): touch every object of the range, then act (SH23).
    pub touch: BTreeMap<u32, Vec<String>>,
}

/// The decision of member `me` from its `table` (the live members' [`RangeTable`]), the ranges
/// it has published (`held`), those it acts on (`acting`) and the other members' claims as
/// listed after its last publish (`peers`). A range already acted on stays acted on while it is
/// the member's, whoever claims it since: they wait for this member (SH21).
pub fn decide(
    me: &str,
    table: &RangeTable,
    held: &BTreeSet<u32>,
    acting: &BTreeSet<u32>,
    peers: &[PeerClaims],
) -> RangeDecision {
    let desired: BTreeSet<u32> = table.ranges_of(me).into_iter().collect();
    let mut decision = RangeDecision {
        release: held.difference(&desired).copied().collect(),
        claim: desired.difference(held).copied().collect(),
        ..RangeDecision::default()
    };
    for &range in desired.intersection(held) {
        if acting.contains(&range) {
            continue;
        }
        let claimers = peers
            .iter()
            .filter(|p| p.member != me && p.held.contains(&range));
        let (live, dead): (Vec<&PeerClaims>, Vec<&PeerClaims>) = claimers.partition(|p| p.live);
        if !live.is_empty() {
            decision
                .wait
                .insert(range, live.iter().map(|p| p.member.clone()).collect());
        } else if !dead.is_empty() {
            decision
                .touch
                .insert(range, dead.iter().map(|p| p.member.clone()).collect());
        } else {
            decision.act.insert(range);
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn claims_round_trip_and_bad_ones_are_named() {
        let held: BTreeSet<u32> = [0, 5, 63].into();
        assert_eq!(encode_claims(&held), "0,5,63");
        assert_eq!(parse_claims("0,5,63").unwrap(), held);
        assert_eq!(parse_claims("").unwrap(), BTreeSet::new());
        assert_eq!(parse_claims(" 7 , 3").unwrap(), BTreeSet::from([3, 7]));
        let error = parse_claims("1,64").unwrap_err();
        assert!(
            error.to_string().contains("range 64 is not below 64"),
            "{error}"
        );
        let error = parse_claims("1,x").unwrap_err();
        assert!(
            error.to_string().contains("\"x\" is not a range index"),
            "{error}"
        );
    }

    fn peer(member: &str, live: bool, held: &[u32]) -> PeerClaims {
        PeerClaims {
            member: member.into(),
            live,
            held: held.iter().copied().collect(),
        }
    }

    #[test]
    fn a_held_range_is_acted_on_when_unclaimed_waited_for_when_a_live_member_claims_it_and_touched_when_a_dead_one_does(
    ) {
        // SH21, SH23
        let table = RangeTable::new(["a"]);
        let held: BTreeSet<u32> = [1, 2, 3].into();
        let peers = [
            peer("b", true, &[2]),
            peer("c", false, &[3]),
            peer("a", true, &[1, 2, 3]),
        ];
        let d = decide("a", &table, &held, &BTreeSet::new(), &peers);
        assert_eq!(d.act, BTreeSet::from([1]));
        assert_eq!(d.wait, BTreeMap::from([(2, vec!["b".to_string()])]));
        assert_eq!(d.touch, BTreeMap::from([(3, vec!["c".to_string()])]));
        // Every other range of the space is a's and not yet held: claimed.
        assert_eq!(d.claim.len(), VIRTUAL_RANGES as usize - 3);
        assert!(d.release.is_empty());
        // Already acting: stays so whoever claims it since.
        let d = decide("a", &table, &held, &BTreeSet::from([2]), &peers);
        assert!(!d.wait.contains_key(&2) && !d.act.contains(&2));
    }

    #[test]
    fn ranges_no_longer_the_members_are_released_and_a_member_out_of_the_table_holds_nothing() {
        // SH22
        let table = RangeTable::new(["b"]);
        let held: BTreeSet<u32> = [1, 2].into();
        let d = decide("a", &table, &held, &held, &[]);
        assert_eq!(d.release, held);
        assert!(d.claim.is_empty() && d.act.is_empty());
    }

    /// One member of the model below: what it published, what it acts on, and its view of the
    /// ring (which members it believes live).
    #[derive(Clone, Debug)]
    struct Member {
        name: String,
        view: Vec<String>,
        held: BTreeSet<u32>,
        acting: BTreeSet<u32>,
        /// The claims it last listed, or `None` when it must list again before acting.
        listed: Option<Vec<(String, BTreeSet<u32>)>>,
    }

    /// The step a member takes: 0 publishes its claims (claim and release, releases draining at
    /// once: no writes in this model), 1 lists every member's stored claims, 2 acts on what the
    /// listing allows, 3 changes its view of the ring to the one the step's argument picks.
    fn step(
        members: &mut [Member],
        stored: &mut BTreeMap<String, BTreeSet<u32>>,
        who: usize,
        what: u8,
        arg: usize,
        views: &[Vec<String>],
    ) {
        let me = members[who].clone();
        let table = RangeTable::new(me.view.iter().map(String::as_str));
        match what {
            0 => {
                let d = decide(&me.name, &table, &me.held, &me.acting, &[]);
                let m = &mut members[who];
                for r in &d.release {
                    m.acting.remove(r);
                    m.held.remove(r);
                }
                m.held.extend(d.claim.iter().copied());
                stored.insert(m.name.clone(), m.held.clone());
                m.listed = None;
            }
            1 => {
                members[who].listed =
                    Some(stored.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
            }
            2 => {
                let Some(listed) = &me.listed else { return };
                // Every member is live in this model: deaths are SH23's business.
                let peers: Vec<PeerClaims> = listed
                    .iter()
                    .map(|(name, held)| PeerClaims {
                        member: name.clone(),
                        live: true,
                        held: held.clone(),
                    })
                    .collect();
                let d = decide(&me.name, &table, &me.held, &me.acting, &peers);
                let m = &mut members[who];
                // Ranges no longer its own stop being acted on at once (admission stops first).
                for r in &d.release {
                    m.acting.remove(r);
                }
                m.acting.extend(d.act.iter().copied());
            }
            _ => {
                let m = &mut members[who];
                m.view = views[arg % views.len()].clone();
                for r in decide(
                    &m.name,
                    &RangeTable::new(m.view.iter().map(String::as_str)),
                    &m.held,
                    &m.acting,
                    &[],
                )
                .release
                {
                    m.acting.remove(&r);
                }
            }
        }
    }

    proptest! {
        /// SH21 over any interleaving of three members' publishes, listings, acts and changes
        /// of view (each member may believe any subset of the ring live, as observers disagree
        /// while a Lease comes or goes): no range is ever acted on by two members at once.
        #[test]
        fn sh21_two_live_members_never_act_on_one_range_at_once(
            steps in proptest::collection::vec((0usize..3, 0u8..4, 0usize..7), 1..120)
        ) {
            let names = ["a", "b", "c"];
            let views: Vec<Vec<String>> = (1u8..8)
                .map(|mask| names.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, n)| n.to_string()).collect())
                .collect();
            let mut members: Vec<Member> = names
                .iter()
                .map(|n| Member { name: n.to_string(), view: vec![n.to_string()], held: BTreeSet::new(), acting: BTreeSet::new(), listed: None })
                .collect();
            let mut stored = BTreeMap::new();
            for (who, what, arg) in steps {
                step(&mut members, &mut stored, who, what, arg, &views);
                for r in 0..VIRTUAL_RANGES {
                    let actors: Vec<&str> = members.iter().filter(|m| m.acting.contains(&r)).map(|m| m.name.as_str()).collect();
                    prop_assert!(actors.len() <= 1, "range {} acted on by {:?}", r, actors);
                }
            }
        }
    }
}
