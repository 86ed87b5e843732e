//! The stats page's layout: 64-bit words at fixed indices, so that a reader
//! in another process (built from another version, perhaps) finds each
//! field without trusting anything but the header it checks.
//!
//! This file owns the layout ([`PAGE_SIZE`], [`PAGE_VERSION`], the word
//! indices), the figures it carries ([`Snapshot`] and its parts) and their
//! encoding and checked decoding ([`PageError`]). It must not map, write or
//! read shared memory itself (`seqlock`, `writer` and `mapped` do).
//!
//! | words | what |
//! |-------|------|
//! | 0 | magic: the bytes `FERRYTOP` |
//! | 1 | layout version ([`PAGE_VERSION`]) |
//! | 2 | the page's size in bytes ([`PAGE_SIZE`]) |
//! | 3 | the sequence word (`seqlock`) |
//! | 4.. | the data words, written under the sequence word: |
//! | +0..+32 | pid, start time, command name (2 words), processors, max processors, runnable, blocked, kernel threads, their bound, upcall event counts (5), writes, monotonic stamp (ns), allocation (registered, desired, cores, priority, credit), counts of cores, channels and logical threads, channels and logical threads beyond the lists, reserved |
//! | +32..+96 | per processor, the core its driver is pinned to (`u64::MAX`: none) |
//! | +96..+352 | [`MAX_CHANNELS`] channels of 8 words: kind, peers, calls, CPU (ns), name (32 bytes) |
//! | +352..+576 | [`MAX_LOGICAL`] logical threads of 14 words: origin pid, thread id, priority, CPU (ns), depth, reserved, hops (16 `u32`s) |

use std::fmt;

use crate::header::Priority;

/// The page's size in bytes: the file's length, fixed at creation.
pub const PAGE_SIZE: usize = 8192;
/// The layout's version: a reader refuses any other.
pub const PAGE_VERSION: u64 = 1;
/// The magic word: `FERRYTOP` in memory order.
pub const PAGE_MAGIC: u64 = u64::from_le_bytes(*b"FERRYTOP");
/// How many processors' cores the page names.
pub const MAX_CORES: usize = 64;
/// How many channels the page lists (servers and clients; more are cut).
pub const MAX_CHANNELS: usize = 32;
/// How many logical threads in calls the page lists (more are cut).
pub const MAX_LOGICAL: usize = 16;
/// How many processes a listed chain names at most.
pub const MAX_HOPS: usize = 16;
/// The longest channel name kept (longer ones are cut at a byte boundary
/// that keeps them UTF-8).
pub const MAX_NAME: usize = 32;

pub(crate) const MAGIC_AT: usize = 0;
pub(crate) const VERSION_AT: usize = 1;
pub(crate) const SIZE_AT: usize = 2;
pub(crate) const SEQ_AT: usize = 3;
/// The first data word.
pub(crate) const DATA_AT: usize = 4;

const CORES_AT: usize = 32;
const CHANNELS_AT: usize = CORES_AT + MAX_CORES;
const CHANNEL_WORDS: usize = 8;
const LOGICAL_AT: usize = CHANNELS_AT + MAX_CHANNELS * CHANNEL_WORDS;
const LOGICAL_WORDS: usize = 6 + MAX_HOPS / 2;
/// The data words (after the header).
pub(crate) const DATA_WORDS: usize = LOGICAL_AT + MAX_LOGICAL * LOGICAL_WORDS;

const _: () = assert!((DATA_AT + DATA_WORDS) * 8 <= PAGE_SIZE);

/// Upcall events delivered to the scheduling policy so far (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpcallCounts {
    /// Threads that blocked in the kernel while their processor went on.
    pub blocked: u64,
    /// Threads handed back after their processor was taken.
    pub unblocked: u64,
    /// Threads preempted.
    pub preempted: u64,
    /// Processors added.
    pub processor_added: u64,
    /// Processors removed.
    pub processor_removed: u64,
}

