//! Model-based tests: random single-threaded operation sequences applied to
//! each queue kind and to a `VecDeque` with the same capacity must give
//! exactly the same results.
//!
//! Multi-producer / multi-consumer kinds get cloned handles interleaved, and
//! every kind gets handles dropped, so the synchronous operations can be
//! checked too without blocking: `push` on a full queue and `pop` on an empty
//! one are only issued when the other side is gone (and must fail at once).

use std::collections::VecDeque;

use ferry_queue::wait::Spin;
use ferry_queue::{BatchError, Consumer, Disconnected, Kind, Producer, mpmc, mpsc, spmc, spsc};
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::TestCaseError;

/// One step of a test. `h` picks a live handle (modulo their number).
#[derive(Debug, Clone)]
enum Op {
    TryPush {
        h: usize,
        v: u32,
    },
    /// Issued only when it cannot block: room, or no consumer left.
    Push {
        h: usize,
        v: u32,
    },
    TryPop {
        h: usize,
    },
    /// Issued only when it cannot block: an item, or no producer left.
    Pop {
        h: usize,
    },
    TryPushMany {
        h: usize,
        items: Vec<u32>,
    },
    /// Issued only when it cannot block (see `Push`).
    PushMany {
        h: usize,
        items: Vec<u32>,
    },
    /// `len`, `is_empty`, `capacity` and `is_disconnected` of a handle.
    Observe {
        h: usize,
        producer: bool,
    },
    CloneProducer {
        h: usize,
    },
    DropProducer {
        h: usize,
    },
    CloneConsumer {
        h: usize,
    },
    DropConsumer {
        h: usize,
    },
}

type Channel<K> = fn(usize) -> (Producer<u32, K>, Consumer<u32, K>);
type CloneProducer<K> = fn(&Producer<u32, K>) -> Producer<u32, K>;
type CloneConsumer<K> = fn(&Consumer<u32, K>) -> Consumer<u32, K>;
type PushMany<K> = fn(&Producer<u32, K>, &mut Vec<u32>) -> Result<(), BatchError>;

/// What a kind offers beyond the common operations.
struct KindOps<K: Kind> {
    channel: Channel<K>,
    clone_producer: Option<CloneProducer<K>>,
    clone_consumer: Option<CloneConsumer<K>>,
    try_push_many: Option<PushMany<K>>,
    push_many: Option<PushMany<K>>,
}

const CAPACITIES: [usize; 5] = [1, 2, 4, 8, 16];

fn ops<K: Kind>(kind: &KindOps<K>) -> impl Strategy<Value = Vec<Op>> + use<K> {
    let h = 0..4usize;
    let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            8,
            (h.clone(), any::<u32>())
                .prop_map(|(h, v)| Op::TryPush { h, v })
                .boxed(),
        ),
        (
            2,
            (h.clone(), any::<u32>())
                .prop_map(|(h, v)| Op::Push { h, v })
                .boxed(),
        ),
        (7, h.clone().prop_map(|h| Op::TryPop { h }).boxed()),
        (2, h.clone().prop_map(|h| Op::Pop { h }).boxed()),
        (
            2,
            (h.clone(), any::<bool>())
                .prop_map(|(h, producer)| Op::Observe { h, producer })
                .boxed(),
        ),
        (1, h.clone().prop_map(|h| Op::DropProducer { h }).boxed()),
        (1, h.clone().prop_map(|h| Op::DropConsumer { h }).boxed()),
    ];
    if kind.clone_producer.is_some() {
        choices.push((2, h.clone().prop_map(|h| Op::CloneProducer { h }).boxed()));
    }
    if kind.clone_consumer.is_some() {
        choices.push((2, h.clone().prop_map(|h| Op::CloneConsumer { h }).boxed()));
    }
    if kind.try_push_many.is_some() {
        // 0..=20 items: empty, fitting, full and (for every capacity) too large.
        let items = || prop::collection::vec(any::<u32>(), 0..=20);
        choices.push((
            4,
            (h.clone(), items())
                .prop_map(|(h, items)| Op::TryPushMany { h, items })
                .boxed(),
        ));
        choices.push((
            1,
            (h, items())
                .prop_map(|(h, items)| Op::PushMany { h, items })
                .boxed(),
        ));
    }
    prop::collection::vec(Union::new_weighted(choices), 0..200)
}

