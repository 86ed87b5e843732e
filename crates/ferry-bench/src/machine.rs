//! How busy the rest of the machine was while an experiment ran, read from
//! `/proc/stat` (all CPUs) and `/proc/self/stat` (this process, and the
//! children it ran and waited for).
//!
//! This module owns the noise check: a benchmark on a 2-core machine is only
//! as good as the absence of other work on those cores, so every experiment
//! reports how many CPUs other processes (and the hypervisor, as steal time)
//! took during its run, and [`describe`] says where and when a run was
//! taken, for the results pages.

use std::fs;

/// CPU time counters at one instant, in kernel clock ticks (`USER_HZ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSnapshot {
    /// All ticks of all CPUs, idle included.
    total: u64,
    /// Non-idle ticks of all CPUs, steal excluded.
    busy: u64,
    /// Ticks the hypervisor gave to someone else.
    steal: u64,
    /// User + system ticks of this process and of the children it waited
    /// for (the bench's own C and Go programs, which are not "others").
    own: u64,
}

/// What happened between two snapshots, in CPUs (1.0 = one CPU fully busy
/// for the whole interval).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interference {
    /// CPUs used by other processes and the kernel on their behalf.
    pub others: f64,
    /// CPUs lost to the hypervisor.
    pub steal: f64,
    /// CPUs in the machine.
    pub cpus: usize,
}

impl CpuSnapshot {
    /// Reads the counters now; `None` if `/proc` is unreadable or unexpected.
    pub fn now() -> Option<CpuSnapshot> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let own = fs::read_to_string("/proc/self/stat").ok()?;
        CpuSnapshot::parse(&stat, &own)
    }

    fn parse(proc_stat: &str, self_stat: &str) -> Option<CpuSnapshot> {
        // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
        let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        if f.len() < 8 {
            return None;
        }
        let (user, nice, system, idle, iowait, irq, softirq, steal) =
            (f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);
        // guest time is already counted in user, so it is not added again.
        let busy = user + nice + system + irq + softirq;
        let total = busy + idle + iowait + steal;
        // The command name may contain spaces: fields start after the last ')'.
        // Then: state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime, i.e. utime and stime are the
        // 12th and 13th, the waited-for children's the 14th and 15th.
        let rest = &self_stat[self_stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
        let own = ticks(11)? + ticks(12)? + ticks(13)? + ticks(14)?;
        Some(CpuSnapshot {
            total,
            busy,
            steal,
            own,
        })
    }

    /// Interference from `self` (earlier) to `later`; `None` if no time passed.
    pub fn interference_until(&self, later: &CpuSnapshot, cpus: usize) -> Option<Interference> {
        let total = later.total.checked_sub(self.total)?;
        if total == 0 || cpus == 0 {
            return None;
        }
        let busy = later.busy.saturating_sub(self.busy);
        let own = later.own.saturating_sub(self.own);
        let steal = later.steal.saturating_sub(self.steal);
        let per_cpu = total as f64 / cpus as f64;
        Some(Interference {
            others: busy.saturating_sub(own) as f64 / per_cpu,
            steal: steal as f64 / per_cpu,
            cpus,
        })
    }
}

impl Interference {
    /// True if others took enough CPU (a tenth of one) to distort cross-core
    /// timings.
    pub fn is_noisy(&self) -> bool {
        self.others + self.steal > 0.1
    }
}

/// Number of CPUs the machine has online (not only those we may use).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How busy the rest of the machine was from `before` until now.
pub fn interference_since(before: Option<CpuSnapshot>) -> Option<Interference> {
    let cpus = online_cpus();
    before
        .zip(CpuSnapshot::now())
        .and_then(|(a, b)| a.interference_until(&b, cpus))
}

/// Prints on stderr how much CPU other processes (and steal) took during
/// the run of `experiment`, with a warning when that disturbed it.
pub fn report_interference(experiment: &str, during: Option<Interference>) {
    let Some(i) = during else { return };
    eprintln!(
        "ferry-bench {experiment}: other processes used {:.2} of {} CPUs during the run, steal {:.2}{}",
        i.others,
        i.cpus,
        i.steal,
        if i.is_noisy() {
            " -- WARNING: results are disturbed, rerun on a quiet machine"
        } else {
            ""
        }
    );
}

/// Where and when a run was taken, for a results page: CPU model and
/// count, kernel, the commit of the code, the date (UTC), and how busy
/// other processes kept the machine meanwhile.
pub fn describe(during: Option<Interference>) -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned());
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "?".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = civil_date(days);
    let noise = during.map_or_else(
        || "other processes: not measured".to_owned(),
        |i| {
            format!(
                "other processes used {:.2} of {} CPUs during the run, steal {:.2}{}",
                i.others,
                i.cpus,
                i.steal,
                if i.is_noisy() { " (disturbed)" } else { "" }
            )
        },
    );
    format!(
        "{cpu}, {} CPUs, Linux {kernel}; commit {commit}, {y:04}-{m:02}-{d:02}; {noise}",
        online_cpus()
    )
}

/// The (year, month, day) of `days` since 1970-01-01 (proleptic
/// Gregorian; Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELF_STAT: &str =
        "4242 (ferry bench) R 1 2 3 0 -1 4194304 100 0 0 0 250 50 30 10 20 0 3 0";

    #[test]
    fn parses_proc_stat_and_self_stat() {
        let stat = "cpu  100 5 20 1000 7 1 2 3 0 0\ncpu0 50 2 10 500 3 0 1 1 0 0\n";
        let s = CpuSnapshot::parse(stat, SELF_STAT).unwrap();
        assert_eq!(s.busy, 100 + 5 + 20 + 1 + 2);
        assert_eq!(s.total, 128 + 1000 + 7 + 3);
        assert_eq!(s.steal, 3);
        // utime + stime, and the waited-for children's cutime + cstime.
        assert_eq!(s.own, 250 + 50 + 30 + 10);
    }

    #[test]
    fn interference_subtracts_own_time() {
        // 2 CPUs, 200 ticks each: 400 total. 300 busy, 200 of it ours.
        let a = CpuSnapshot {
            total: 0,
            busy: 0,
            steal: 0,
            own: 0,
        };
        let b = CpuSnapshot {
            total: 400,
            busy: 300,
            steal: 20,
            own: 200,
        };
        let i = a.interference_until(&b, 2).unwrap();
        assert_eq!(i.others, 0.5);
        assert_eq!(i.steal, 0.1);
        assert!(i.is_noisy());
        assert_eq!(a.interference_until(&a, 2), None);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(20_417), (2025, 11, 25));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
    }

    #[test]
    fn reads_this_machine() {
        let a = CpuSnapshot::now().expect("/proc is readable on Linux");
        assert!(a.total > 0 && a.busy <= a.total);
    }
}
