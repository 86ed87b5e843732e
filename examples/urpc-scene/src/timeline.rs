//! The scene's timeline: one line per call, in the order calls began, with
//! offsets in µs from the first call's start, and a bar that shows it in
//! flight at the editor (`-`) and running in its server (`#`). Then what
//! overlapped. Everything shown is measured; nothing is computed but
//! offsets, counts and medians.

use std::fmt::Write;

/// One call as the editor saw it, with the server's stamp.
#[derive(Debug, Clone)]
pub struct Call {
    /// Editor thread, 1-based (T1, T2, ... as in 001's Figure 1).
    pub thread: usize,
    /// Server short name.
    pub server: &'static str,
    /// Operation short name.
    pub op: &'static str,
    /// The editor began the call (CLOCK_MONOTONIC ns).
    pub start: u64,
    /// The editor had the reply.
    pub end: u64,
    /// The server's handler began.
    pub served_start: u64,
    /// The server's handler ended.
    pub served_end: u64,
    /// The server's ferry thread that ran it.
    pub served_by: u64,
}

/// Columns of the bars.
const BAR: usize = 48;

/// How many calls were in flight at the editor at `t` (started, not ended).
fn in_flight(calls: &[Call], t: u64) -> usize {
    calls.iter().filter(|c| c.start <= t && t < c.end).count()
}

/// The timeline and its summary as text.
pub fn render(calls: &[Call]) -> String {
    let mut calls = calls.to_vec();
    calls.sort_by_key(|c| c.start);
    let Some(origin) = calls.first().map(|c| c.start) else {
        return "no calls\n".into();
    };
    let span = calls.iter().map(|c| c.end).max().unwrap_or(origin) - origin;
    let us = |t: u64| (t.saturating_sub(origin)) as f64 / 1000.0;
    let col = |t: u64| {
        let off = t.saturating_sub(origin) as u128;
        ((off * BAR as u128) / u128::from(span.max(1))).min(BAR as u128 - 1) as usize
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6} {:<11} {:<5} {:>9} {:>9} {:>19} {:>9}  timeline ('-' in flight, '#' in the server)",
        "thread", "server", "op", "start µs", "end µs", "served µs", "in flight"
    );
    for c in &calls {
        let mut bar = [' '; BAR];
        for cell in &mut bar[col(c.start)..=col(c.end)] {
            *cell = '-';
        }
        // The server's clock is the same CLOCK_MONOTONIC; clamp to the
        // call for drawing only (the numbers are printed as measured).
        let (a, b) = (
            c.served_start.clamp(c.start, c.end),
            c.served_end.clamp(c.start, c.end),
        );
        for cell in &mut bar[col(a)..=col(b)] {
            *cell = '#';
        }
        let _ = writeln!(
            s,
            "T{:<5} {:<11} {:<5} {:>9.1} {:>9.1} {:>9.1}–{:<9.1} {:>9}  |{}|",
            c.thread,
            c.server,
            c.op,
            us(c.start),
            us(c.end),
            us(c.served_start),
            us(c.served_end),
            in_flight(&calls, c.start),
            bar.iter().collect::<String>()
        );
    }
    s.push('\n');
    s.push_str(&summary(&calls));
    s
}

/// Counts: calls that overlapped another, the most in flight at once (and
/// to how many servers), and median times.
pub fn summary(calls: &[Call]) -> String {
    let overlapped = calls
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            calls
                .iter()
                .enumerate()
                .any(|(j, b)| *i != j && a.start < b.end && b.start < a.end)
        })
        .count();
    let (most, at) = calls
        .iter()
        .map(|c| (in_flight(calls, c.start), c.start))
        .max_by_key(|&(n, _)| n)
        .unwrap_or((0, 0));
    let mut servers: Vec<&str> = calls
        .iter()
        .filter(|c| c.start <= at && at < c.end)
        .map(|c| c.server)
        .collect();
    servers.sort_unstable();
    servers.dedup();
    let median = |mut v: Vec<u64>| -> f64 {
        v.sort_unstable();
        v.get(v.len() / 2).map_or(0.0, |&ns| ns as f64 / 1000.0)
    };
    let round_trip = median(calls.iter().map(|c| c.end - c.start).collect());
    let in_server = median(
        calls
            .iter()
            .map(|c| c.served_end - c.served_start)
            .collect(),
    );
    let mut threads: Vec<(&str, u64)> = calls.iter().map(|c| (c.server, c.served_by)).collect();
    threads.sort_unstable();
    threads.dedup();
    format!(
        "{} calls; {overlapped} overlapped another call; at most {most} in flight at once \
         (to {}); median call {round_trip:.1} µs at the editor, of it {in_server:.1} µs in the \
         server's handler; server ferry threads used: {}\n",
        calls.len(),
        servers.join(" and "),
        threads.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(thread: usize, start: u64, end: u64) -> Call {
        Call {
            thread,
            server: "wm",
            op: "draw",
            start,
            end,
            served_start: start + 1,
            served_end: end - 1,
            served_by: thread as u64,
        }
    }

    #[test]
    fn overlaps_are_counted_from_the_times() {
        let calls = [
            call(1, 0, 10_000),
            call(2, 5_000, 20_000),
            call(1, 30_000, 40_000),
        ];
        let s = summary(&calls);
        assert!(
            s.starts_with("3 calls; 2 overlapped another call; at most 2 in flight"),
            "{s}"
        );
        let text = render(&calls);
        assert_eq!(text.lines().filter(|l| l.starts_with('T')).count(), 3);
        assert!(render(&[]).starts_with("no calls"));
    }
}