/// Applies `ops` to a fresh queue of `cap` slots and to the model.
fn check<K: Kind>(kind: &KindOps<K>, cap: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let (tx, rx) = (kind.channel)(cap);
    let mut producers = vec![tx];
    let mut consumers = vec![rx];
    let mut model: VecDeque<u32> = VecDeque::with_capacity(cap);

    for (step, op) in ops.iter().enumerate() {
        let np = producers.len();
        let nc = consumers.len();
        let at = format!("step {step}: {op:?} (cap {cap}, model {model:?})");
        match op {
            Op::TryPush { h, v } if np > 0 => {
                let want = if model.len() < cap {
                    model.push_back(*v);
                    Ok(())
                } else {
                    Err(*v)
                };
                prop_assert_eq!(producers[h % np].try_push(*v), want, "{}", at);
            }
            Op::Push { h, v } if np > 0 && (model.len() < cap || nc == 0) => {
                let want = if model.len() < cap {
                    model.push_back(*v);
                    Ok(())
                } else {
                    Err(Disconnected(*v))
                };
                prop_assert_eq!(producers[h % np].push(*v), want, "{}", at);
            }
            Op::TryPop { h } if nc > 0 => {
                prop_assert_eq!(consumers[h % nc].try_pop(), model.pop_front(), "{}", at);
            }
            Op::Pop { h } if nc > 0 && (!model.is_empty() || np == 0) => {
                let want = model.pop_front().ok_or(Disconnected(()));
                prop_assert_eq!(consumers[h % nc].pop(), want, "{}", at);
            }
            Op::TryPushMany { h, items } if np > 0 => {
                let f = kind.try_push_many.expect("generated for MP-SC only");
                let (want, rest) = batch_model(&mut model, cap, items, false);
                let mut batch = items.clone();
                prop_assert_eq!(f(&producers[h % np], &mut batch), want, "{}", at);
                prop_assert_eq!(batch, rest, "{}", at);
            }
            Op::PushMany { h, items }
                if np > 0 && (items.len() > cap || model.len() + items.len() <= cap || nc == 0) =>
            {
                let f = kind.push_many.expect("generated for MP-SC only");
                let (want, rest) = batch_model(&mut model, cap, items, true);
                let mut batch = items.clone();
                prop_assert_eq!(f(&producers[h % np], &mut batch), want, "{}", at);
                prop_assert_eq!(batch, rest, "{}", at);
            }
            Op::Observe { h, producer: true } if np > 0 => {
                let p = &producers[h % np];
                prop_assert_eq!(p.len(), model.len(), "{}", at);
                prop_assert_eq!(p.is_empty(), model.is_empty(), "{}", at);
                prop_assert_eq!(p.capacity(), cap, "{}", at);
                prop_assert_eq!(p.is_disconnected(), nc == 0, "{}", at);
            }
            Op::Observe { h, producer: false } if nc > 0 => {
                let c = &consumers[h % nc];
                prop_assert_eq!(c.len(), model.len(), "{}", at);
                prop_assert_eq!(c.is_empty(), model.is_empty(), "{}", at);
                prop_assert_eq!(c.capacity(), cap, "{}", at);
                prop_assert_eq!(c.is_disconnected(), np == 0, "{}", at);
            }
            Op::CloneProducer { h } if np > 0 => {
                let f = kind.clone_producer.expect("generated for MP kinds only");
                let clone = f(&producers[h % np]);
                producers.push(clone);
            }
            Op::CloneConsumer { h } if nc > 0 => {
                let f = kind.clone_consumer.expect("generated for MC kinds only");
                let clone = f(&consumers[h % nc]);
                consumers.push(clone);
            }
            Op::DropProducer { h } if np > 0 => drop(producers.swap_remove(h % np)),
            Op::DropConsumer { h } if nc > 0 => drop(consumers.swap_remove(h % nc)),
            _ => {} // needs a handle that is gone, or would block
        }
    }

    // What is left comes out in order, then nothing.
    if let Some(c) = consumers.first() {
        for (i, &v) in model.iter().enumerate() {
            prop_assert_eq!(c.try_pop(), Some(v), "draining item {}", i);
        }
        prop_assert_eq!(c.try_pop(), None);
        prop_assert!(c.is_empty());
    }
    Ok(())
}

/// The model of a batch push: the result and what is left in the batch.
/// `blocking` = `push_many`, called only when it cannot block.
fn batch_model(
    model: &mut VecDeque<u32>,
    cap: usize,
    items: &[u32],
    blocking: bool,
) -> (Result<(), BatchError>, Vec<u32>) {
    if items.len() > cap {
        (
            Err(BatchError::TooLarge {
                len: items.len(),
                capacity: cap,
            }),
            items.to_vec(),
        )
    } else if model.len() + items.len() <= cap {
        model.extend(items);
        (Ok(()), Vec::new())
    } else if blocking {
        (Err(BatchError::Disconnected), items.to_vec())
    } else {
        (Err(BatchError::Full), items.to_vec())
    }
}

