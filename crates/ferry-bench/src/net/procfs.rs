//! What `net` reads about a server process from outside it: its CPU time
//! (`utime` + `stime` of `/proc/<pid>/stat`, all its threads) and its
//! kernel threads (`Threads:` of `/proc/<pid>/status`); and the descriptor
//! limit both processes of a run raise.
//!
//! This module owns the parsing of those files and the limit; when they
//! are read is the loader's.

use std::time::Duration;

use rustix::process::{Resource, getrlimit, setrlimit};

/// CPU time (user + system, all threads) of process `pid`.
pub fn cpu_time(pid: u32) -> Result<Duration, String> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let ticks = parse_stat_ticks(&stat)?;
    let per_second = rustix::param::clock_ticks_per_second();
    Ok(Duration::from_nanos(ticks * 1_000_000_000 / per_second))
}

/// `utime + stime` (clock ticks) of a `/proc/<pid>/stat` text.
pub fn parse_stat_ticks(stat: &str) -> Result<u64, String> {
    // The command name may contain spaces and parentheses: the fields
    // start after the last ')', with the state; utime and stime are the
    // 12th and 13th from there.
    let rest = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| format!("no command name in stat: {stat:?}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("bad stat field {i}: {stat:?}"))
    };
    Ok(tick(11)? + tick(12)?)
}

/// The kernel threads of process `pid` now.
pub fn threads(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    parse_threads(&status)
}

/// The `Threads:` count of a `/proc/<pid>/status` text.
pub fn parse_threads(status: &str) -> Result<u64, String> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .ok_or_else(|| "no Threads: line in status".to_owned())?;
    line.trim()
        .parse()
        .map_err(|_| format!("bad Threads: line: {line:?}"))
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit; the new
/// soft limit (`None`: unlimited).
pub fn raise_nofile() -> Result<Option<u64>, String> {
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit)
        .map_err(|e| format!("raising RLIMIT_NOFILE to {:?}: {e}", limit.maximum))?;
    Ok(limit.current)
}

/// An error unless `connections` sockets plus a margin fit under the soft
/// descriptor limit `limit`.
pub fn check_room(connections: usize, limit: Option<u64>) -> Result<(), String> {
    const MARGIN: u64 = 64;
    match limit {
        Some(n) if (connections as u64).saturating_add(MARGIN) > n => Err(format!(
            "{connections} connections need {} descriptors, RLIMIT_NOFILE is {n}",
            connections as u64 + MARGIN
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_gives_user_plus_system_ticks() {
        let stat = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 75 0 0 20 0 3 0 1000 12345 67 18446744073709551615";
        assert_eq!(parse_stat_ticks(stat), Ok(325));
        assert!(parse_stat_ticks("1234 no parens").is_err());
        assert!(parse_stat_ticks("1 (x) S 1 2 3").is_err());
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse_stat_ticks(&own).is_ok());
        assert!(cpu_time(std::process::id()).is_ok());
    }

    #[test]
    fn status_gives_threads() {
        assert_eq!(
            parse_threads("Name:\tx\nThreads:\t17\nVmRSS:\t1 kB\n"),
            Ok(17)
        );
        assert!(parse_threads("Name:\tx\n").is_err());
        assert!(parse_threads("Threads:\tmany\n").is_err());
        assert!(threads(std::process::id()).unwrap() >= 1);
        assert!(threads(u32::MAX).is_err());
    }

    #[test]
    fn room_for_connections() {
        assert!(check_room(10_000, Some(20_000)).is_ok());
        assert!(check_room(10_000, None).is_ok());
        let e = check_room(19_990, Some(20_000)).unwrap_err();
        assert!(e.contains("RLIMIT_NOFILE is 20000"), "{e}");
    }
}