/// What the processor allocation daemon gave the process, while it is
/// registered with one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocation {
    /// Processors the process asks for.
    pub desired: u64,
    /// Cores the daemon granted.
    pub cores: u64,
    /// The priority the daemon gives it.
    pub priority: i64,
    /// Its credit with the daemon (thousandths of a processor).
    pub credit: i64,
}

/// Which end of a cross-process channel a process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// It serves an interface: calls counted are calls served.
    Server,
    /// It calls an interface: calls counted are calls made.
    Client,
}

/// One cross-process channel end, or one server with all its clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// Server or client.
    pub kind: ChannelKind,
    /// The interface name (cut at [`MAX_NAME`] bytes).
    pub name: String,
    /// A server: its bound clients; a client: the server's pid.
    pub peers: u64,
    /// Calls served or made so far (cumulative).
    pub calls: u64,
    /// A server: the run time its calls took, in ns (cumulative).
    pub cpu_ns: u64,
}

/// A logical thread in a call here: it began in another process (or
/// passes through one) and is served on an activation of this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalThread {
    /// The pid of the process it began in.
    pub origin: u32,
    /// Its thread's id there.
    pub thread: u64,
    /// The priority it runs at.
    pub priority: Priority,
    /// The run time charged to it before the call now served, in ns.
    pub cpu_ns: u64,
    /// The pids it visits, its origin first and this process last.
    pub chain: Vec<u32>,
}

/// One process's figures, as its runtime published them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The process.
    pub pid: u32,
    /// Its start time, in clock ticks since boot (`/proc/<pid>/stat` field
    /// 22): with the pid, names the process even when the pid is reused.
    pub start: u64,
    /// Its command name (at most 16 bytes).
    pub command: String,
    /// Processors the runtime holds.
    pub processors: u64,
    /// The most it may grow to.
    pub max_processors: u64,
    /// Per processor held, the core its driver is pinned to.
    pub cores: Vec<Option<u64>>,
    /// Threads running or waiting to: processors not asleep, plus threads
    /// waiting in the runtime's injector (a processor's own run queue is
    /// its owner's alone, so not counted).
    pub runnable: u64,
    /// Threads away in kernel calls whose processors were taken over.
    pub blocked: u64,
    /// Kernel threads of the runtime.
    pub kernel_threads: u64,
    /// Their bound.
    pub max_kernel_threads: u64,
    /// Upcall events so far.
    pub upcalls: UpcallCounts,
    /// How many times the page was written.
    pub writes: u64,
    /// The writer's monotonic clock at its last write, in ns.
    pub stamp_ns: u64,
    /// The allocation daemon's grant, if the process is registered.
    pub allocation: Option<Allocation>,
    /// Cross-process channels (at most [`MAX_CHANNELS`]).
    pub channels: Vec<Channel>,
    /// Logical threads in calls here (at most [`MAX_LOGICAL`]).
    pub logical: Vec<LogicalThread>,
    /// Channels the process has beyond those listed.
    pub channels_dropped: u64,
    /// Logical threads in calls here beyond those listed.
    pub logical_dropped: u64,
}

/// Why a page was refused: every field of another process's page is
/// checked before it is believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    /// The file is shorter than the page.
    TooShort(u64),
    /// The magic word is wrong: not a stats page.
    BadMagic(u64),
    /// Another layout version.
    BadVersion(u64),
    /// The size word disagrees with [`PAGE_SIZE`].
    BadSize(u64),
    /// A count is over its bound.
    BadCount {
        /// Which count.
        what: &'static str,
        /// Its value.
        count: u64,
    },
    /// A value out of its range.
    BadValue(&'static str),
    /// Every read overlapped a write (or a write never finished).
    Busy,
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::TooShort(n) => write!(f, "the file is {n} bytes, shorter than a page"),
            PageError::BadMagic(m) => write!(f, "not a stats page (magic {m:#018x})"),
            PageError::BadVersion(v) => write!(f, "layout version {v}, not {PAGE_VERSION}"),
            PageError::BadSize(s) => write!(f, "size word {s}, not {PAGE_SIZE}"),
            PageError::BadCount { what, count } => write!(f, "{count} {what}: over the bound"),
            PageError::BadValue(what) => write!(f, "{what} out of range"),
            PageError::Busy => write!(f, "the page never held still (a write under way)"),
        }
    }
}

