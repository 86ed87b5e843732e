//! One look at the runtime directory's `top/`: every page, read through
//! its sequence lock, checked, matched with its live process, and the rates
//! since the previous look.
//!
//! This file owns finding the pages, telling live from dead processes
//! (pid and start time, from `/proc`) and the rates; it must not draw or
//! print (`view`, `json`). A page is never trusted: one that does not read
//! back gives a [`Entry::Bad`] line; only a page that reads back whole and
//! names a process that is gone (its pid absent, or another start time) is
//! removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ferry::stats::{MappedPage, OpenError, Snapshot};

/// One page, as found.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A live process's page.
    Live(Box<Process>),
    /// A page that does not read back: its file name and why.
    Bad {
        /// The file name (a pid).
        page: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A live ferry process: its page and what this look adds.
#[derive(Debug, Clone)]
pub struct Process {
    /// What its runtime published.
    pub snap: Snapshot,
    /// Its CPU time so far (user + system, in clock ticks), from `/proc`.
    pub cpu_ticks: Option<u64>,
    /// Rates since the previous look at the same process, if there was one.
    pub rates: Option<Rates>,
}

/// Per-second rates between two looks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    /// The process's CPU use, in cores (1.0: one core busy).
    pub cpu: f64,
    /// Upcall events of every kind, per second.
    pub upcalls: f64,
    /// Per channel (in the page's order), calls per second.
    pub calls: Vec<f64>,
}

impl Process {
    /// Calls per second over all its channels (0 without rates).
    pub fn calls_per_s(&self) -> f64 {
        self.rates.as_ref().map_or(0.0, |r| r.calls.iter().sum())
    }

    /// CPU use in cores (0 without rates).
    pub fn cpu(&self) -> f64 {
        self.rates.as_ref().map_or(0.0, |r| r.cpu)
    }
}

/// What a look keeps for the next one's rates: per (pid, start), the
/// snapshot, the CPU ticks and when.
#[derive(Debug, Default)]
pub struct History {
    last: HashMap<(u32, u64), (Snapshot, Option<u64>, Instant)>,
}

/// Fields 3.. of `/proc/<pid>/stat` (after the command name, which may
/// hold spaces and parentheses).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The process's start time (field 22) and CPU ticks (fields 14 + 15), if
/// it lives.
fn proc_identity(pid: u32) -> Option<(u64, Option<u64>)> {
    let f = stat_fields(pid)?;
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let start = field(22)?;
    let cpu = field(14).zip(field(15)).map(|(u, s)| u + s);
    Some((start, cpu))
}

/// Reads one page file.
fn read_page(path: &Path) -> Result<Snapshot, String> {
    let page = MappedPage::open(path).map_err(|e| match e {
        OpenError::Io(e) => format!("cannot open: {e}"),
        OpenError::Page(e) => e.to_string(),
    })?;
    page.read().map_err(|e| e.to_string())
}

/// Looks at every page in `top` (the runtime directory's `top/`), removes
/// those of dead processes, and computes rates against `history` (which it
/// updates). Pages in name order; a missing directory is no process.
pub fn scan(top: &Path, history: &mut History) -> Vec<Entry> {
    let mut names: Vec<(u32, PathBuf, String)> = match std::fs::read_dir(top) {
        Ok(dir) => dir
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                // Only names that are pids: the writer's `.<pid>.new` and
                // anything else are not pages.
                let pid = name.parse::<u32>().ok().filter(|&p| p != 0)?;
                Some((pid, e.path(), name))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort_by_key(|n| n.0);
    let now = Instant::now();
    let ticks_per_s = rustix::param::clock_ticks_per_second() as f64;
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (pid, path, page) in names {
        let snap = match read_page(&path) {
            Ok(s) => s,
            Err(why) => {
                out.push(Entry::Bad { page, why });
                continue;
            }
        };
        if snap.pid != pid {
            let why = format!("the page names pid {}, its file {pid}", snap.pid);
            out.push(Entry::Bad { page, why });
            continue;
        }
        let live = proc_identity(pid).filter(|(start, _)| snap.start == 0 || *start == snap.start);
        let Some((_, cpu_ticks)) = live else {
            // Its process is gone (or the pid was reused): the runtime died
            // before it could remove its page.
            let _ = std::fs::remove_file(&path);
            continue;
        };
        let key = (pid, snap.start);
        let rates = history.last.get(&key).map(|(prev, prev_cpu, at)| {
            let dt = now.duration_since(*at).as_secs_f64().max(1e-3);
            let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
            let total = |s: &Snapshot| {
                let u = &s.upcalls;
                u.blocked + u.unblocked + u.preempted + u.processor_added + u.processor_removed
            };
            Rates {
                cpu: match (prev_cpu, cpu_ticks) {
                    (Some(a), Some(b)) => per_s(*a, b) / ticks_per_s,
                    _ => 0.0,
                },
                upcalls: per_s(total(prev), total(&snap)),
                calls: snap
                    .channels
                    .iter()
                    .map(|c| {
                        let before = prev
                            .channels
                            .iter()
                            .find(|p| p.kind == c.kind && p.name == c.name)
                            .map_or(c.calls, |p| p.calls);
                        per_s(before, c.calls)
                    })
                    .collect(),
            }
        });
        seen.insert(key, (snap.clone(), cpu_ticks, now));
        out.push(Entry::Live(Box::new(Process {
            snap,
            cpu_ticks,
            rates,
        })));
    }
    history.last = seen;
    out
}
