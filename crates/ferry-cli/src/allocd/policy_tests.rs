//! The policies' rules, one table row each.

use super::*;

fn p(desired: usize, held: usize) -> ProcState {
    ProcState::new(desired, held)
}

fn with(mut s: ProcState, willing: usize, priority: u32) -> ProcState {
    s.willing = willing;
    s.priority = priority;
    s
}

struct Case {
    name: &'static str,
    policy: Policy,
    cores: usize,
    procs: Vec<ProcState>,
    epoch: u64,
    expect: Vec<usize>,
}

fn case(
    name: &'static str,
    policy: Policy,
    cores: usize,
    procs: Vec<ProcState>,
    expect: &[usize],
) -> Case {
    Case {
        name,
        policy,
        cores,
        procs,
        epoch: 0,
        expect: expect.to_vec(),
    }
}

#[test]
fn each_rule_of_each_policy_gives_the_counts_in_its_row() {
    use Policy::{Dynamic, Equipartition, PassThrough};
    let mut cases = vec![
        case(
            "dynamic 0: a newcomer gets a core from the largest holder",
            Dynamic,
            4,
            vec![with(p(4, 4), 0, 10), p(4, 0)],
            &[3, 1],
        ),
        case(
            "dynamic 1: free cores to the higher priority first",
            Dynamic,
            4,
            vec![with(p(4, 1), 0, 10), with(p(4, 1), 0, 8)],
            &[3, 1],
        ),
        case(
            "dynamic 1: free cores stop at desired",
            Dynamic,
            8,
            vec![p(2, 0), p(3, 0)],
            &[2, 3],
        ),
        case(
            "dynamic 1: a process above its desire gives the surplus back",
            Dynamic,
            4,
            vec![p(1, 3), p(4, 1)],
            &[1, 3],
        ),
        case(
            "dynamic 2: idle cores go to the one that wants them",
            Dynamic,
            4,
            vec![with(p(4, 3), 2, 8), p(4, 1)],
            &[1, 3],
        ),
        case(
            "dynamic 2: a willing process keeps one core",
            Dynamic,
            2,
            vec![with(p(2, 1), 1, 8), p(2, 1)],
            &[1, 1],
        ),
        case(
            "dynamic 3: low priority gives to high",
            Dynamic,
            4,
            vec![with(p(4, 3), 0, 6), with(p(4, 1), 0, 10)],
            &[1, 3],
        ),
        case(
            "dynamic 3: high priority keeps what it has",
            Dynamic,
            4,
            vec![with(p(4, 3), 0, 10), with(p(4, 1), 0, 6)],
            &[3, 1],
        ),
        case(
            "dynamic 4: equal priority ends in equipartition",
            Dynamic,
            4,
            vec![p(4, 4), p(4, 0)],
            &[2, 2],
        ),
        case(
            "dynamic 4: equipartition with desires capping the share",
            Dynamic,
            8,
            vec![p(8, 6), p(1, 1), p(8, 1)],
            &[4, 1, 3],
        ),
        case(
            "dynamic 5: cores nobody wants stay with their holder",
            Dynamic,
            4,
            vec![p(1, 3), p(1, 1)],
            &[3, 1],
        ),
        case(
            "dynamic 5: alone, a dip in desire keeps every core",
            Dynamic,
            2,
            vec![p(1, 2)],
            &[2],
        ),
        case(
            "dynamic: fair share follows desire",
            Dynamic,
            4,
            vec![p(1, 0), p(4, 0)],
            &[1, 3],
        ),
        case(
            "dynamic: max_processors caps desire",
            Dynamic,
            8,
            vec![
                ProcState {
                    max_processors: 2,
                    ..p(8, 0)
                },
                p(8, 0),
            ],
            &[2, 6],
        ),
        case(
            "pass-through: everyone owns every core",
            PassThrough,
            8,
            vec![p(1, 0), p(8, 0), p(3, 0)],
            &[8, 8, 8],
        ),
    ];
    for (cores, rows) in [
        (
            2usize,
            [vec![2], vec![1, 1], vec![1, 1, 0], vec![1, 1, 0, 0]],
        ),
        (8, [vec![8], vec![4, 4], vec![3, 3, 2], vec![2, 2, 2, 2]]),
    ] {
        for row in rows {
            let procs = vec![p(1, 0); row.len()];
            cases.push(Case {
                name: "equipartition of 1..4 processes on 2 and 8 cores, whatever they desire",
                policy: Equipartition,
                cores,
                procs,
                epoch: 0,
                expect: row,
            });
        }
    }
    for c in &cases {
        let got = counts(c.policy, c.cores, &c.procs, c.epoch);
        assert_eq!(got, c.expect, "{} ({} cores)", c.name, c.cores);
        if c.policy != PassThrough {
            assert!(got.iter().sum::<usize>() <= c.cores, "{}", c.name);
        }
    }
}