impl std::error::Error for PageError {}

/// Checks the header words (magic, version, size).
pub(crate) fn check_header(magic: u64, version: u64, size: u64) -> Result<(), PageError> {
    if magic != PAGE_MAGIC {
        return Err(PageError::BadMagic(magic));
    }
    if version != PAGE_VERSION {
        return Err(PageError::BadVersion(version));
    }
    if size != PAGE_SIZE as u64 {
        return Err(PageError::BadSize(size));
    }
    Ok(())
}

fn put_bytes(out: &mut [u64], bytes: &[u8]) {
    for (i, w) in out.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = bytes.get(i * 8 + j).copied().unwrap_or(0);
        }
        *w = u64::from_le_bytes(b);
    }
}

fn get_bytes(words: &[u64]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn priority_word(p: Priority) -> u64 {
    match p {
        Priority::Low => 0,
        Priority::Normal => 1,
        Priority::High => 2,
    }
}

/// Writes `s` into the data words `out` (lists cut at their bounds).
pub(crate) fn encode(s: &Snapshot, out: &mut [u64; DATA_WORDS]) {
    out.fill(0);
    let ncores = s.cores.len().min(MAX_CORES);
    let nchan = s.channels.len().min(MAX_CHANNELS);
    let nlog = s.logical.len().min(MAX_LOGICAL);
    let u = &s.upcalls;
    let a = s.allocation;
    let head = [
        u64::from(s.pid),
        s.start,
        0,
        0,
        s.processors,
        s.max_processors,
        s.runnable,
        s.blocked,
        s.kernel_threads,
        s.max_kernel_threads,
        u.blocked,
        u.unblocked,
        u.preempted,
        u.processor_added,
        u.processor_removed,
        s.writes,
        s.stamp_ns,
        u64::from(a.is_some()),
        a.map_or(0, |a| a.desired),
        a.map_or(0, |a| a.cores),
        a.map_or(0, |a| a.priority as u64),
        a.map_or(0, |a| a.credit as u64),
        ncores as u64,
        nchan as u64,
        nlog as u64,
        s.channels_dropped
            .saturating_add((s.channels.len() - nchan) as u64),
        s.logical_dropped
            .saturating_add((s.logical.len() - nlog) as u64),
    ];
    out[..head.len()].copy_from_slice(&head);
    put_bytes(&mut out[2..4], cut(&s.command, 16).as_bytes());
    for (i, c) in s.cores.iter().take(ncores).enumerate() {
        out[CORES_AT + i] = c.unwrap_or(u64::MAX);
    }
    for (i, c) in s.channels.iter().take(nchan).enumerate() {
        let w = &mut out[CHANNELS_AT + i * CHANNEL_WORDS..][..CHANNEL_WORDS];
        w[0] = match c.kind {
            ChannelKind::Server => 1,
            ChannelKind::Client => 2,
        };
        w[1] = c.peers;
        w[2] = c.calls;
        w[3] = c.cpu_ns;
        put_bytes(&mut w[4..8], cut(&c.name, MAX_NAME).as_bytes());
    }
    for (i, l) in s.logical.iter().take(nlog).enumerate() {
        let w = &mut out[LOGICAL_AT + i * LOGICAL_WORDS..][..LOGICAL_WORDS];
        let hops = &l.chain[..l.chain.len().min(MAX_HOPS)];
        w[0] = u64::from(l.origin);
        w[1] = l.thread;
        w[2] = priority_word(l.priority);
        w[3] = l.cpu_ns;
        w[4] = hops.len() as u64;
        for (k, pair) in hops.chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0);
            w[6 + k] = u64::from(pair[0]) | u64::from(hi) << 32;
        }
    }
}

