//! Tests of `scale`'s non-timing logic.

use super::*;

#[test]
fn status_gives_resident_plus_page_tables() {
    let status = "Name:\tx\nVmRSS:\t    2048 kB\nVmPTE:\t      12 kB\nThreads:\t1\n";
    assert_eq!(parse_status(status), Ok((2048 + 12) * 1024));
    assert!(parse_status("VmRSS:\t1 kB\n").is_err());
    assert!(parse_status("VmRSS:\tx kB\nVmPTE:\t1 kB\n").is_err());
    assert!(parse_status("VmRSS:\t1 MB\nVmPTE:\t1 kB\n").is_err());
}

#[test]
fn go_output_is_parsed_and_checked() {
    let s = peers::parse_go("spawn_ns 300.5\njoin_ns 120.25\nbytes 2774.71\n", 10).unwrap();
    assert_eq!(
        s,
        Sample {
            n: 10,
            spawn_ns: 300.5,
            join_ns: 120.25,
            bytes: Some(2774.71)
        }
    );
    assert!(peers::parse_go("spawn_ns 1\njoin_ns 2\n", 10).is_err());
    assert!(peers::parse_go("spawn_ns 1\njoin_ns 2\nbytes 3\nbytes 4\n", 10).is_err());
    assert!(peers::parse_go("spawn_ns 1\njoin_ns x\nbytes 3\n", 10).is_err());
    assert!(peers::parse_go("spawn_ns 1\njoin_ns NaN\nbytes 3\n", 10).is_err());
    assert!(peers::parse_go("spawn_ns 1 2\n", 10).is_err());
    assert!(peers::parse_go("other 1\n", 10).is_err());
}

#[test]
fn a_sample_is_per_thread() {
    let s = Sample::new(
        4,
        Duration::from_nanos(400),
        Duration::from_nanos(80),
        Some((1000, 5000)),
    );
    assert_eq!(
        (s.spawn_ns, s.join_ns, s.bytes),
        (100.0, 20.0, Some(1000.0))
    );
    assert_eq!(count_label(10_000), "10k");
    assert_eq!(count_label(1_000_000), "1M");
    assert_eq!(count_label(1_500), "1500");
}

fn sample(spawn_ns: f64, join_ns: f64, bytes: Option<f64>) -> Sample {
    Sample {
        n: 10,
        spawn_ns,
        join_ns,
        bytes,
    }
}

#[test]
fn report_has_rows_ratios_absent_reasons_and_goals() {
    let mut found: Found = HashMap::new();
    let n = COUNTS[0];
    found.insert(
        (n, System::Ferry(1)),
        Ok(vec![sample(100.0, 50.0, Some(9000.0)); 3]),
    );
    found.insert(
        (n, System::Go(1)),
        Ok(vec![sample(200.0, 40.0, Some(3000.0)); 3]),
    );
    found.insert((n, System::Ferry(2)), Err("spawn failed".into()));
    found.insert((n, System::Tokio), Ok(vec![sample(80.0, 30.0, None); 3]));
    let mut idle: IdleFound = HashMap::new();
    idle.insert(System::Ferry(2), Ok(vec![30.0, 10.0, 20.0]));
    idle.insert(System::Go(2), Err("go build failed".into()));
    let r = report(&COUNTS, &found, &idle, &std::env::temp_dir());
    assert_eq!(r.sections.len(), 3);
    let time = &r.sections[0];
    assert_eq!(time.rows.len(), COUNTS.len() * 2 * SYSTEMS.len());
    let find = |rows: &[Row], case: &str, system: &str| {
        rows.iter()
            .find(|r| r.case == case && r.system == system)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        find(&time.rows, "spawn+block N=10k", "ferry P=1").median(),
        Some(100.0)
    );
    assert_eq!(
        find(&time.rows, "wake+join N=10k", "go P=1").median(),
        Some(40.0)
    );
    assert_eq!(
        find(&time.rows, "wake+join N=10k", "ferry P=2").absent_reason(),
        Some("spawn failed")
    );
    assert_eq!(
        find(&time.rows, "spawn+block N=100k", "go P=1").absent_reason(),
        Some("not run")
    );
    assert!(
        time.notes
            .contains("spawn+block N=10k: ferry P=1 <= go P=1: 0.50x (met)"),
        "{}",
        time.notes
    );
    assert!(
        time.notes
            .contains("wake+join N=10k: ferry P=1 <= go P=1: 1.25x (not met)"),
        "{}",
        time.notes
    );
    assert!(
        time.notes
            .contains("ferry P=2 <= go P=2: not measured (not met)"),
        "{}",
        time.notes
    );
    let memory = &r.sections[1];
    assert!(
        memory
            .rows
            .iter()
            .all(|r| r.system != "tokio" && r.unit == Unit::Bytes)
    );
    assert_eq!(
        find(&memory.rows, "blocked N=10k", "ferry P=1").median(),
        Some(9000.0)
    );
    assert!(
        memory
            .notes
            .contains("blocked N=10k: ferry P=1 <= go P=1: 3.00x (not met)"),
        "{}",
        memory.notes
    );
    assert!(memory.notes.contains("N=1M left out"));
    let quiet = &r.sections[2];
    let case = "idle 10k threads + 10k sockets";
    assert_eq!(find(&quiet.rows, case, "ferry P=2").median(), Some(20.0));
    assert_eq!(
        find(&quiet.rows, case, "go P=2").absent_reason(),
        Some("go build failed")
    );
    assert!(
        quiet
            .notes
            .contains("ferry P=2 <= 1000 us/s (0.1% of one CPU): 20 (met)"),
        "{}",
        quiet.notes
    );
    let text = r.text();
    assert!(
        text.contains("vs go P=1") && text.contains("0.50x"),
        "{text}"
    );
}

