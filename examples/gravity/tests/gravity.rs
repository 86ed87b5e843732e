//! Gravity is a real simulation, and the same one whatever runs it: energy
//! drift and momentum over 100 steps within bounds, the tree's forces
//! against direct summation, bit-identical results for ferry and plain
//! threads with 1, 2 and 3 workers (and more workers than processors), and
//! bad settings refused.

use gravity::body::plummer;
use gravity::tree::{Moment, Tree, direct};
use gravity::{Body, Config, ConfigError, Error, Ferry, Report, Std, simulate};

/// A small system: 512 bodies, 100 steps of 1/128 (0.78 time units, about
/// a third of the sphere's crossing time).
fn small(workers: usize, theta: f64) -> Config {
    Config {
        bodies: 512,
        steps: 100,
        workers,
        theta,
        ..Config::default()
    }
}

/// |a - b|.
fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// Bound on the relative energy drift of `small` with theta 0.5 over 100
/// steps. Measured 5.5e-4 (seed 1; seeds 1 to 6 give 1.6e-4 to 6.9e-4):
/// the bound is that times 5. With theta > 0 the drift is mostly the
/// tree's: its forces are not the gradient of one potential, and the
/// potential it measures the energy with changes its error as the tree
/// changes shape.
const DRIFT_BOUND: f64 = 2.7e-3;

/// Bound on the relative energy drift of `small` with theta 0 (direct
/// summation, only the integrator's error): measured 3.8e-7 (seed 1),
/// bound that times 5.
const EXACT_DRIFT_BOUND: f64 = 2.0e-6;

#[test]
fn energy_drift_over_100_steps_is_small() {
    let r = simulate(&small(2, 0.5), &Ferry::default()).unwrap();
    let e0 = r.start.energy();
    // A Plummer sphere in N-body units has E = -1/4 (up to sampling).
    assert!((-0.3..-0.2).contains(&e0), "start energy {e0}");
    assert!(r.drift() < DRIFT_BOUND, "drift {:e}", r.drift());
    // The bodies moved: the run was not empty.
    let first = plummer(512, Config::default().seed);
    let moved = r
        .bodies
        .iter()
        .zip(&first)
        .filter(|(a, b)| a.pos != b.pos)
        .count();
    assert_eq!(moved, 512);
}

#[test]
fn energy_drift_of_direct_summation_is_the_integrators() {
    let r = simulate(&small(2, 0.0), &Std).unwrap();
    assert!(r.drift() < EXACT_DRIFT_BOUND, "drift {:e}", r.drift());
    // The bound is not met by chance: four times the time step breaks it
    // (measured 3.3e-5; leapfrog's error grows as dt^2, close passes grow
    // it further).
    let cfg = Config {
        dt: 4.0 / 128.0,
        ..small(2, 0.0)
    };
    let r = simulate(&cfg, &Ferry::default()).unwrap();
    assert!(r.drift() > EXACT_DRIFT_BOUND, "drift {:e}", r.drift());
}

/// Bound on the change of total momentum (total mass 1, speeds ~0.7) over
/// 100 steps with theta 0.5. Tree forces are not pairwise antisymmetric;
/// measured 4.9e-5 for `small`: the bound is that times 5.
const MOMENTUM_BOUND: f64 = 2.5e-4;

#[test]
fn momentum_is_conserved() {
    let r = simulate(&small(3, 0.5), &Std).unwrap();
    assert!(norm(r.start.momentum) < 1e-14, "{:?}", r.start.momentum);
    let dp = norm([0, 1, 2].map(|d| r.end.momentum[d] - r.start.momentum[d]));
    assert!(dp < MOMENTUM_BOUND, "momentum change {dp:e}");
    // Direct summation (theta 0) is antisymmetric pair by pair: momentum
    // holds to rounding.
    let cfg = Config {
        steps: 10,
        ..small(2, 0.0)
    };
    let r = simulate(&cfg, &Ferry::default()).unwrap();
    let dp = norm([0, 1, 2].map(|d| r.end.momentum[d] - r.start.momentum[d]));
    assert!(dp < 1e-13, "momentum change with theta 0: {dp:e}");
}

/// Tree forces and potentials at every body of a 1000-body sphere, in the
/// tree's order, with the sorted bodies.
fn tree_forces(theta: f64, eps2: f64) -> (Vec<Body>, Vec<([f64; 3], f64)>) {
    let mut bodies = plummer(1000, 5);
    let mut tree = Tree::default();
    tree.build(&mut bodies);
    let mut moments = vec![Moment::default(); tree.nodes.len()];
    for &root in &tree.subtrees {
        let range = tree.subtree(root);
        tree.moments(range.clone(), &bodies, &mut moments[range]);
    }
    let mut stack = Vec::new();
    let forces = (0..bodies.len())
        .map(|k| tree.force(&bodies, &moments, k, theta, eps2, &mut stack))
        .collect();
    (bodies, forces)
}