fn count(w: u64, max: usize, what: &'static str) -> Result<usize, PageError> {
    match usize::try_from(w) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(PageError::BadCount { what, count: w }),
    }
}

/// Reads a snapshot out of data words copied whole from a page whose
/// header checked out; refuses counts over their bounds and values out of
/// range.
pub(crate) fn decode(d: &[u64; DATA_WORDS]) -> Result<Snapshot, PageError> {
    let pid = u32::try_from(d[0])
        .ok()
        .filter(|&p| p != 0)
        .ok_or(PageError::BadValue("pid"))?;
    let ncores = count(d[22], MAX_CORES, "cores")?;
    let nchan = count(d[23], MAX_CHANNELS, "channels")?;
    let nlog = count(d[24], MAX_LOGICAL, "logical threads")?;
    let allocation = match d[17] {
        0 => None,
        1 => Some(Allocation {
            desired: d[18],
            cores: d[19],
            priority: d[20] as i64,
            credit: d[21] as i64,
        }),
        _ => return Err(PageError::BadValue("the registered flag")),
    };
    let cores = d[CORES_AT..][..ncores]
        .iter()
        .map(|&c| (c != u64::MAX).then_some(c))
        .collect();
    let mut channels = Vec::with_capacity(nchan);
    for i in 0..nchan {
        let w = &d[CHANNELS_AT + i * CHANNEL_WORDS..][..CHANNEL_WORDS];
        let kind = match w[0] {
            1 => ChannelKind::Server,
            2 => ChannelKind::Client,
            _ => return Err(PageError::BadValue("a channel's kind")),
        };
        channels.push(Channel {
            kind,
            name: get_bytes(&w[4..8]),
            peers: w[1],
            calls: w[2],
            cpu_ns: w[3],
        });
    }
    let mut logical = Vec::with_capacity(nlog);
    for i in 0..nlog {
        let w = &d[LOGICAL_AT + i * LOGICAL_WORDS..][..LOGICAL_WORDS];
        let priority = match w[2] {
            0 => Priority::Low,
            1 => Priority::Normal,
            2 => Priority::High,
            _ => return Err(PageError::BadValue("a logical thread's priority")),
        };
        let depth = count(w[4], MAX_HOPS, "hops in a chain")?;
        let chain = (0..depth)
            .map(|k| (w[6 + k / 2] >> (32 * (k % 2))) as u32)
            .collect();
        logical.push(LogicalThread {
            origin: u32::try_from(w[0]).map_err(|_| PageError::BadValue("an origin pid"))?,
            thread: w[1],
            priority,
            cpu_ns: w[3],
            chain,
        });
    }
    Ok(Snapshot {
        pid,
        start: d[1],
        command: get_bytes(&d[2..4]),
        processors: d[4],
        max_processors: d[5],
        cores,
        runnable: d[6],
        blocked: d[7],
        kernel_threads: d[8],
        max_kernel_threads: d[9],
        upcalls: UpcallCounts {
            blocked: d[10],
            unblocked: d[11],
            preempted: d[12],
            processor_added: d[13],
            processor_removed: d[14],
        },
        writes: d[15],
        stamp_ns: d[16],
        allocation,
        channels,
        logical,
        channels_dropped: d[25],
        logical_dropped: d[26],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            pid: 4242,
            start: 987_654,
            command: "gravity".into(),
            processors: 3,
            max_processors: 4,
            cores: vec![Some(0), None, Some(7)],
            runnable: 5,
            blocked: 1,
            kernel_threads: 9,
            max_kernel_threads: 1024,
            upcalls: UpcallCounts {
                blocked: 10,
                unblocked: 9,
                preempted: 8,
                processor_added: 2,
                processor_removed: 1,
            },
            writes: 77,
            stamp_ns: 123_456_789,
            allocation: Some(Allocation {
                desired: 4,
                cores: 2,
                priority: -1,
                credit: -250,
            }),
            channels: vec![
                Channel {
                    kind: ChannelKind::Server,
                    name: "tour-echo".into(),
                    peers: 2,
                    calls: 1_000_000,
                    cpu_ns: 55,
                },
                Channel {
                    kind: ChannelKind::Client,
                    name: "x".repeat(40),
                    peers: 17,
                    calls: 3,
                    cpu_ns: 0,
                },
            ],
            logical: vec![LogicalThread {
                origin: 17,
                thread: 3,
                priority: Priority::High,
                cpu_ns: 999,
                chain: vec![17, 18, 4242],
            }],
            channels_dropped: 2,
            logical_dropped: 0,
        }
    }

    #[test]
    fn a_snapshot_survives_the_page_with_long_names_cut() {
        let s = sample();
        let mut words = [0u64; DATA_WORDS];
        encode(&s, &mut words);
        let back = decode(&words).unwrap();
        let mut want = s;
        want.channels[1].name = "x".repeat(MAX_NAME);
        assert_eq!(back, want);
    }

    #[test]
    fn lists_over_their_bounds_are_cut_when_written_and_say_how_much() {
        let mut s = sample();
        s.logical = vec![s.logical[0].clone(); MAX_LOGICAL + 5];
        s.logical[0].chain = (1..=20).collect();
        s.channels = vec![s.channels[0].clone(); MAX_CHANNELS + 3];
        let mut words = [0u64; DATA_WORDS];
        encode(&s, &mut words);
        let back = decode(&words).unwrap();
        assert_eq!(back.logical.len(), MAX_LOGICAL);
        assert_eq!(back.logical_dropped, 5);
        assert_eq!(back.channels.len(), MAX_CHANNELS);
        // The sample had 2 not listed already.
        assert_eq!(back.channels_dropped, 2 + 3);
        assert_eq!(back.logical[0].chain, (1..=16).collect::<Vec<u32>>());
    }

    #[test]
    fn counts_and_values_out_of_range_are_refused() {
        let mut words = [0u64; DATA_WORDS];
        encode(&sample(), &mut words);
        let cases: [(usize, u64, PageError); 5] = [
            (
                22,
                65,
                PageError::BadCount {
                    what: "cores",
                    count: 65,
                },
            ),
            (
                23,
                u64::MAX,
                PageError::BadCount {
                    what: "channels",
                    count: u64::MAX,
                },
            ),
            (
                24,
                17,
                PageError::BadCount {
                    what: "logical threads",
                    count: 17,
                },
            ),
            (17, 2, PageError::BadValue("the registered flag")),
            (0, 0, PageError::BadValue("pid")),
        ];
        for (at, v, err) in cases {
            let mut w = words;
            w[at] = v;
            assert_eq!(decode(&w), Err(err));
        }
        let mut w = words;
        w[CHANNELS_AT] = 9;
        assert_eq!(decode(&w), Err(PageError::BadValue("a channel's kind")));
        let mut w = words;
        w[LOGICAL_AT + 4] = 17;
        assert_eq!(
            decode(&w),
            Err(PageError::BadCount {
                what: "hops in a chain",
                count: 17
            })
        );
    }

    #[test]
    fn the_header_is_checked_word_by_word() {
        let size = PAGE_SIZE as u64;
        assert_eq!(check_header(PAGE_MAGIC, PAGE_VERSION, size), Ok(()));
        assert_eq!(
            check_header(1, PAGE_VERSION, size),
            Err(PageError::BadMagic(1))
        );
        assert_eq!(
            check_header(PAGE_MAGIC, 2, size),
            Err(PageError::BadVersion(2))
        );
        assert_eq!(
            check_header(PAGE_MAGIC, PAGE_VERSION, 4096),
            Err(PageError::BadSize(4096))
        );
    }
}