#[test]
fn with_more_processes_than_cores_whole_cores_rotate() {
    for policy in [Policy::Dynamic, Policy::Equipartition] {
        let procs = vec![p(2, 0); 5];
        let mut turns = vec![0; 5];
        for epoch in 0..5 {
            let c = counts(policy, 2, &procs, epoch);
            assert_eq!(c.iter().sum::<usize>(), 2, "{policy:?} epoch {epoch}");
            assert!(
                c.iter().all(|&n| n <= 1),
                "{policy:?}: two cores in one turn"
            );
            for (t, n) in turns.iter_mut().zip(&c) {
                *t += n;
            }
        }
        assert_eq!(turns, vec![2; 5], "{policy:?}: every process its turns");
    }
    assert_eq!(in_turn(3, 2, 0), vec![true, true, false]);
    assert_eq!(in_turn(3, 2, 1), vec![true, false, true]);
    assert_eq!(in_turn(2, 2, 7), vec![true, true]);
}

#[test]
fn placement_keeps_cores_where_they_were_and_never_shares_one() {
    let cores: CoreSet = (0..8).collect();
    let prev: Vec<CoreSet> = vec![
        [4, 5, 6].into_iter().collect(),
        [0, 1].into_iter().collect(),
    ];
    let same = place(&cores, &prev, &[3, 2]);
    assert_eq!(same, prev, "unchanged counts, unchanged cores");
    let grown = place(&cores, &prev, &[2, 4, 2]);
    assert_eq!(grown[0], [4, 5].into_iter().collect());
    assert!(prev[1].iter().all(|c| grown[1].contains(c)));
    let mut all = CoreSet::new();
    for s in &grown {
        assert!(s.intersection(&all).is_empty(), "a core placed twice");
        s.iter().for_each(|c| {
            all.insert(c);
        });
    }
    assert_eq!(all.len(), 8);
    // A core no longer managed is given up.
    let fewer: CoreSet = (0..4).collect();
    assert_eq!(place(&fewer, &prev, &[1, 2])[0], [2].into_iter().collect());
    let pass = allocate(Policy::PassThrough, &cores, &[p(1, 0), p(1, 0)], &prev, 0);
    assert_eq!(pass, vec![cores, cores]);
}

#[test]
fn fair_shares_fill_water_up_to_each_cap() {
    assert_eq!(fair_shares(8, &[8, 1, 8]), vec![4, 1, 3]);
    assert_eq!(fair_shares(4, &[1, 1]), vec![1, 1]);
    assert_eq!(fair_shares(3, &[5, 5]), vec![2, 1]);
    assert_eq!(fair_shares(0, &[5]), vec![0]);
    assert_eq!(fair_shares(5, &[]), Vec::<usize>::new());
}

#[test]
fn credit_is_the_running_mean_of_share_minus_count_and_sets_priority() {
    let mut frugal = Credit::default();
    let mut greedy = Credit::default();
    for _ in 0..10 {
        frugal.sample(2000, 1);
        greedy.sample(1000, 3);
    }
    assert_eq!(frugal.milli(), 1000);
    assert_eq!(greedy.milli(), -2000);
    assert_eq!(frugal.priority(), NEUTRAL_PRIORITY + 2);
    assert_eq!(greedy.priority(), NEUTRAL_PRIORITY - 4);
    assert_eq!(Credit::default().priority(), NEUTRAL_PRIORITY);
    // A mean: half the time one below the share, half at it.
    let mut half = Credit::default();
    for i in 0..100 {
        half.sample(2000, if i % 2 == 0 { 1 } else { 2 });
    }
    assert!((400..=600).contains(&half.milli()), "{}", half.milli());
    assert_eq!(half.priority(), NEUTRAL_PRIORITY + 1);
    // Priorities are bounded.
    let mut huge = Credit::default();
    for _ in 0..50 {
        huge.sample(100_000, 0);
    }
    assert_eq!(huge.priority(), 16);
    // Three processes on two cores: a share of two thirds each.
    let mut third = Credit::default();
    third.sample(2 * 1000 / 3, 1);
    assert_eq!(third.milli(), -334);
    assert_eq!(third.priority(), NEUTRAL_PRIORITY - 1);
    // Credit then decides Dynamic's rule 3.
    let c = counts(
        Policy::Dynamic,
        4,
        &[
            with(p(4, 3), 0, greedy.priority()),
            with(p(4, 1), 0, frugal.priority()),
        ],
        0,
    );
    assert_eq!(c, vec![1, 3]);
}