#[test]
fn a_schedstat_line_gives_its_run_time() {
    assert_eq!(
        idle::parse_schedstat("184379305 406402 31\n"),
        Ok(184_379_305)
    );
    assert!(idle::parse_schedstat("").is_err());
    assert!(idle::parse_schedstat("x 1 2").is_err());
}

#[test]
fn lateness_is_summarised_and_its_lines_round_trip() {
    let tick = sleepers::TICK_NS;
    let late: Vec<u64> = (0..100).map(|i| i * 1_000).collect();
    let l = sleepers::Lateness::of(late).unwrap();
    assert_eq!(
        (l.p50_ns, l.p99_ns, l.max_ns),
        (49_000.0, 98_000.0, 99_000.0)
    );
    // 0, 1,000, ..., 65,000 ns are within the tick of 65,536 ns.
    assert_eq!(l.in_tick, 66.0 / 100.0);
    assert!(tick > 65_000 && tick < 66_000);
    assert_eq!(sleepers::Lateness::parse(&l.lines(), "x"), Ok(l));
    assert!(sleepers::Lateness::of(Vec::new()).is_none());
    assert!(sleepers::Lateness::parse("p50_ns 1\np99_ns 2\nmax_ns 3\n", "x").is_err());
    assert!(
        sleepers::Lateness::parse("p50_ns 1\np99_ns 2\nmax_ns 3\nin_tick 1\nin_tick 1\n", "x")
            .is_err()
    );
    assert!(sleepers::Lateness::parse("p50_ns -1\np99_ns 2\nmax_ns 3\nin_tick 1\n", "x").is_err());
    assert!(sleepers::Lateness::parse("p50 1\n", "x").is_err());
}

#[test]
fn every_system_sleeps_the_same_random_delays_of_1_to_100_ms() {
    // The Go program's delay(i) gives the same sequence: its first three
    // values, in us, as the Go program's arithmetic prints them.
    let first: Vec<Duration> = (0..3).map(sleepers::delay).collect();
    assert_eq!(
        first,
        [31_795, 20_385, 42_388].map(Duration::from_micros).to_vec()
    );
    let d: Vec<Duration> = (0..100).map(sleepers::delay).collect();
    assert!(
        d.iter()
            .all(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_millis(100))
    );
    assert!(d.windows(2).any(|w| w[0] != w[1]));
}

#[test]
fn the_timers_section_has_a_row_per_system_and_two_goals_per_processor_count() {
    let mut found: SleepFound = HashMap::new();
    let l = |p99: f64, in_tick: f64| sleepers::Lateness {
        p50_ns: p99 / 2.0,
        p99_ns: p99,
        max_ns: p99 * 2.0,
        in_tick,
    };
    found.insert((10_000, System::Ferry(1)), Ok(vec![l(30_000.0, 1.0)]));
    found.insert((10_000, System::Ferry(2)), Ok(vec![l(90_000.0, 0.9)]));
    found.insert((10_000, System::Go(1)), Ok(vec![l(60_000.0, 0.5)]));
    found.insert((10_000, System::Go(2)), Ok(vec![l(60_000.0, 0.5)]));
    found.insert((10_000, System::Tokio), Err("no runtime".into()));
    let s = sleepers::section(&[10_000], &found);
    assert_eq!(s.rows.len(), SYSTEMS.len());
    assert!(s.rows[4].absent.is_some());
    assert!(s.notes.contains("sleep N=10k, ferry P=1: every sleeper wakes within a tick (65 us) of its deadline: 100.00% (met)"), "{}", s.notes);
    assert!(
        s.notes.contains(
            "ferry P=2: every sleeper wakes within a tick (65 us) of its deadline: 90.00% (not met)"
        ),
        "{}",
        s.notes
    );
    assert!(
        s.notes
            .contains("p99 lateness: ferry P=1 <= go P=1: 0.50x (met)"),
        "{}",
        s.notes
    );
    assert!(
        s.notes
            .contains("p99 lateness: ferry P=2 <= go P=2: 1.50x (not met)"),
        "{}",
        s.notes
    );
}