#[test]
fn theta_zero_is_direct_summation() {
    let eps2 = 0.05f64.powi(2);
    let (bodies, tree) = tree_forces(0.0, eps2);
    let exact = direct(&bodies, eps2);
    for (k, ((a, p), (ea, ep))) in tree.iter().zip(&exact).enumerate() {
        let da = norm([0, 1, 2].map(|d| a[d] - ea[d]));
        assert!(da <= 1e-12 * norm(*ea), "body {k}: {a:?} vs {ea:?}");
        assert!((p - ep).abs() <= 1e-12 * ep.abs(), "body {k}: {p} vs {ep}");
    }
}

#[test]
fn theta_half_is_close_to_direct_summation() {
    // Measured with theta 0.5 (seed 5, 1000 bodies): root mean square of
    // the relative force errors 5.9e-3; largest error 2.0e-2 of the root
    // mean square force (relative to its own force, the largest is 7.8e-2,
    // at a body near the centre where the forces nearly cancel). Bounds:
    // 5 times those.
    let eps2 = 0.05f64.powi(2);
    let (bodies, tree) = tree_forces(0.5, eps2);
    let exact = direct(&bodies, eps2);
    let n = bodies.len() as f64;
    let errs: Vec<f64> = tree
        .iter()
        .zip(&exact)
        .map(|((a, _), (ea, _))| norm([0, 1, 2].map(|d| a[d] - ea[d])))
        .collect();
    let rms_rel = (errs
        .iter()
        .zip(&exact)
        .map(|(e, (ea, _))| (e / norm(*ea)).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let rms_force = (exact.iter().map(|(a, _)| norm(*a).powi(2)).sum::<f64>() / n).sqrt();
    let worst = errs.iter().cloned().fold(0.0, f64::max) / rms_force;
    assert!(rms_rel < 3.0e-2, "rms relative error {rms_rel:e}");
    assert!(worst < 1.0e-1, "largest error {worst:e} of the rms force");
    // And the approximation is used: not every force is exact.
    assert!(
        worst > 1e-9,
        "theta 0.5 gave exact forces: no cell was taken whole"
    );
}

/// The bits of every position and velocity, in id order.
fn bits(r: &Report) -> Vec<u64> {
    r.bodies
        .iter()
        .flat_map(|b| b.pos.iter().chain(&b.vel).map(|x| x.to_bits()))
        .collect()
}

#[test]
fn same_bits_for_every_thread_kind_and_worker_count() {
    let cfg = |workers| Config {
        bodies: 700,
        steps: 20,
        workers,
        ..Config::default()
    };
    let reference = simulate(&cfg(1), &Std).unwrap();
    for workers in 1..=3 {
        let runs = [
            ("std", simulate(&cfg(workers), &Std).unwrap()),
            ("ferry", simulate(&cfg(workers), &Ferry::default()).unwrap()),
            // More workers than processors.
            (
                "ferry 1 processor",
                simulate(
                    &cfg(workers),
                    &Ferry {
                        processors: Some(1),
                    },
                )
                .unwrap(),
            ),
        ];
        for (kind, r) in &runs {
            assert!(
                bits(r) == bits(&reference),
                "{kind}, {workers} workers: other positions"
            );
            assert_eq!(r.start, reference.start, "{kind}, {workers} workers");
            assert_eq!(r.end, reference.end, "{kind}, {workers} workers");
        }
    }
}

#[test]
fn more_workers_than_bodies_still_run() {
    let cfg = Config {
        bodies: 5,
        steps: 3,
        workers: 8,
        ..Config::default()
    };
    let one = simulate(
        &Config {
            workers: 1,
            ..cfg.clone()
        },
        &Std,
    )
    .unwrap();
    let many = simulate(
        &cfg,
        &Ferry {
            processors: Some(2),
        },
    )
    .unwrap();
    assert!(bits(&one) == bits(&many));
}

#[test]
fn bad_settings_are_refused() {
    let ok = Config::default();
    let cases = [
        (
            Config {
                bodies: 1,
                ..ok.clone()
            },
            ConfigError::Bodies(1),
        ),
        (
            Config {
                bodies: 0,
                ..ok.clone()
            },
            ConfigError::Bodies(0),
        ),
        (
            Config {
                workers: 0,
                ..ok.clone()
            },
            ConfigError::Workers,
        ),
        (
            Config {
                theta: -0.1,
                ..ok.clone()
            },
            ConfigError::Theta(-0.1),
        ),
        (
            Config {
                dt: 0.0,
                ..ok.clone()
            },
            ConfigError::Dt(0.0),
        ),
        (
            Config {
                dt: f64::INFINITY,
                ..ok.clone()
            },
            ConfigError::Dt(f64::INFINITY),
        ),
        (
            Config {
                softening: 0.0,
                ..ok.clone()
            },
            ConfigError::Softening(0.0),
        ),
    ];
    for (cfg, want) in cases {
        match simulate(&cfg, &Std) {
            Err(Error::Config(e)) => {
                assert_eq!(e, want);
                assert!(!e.to_string().is_empty());
            }
            other => panic!("{cfg:?}: {other:?}"),
        }
    }
    // NaN compares unequal to itself: match the variant.
    let nan = Config {
        theta: f64::NAN,
        ..ok
    };
    assert!(
        matches!(simulate(&nan, &Std), Err(Error::Config(ConfigError::Theta(t))) if t.is_nan())
    );
}