fn spsc_ops() -> KindOps<spsc::Spsc> {
    KindOps {
        channel: spsc::channel,
        clone_producer: None,
        clone_consumer: None,
        try_push_many: None,
        push_many: None,
    }
}

fn mpsc_ops() -> KindOps<mpsc::Mpsc> {
    KindOps {
        channel: mpsc::channel,
        clone_producer: Some(|p| p.clone()),
        clone_consumer: None,
        try_push_many: Some(|p, v| p.try_push_many(v)),
        push_many: Some(|p, v| p.push_many(v)),
    }
}

fn spmc_ops() -> KindOps<spmc::Spmc> {
    KindOps {
        channel: spmc::channel,
        clone_producer: None,
        clone_consumer: Some(|c| c.clone()),
        try_push_many: None,
        push_many: None,
    }
}

fn mpmc_ops() -> KindOps<mpmc::Mpmc> {
    KindOps {
        channel: mpmc::channel,
        clone_producer: Some(|p| p.clone()),
        clone_consumer: Some(|c| c.clone()),
        try_push_many: None,
        push_many: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 8 } else { 512 },
        // Keep failures in the report, not in files next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn spsc_matches_model(cap in prop::sample::select(&CAPACITIES[..]), ops in ops(&spsc_ops())) {
        check(&spsc_ops(), cap, &ops)?;
    }

    #[test]
    fn mpsc_matches_model(cap in prop::sample::select(&CAPACITIES[..]), ops in ops(&mpsc_ops())) {
        check(&mpsc_ops(), cap, &ops)?;
    }

    #[test]
    fn spmc_matches_model(cap in prop::sample::select(&CAPACITIES[..]), ops in ops(&spmc_ops())) {
        check(&spmc_ops(), cap, &ops)?;
    }

    #[test]
    fn mpmc_matches_model(cap in prop::sample::select(&CAPACITIES[..]), ops in ops(&mpmc_ops())) {
        check(&mpmc_ops(), cap, &ops)?;
    }
}

// The smallest case of the model tests, spelled out: a queue of capacity 1
// holds one item and refuses a second.

fn capacity_one_refuses_second_push<K: Kind>(kind: KindOps<K>) {
    let (tx, rx) = (kind.channel)(1);
    assert_eq!(tx.try_push(1), Ok(()));
    assert_eq!(tx.len(), 1);
    assert_eq!(
        tx.try_push(2),
        Err(2),
        "a full queue of capacity 1 accepted a second item"
    );
    assert_eq!(rx.try_pop(), Some(1));
    assert_eq!(rx.try_pop(), None);
    assert_eq!(tx.try_push(3), Ok(()));
    assert_eq!(tx.try_push(4), Err(4));
    assert_eq!(rx.try_pop(), Some(3));
    assert_eq!(rx.try_pop(), None);
}

#[test]
fn spsc_capacity_one_refuses_second_push() {
    capacity_one_refuses_second_push(spsc_ops());
}

#[test]
fn mpsc_capacity_one_refuses_second_push() {
    capacity_one_refuses_second_push(mpsc_ops());
}

#[test]
fn spmc_capacity_one_refuses_second_push() {
    capacity_one_refuses_second_push(spmc_ops());
}

#[test]
fn mpmc_capacity_one_refuses_second_push() {
    capacity_one_refuses_second_push(mpmc_ops());
}

// Capacities that are not a power of two are refused with a message that
// says so, by `channel` and `channel_with` of every kind.

macro_rules! bad_capacity_panics {
    ($($name:ident: $kind:ident, $cap:expr;)*) => {$(
        #[test]
        #[should_panic(expected = "power of two")]
        fn $name() {
            if $cap == 0 {
                let _ = $kind::channel::<u8>($cap);
            } else {
                let _ = $kind::channel_with::<u8, Spin>($cap);
            }
        }
    )*};
}

bad_capacity_panics! {
    spsc_capacity_0_panics: spsc, 0;
    spsc_capacity_3_panics: spsc, 3;
    mpsc_capacity_0_panics: mpsc, 0;
    mpsc_capacity_3_panics: mpsc, 3;
    spmc_capacity_0_panics: spmc, 0;
    spmc_capacity_3_panics: spmc, 3;
    mpmc_capacity_0_panics: mpmc, 0;
    mpmc_capacity_3_panics: mpmc, 3;
}
