//! The wheel against a model (a `BTreeMap` of due ticks): inserts,
//! removals and advances of every size, across level boundaries, so that
//! nodes cascade down the levels, each advance expiring what is due in
//! order of its ticks; and a few fixed cases.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// A node index and a tick offset.
#[derive(Debug, Clone)]
enum Op {
    /// Insert node `id` (if it is out) due `delta` ticks after the wheel's time.
    Insert(usize, u64),
    /// Remove node `id`.
    Remove(usize),
    /// Advance the wheel's time by `delta` and expire what is due.
    Advance(u64),
}

/// Offsets of every magnitude: up to 2^48 ticks, biased to the level
/// boundaries (a power of 64, give or take a little).
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        (0u32..49, any::<u64>()).prop_map(|(bits, r)| r & ((1u64 << bits) - 1)),
        (1u32..8, -2i64..3).prop_map(|(l, d)| (1u64 << (6 * l).min(48)).saturating_add_signed(d)),
    ]
}

fn op(nodes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..nodes, offset()).prop_map(|(i, d)| Op::Insert(i, d)),
        1 => (0..nodes).prop_map(Op::Remove),
        3 => offset().prop_map(Op::Advance),
    ]
}

/// The model: what is in the wheel, by node.
struct Model {
    due: BTreeMap<usize, u64>,
}

/// Runs `ops` on a wheel and the model side by side.
fn check(ops: &[Op], nodes: usize) -> Result<(), TestCaseError> {
    let pool: Vec<Box<Node>> = (0..nodes).map(|_| Box::new(Node::new())).collect();
    let index = |p: NonNull<Node>| {
        pool.iter()
            .position(|n| ptr::eq(&**n, p.as_ptr()))
            .expect("a node of the pool")
    };
    let mut wheel = Wheel::new();
    let mut model = Model {
        due: BTreeMap::new(),
    };
    for op in ops {
        match *op {
            Op::Insert(i, delta) => {
                if model.due.contains_key(&i) {
                    continue;
                }
                let due = wheel.elapsed().saturating_add(delta);
                // SAFETY: the node is out (the model says so), and the
                // pool outlives the wheel's use of it.
                unsafe { wheel.insert(&pool[i], due) };
                model.due.insert(i, due);
            }
            Op::Remove(i) => {
                // SAFETY: the pool's nodes are only ever in this wheel.
                let was = unsafe { wheel.remove(&pool[i]) };
                prop_assert_eq!(was, model.due.remove(&i).is_some());
                prop_assert!(!pool[i].is_linked());
            }
            Op::Advance(delta) => {
                let now = wheel.elapsed().saturating_add(delta);
                wheel.advance(now);
                prop_assert_eq!(wheel.elapsed(), now);
                let mut fired = Vec::new();
                while let Some(p) = wheel.pop_expired() {
                    fired.push(index(p));
                }
                // In order of their ticks, however far the advance went.
                let dues: Vec<Option<u64>> =
                    fired.iter().map(|i| model.due.get(i).copied()).collect();
                prop_assert!(dues.is_sorted(), "expired out of order: {:?}", dues);
                for &i in &fired {
                    let due = model.due.remove(&i);
                    prop_assert!(due.is_some(), "node {} expired twice", i);
                    prop_assert!(
                        due <= Some(now),
                        "node {} due {:?} expired at {}",
                        i,
                        due,
                        now
                    );
                }
                let late: Vec<_> = model.due.iter().filter(|&(_, &d)| d <= now).collect();
                prop_assert!(late.is_empty(), "due, not expired at {}: {:?}", now, late);
            }
        }
        prop_assert_eq!(wheel.len(), model.due.len());
        // The next expiration is never after the earliest due node, and
        // after the wheel's time unless a node has expired.
        let earliest = model.due.values().min().copied();
        match (wheel.next_expiration(), earliest) {
            (None, None) => {}
            (Some(next), Some(first)) => {
                prop_assert!(next <= first, "next {} after the first due {}", next, first);
                prop_assert!(next > wheel.elapsed() || first <= wheel.elapsed());
            }
            (next, first) => prop_assert!(false, "next {:?}, first due {:?}", next, first),
        }
    }
    // Whatever is left expires, exactly, once time reaches it.
    // (Each step expires a node or cascades a slot: a bounded number.)
    for _ in 0..100_000 {
        let Some(next) = wheel.next_expiration() else {
            break;
        };
        wheel.advance(next);
        while let Some(p) = wheel.pop_expired() {
            let i = index(p);
            prop_assert!(model.due.remove(&i) <= Some(next));
        }
        if let Some(&first) = model.due.values().min() {
            prop_assert!(first > next);
        }
    }
    prop_assert!(model.due.is_empty(), "never expired: {:?}", model.due);
    prop_assert_eq!(wheel.len(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_wheel_matches_a_sorted_map(ops in prop::collection::vec(op(24), 1..120)) {
        check(&ops, 24)?;
    }
}

#[test]
fn a_node_cascades_from_the_top_level_and_expires_at_its_tick() {
    let n = Node::new();
    let mut w = Wheel::new();
    let due = (1u64 << 40) + (1 << 30) + (1 << 20) + 12345;
    // SAFETY: `n` outlives its time in the wheel (removed or popped below).
    unsafe { w.insert(&n, due) };
    let mut steps = 0;
    while let Some(next) = w.next_expiration() {
        assert!(next <= due);
        w.advance(next);
        steps += 1;
        if let Some(p) = w.pop_expired() {
            assert!(ptr::eq(p.as_ptr(), &n));
            assert_eq!(next, due, "expired at its own tick");
            break;
        }
    }
    // One cascade per level it passed through, then the expiry.
    assert!((2..=LEVELS).contains(&steps), "{steps} steps");
    assert_eq!(w.len(), 0);
}

#[test]
fn a_node_beyond_the_reach_waits_whole_turns_of_the_top_level() {
    let n = Node::new();
    let mut w = Wheel::new();
    w.advance(77);
    let due = 77 + 3 * REACH + 5;
    // SAFETY: as above.
    unsafe { w.insert(&n, due) };
    let mut now = w.elapsed();
    while w.pop_expired().is_none() {
        let next = w.next_expiration().expect("still in the wheel");
        assert!(next > now && next <= due);
        now = next;
        w.advance(now);
    }
    assert_eq!(now, due);
}

#[test]
fn removing_the_last_node_of_a_slot_clears_its_bit() {
    let (a, b) = (Node::new(), Node::new());
    let mut w = Wheel::new();
    // SAFETY: both are removed before they go.
    unsafe {
        w.insert(&a, 5);
        w.insert(&b, 5);
    }
    assert_eq!(w.next_expiration(), Some(5));
    // SAFETY: in this wheel.
    assert!(unsafe { w.remove(&a) });
    assert_eq!(w.next_expiration(), Some(5));
    // SAFETY: in this wheel.
    assert!(unsafe { w.remove(&b) });
    assert_eq!(w.next_expiration(), None);
    // SAFETY: in none now.
    assert!(!unsafe { w.remove(&b) });
    // Due already: expired at once.
    // SAFETY: popped below.
    unsafe { w.insert(&a, 0) };
    assert_eq!(w.next_expiration(), Some(0));
    assert!(w.pop_expired().is_some());
}
