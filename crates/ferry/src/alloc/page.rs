//! The page a processor allocation daemon shares with one registered
//! process: 004 §3's per-task words (desired, count, fair_share, credit,
//! priority), the cores the process owns, the order and acknowledgement
//! generations, a willing-to-yield word per processor, and a fenced flag.
//!
//! Owns the page's layout ([`Page`], `#[repr(C)]`, [`PAGE_LEN`] bytes, in
//! a memfd the daemon makes and seals) and every access to it: the
//! daemon's ([`Page::init`], [`Page::runtime_words`], [`Page::publish_order`],
//! [`Page::set_fenced`]) and the runtime's (crate-private). It must not
//! trust a word the other side writes: the daemon copies the runtime's
//! words out and judges them ([`RuntimeWords::check`]: clamped, or
//! [`Malformed`]); the runtime clamps the cores it is given to its own
//! processors and affinity mask. The order protocol's orderings are in
//! `protocol`.
//!
//! | offset | word | written by | when, ordering | the reader's check |
//! |--------|------|------------|----------------|--------------------|
//! | 0 | `magic` `ferryALC`, `version` | the daemon | once, before the memfd is sent | the runtime refuses a page without them; the daemon fences a page whose copies changed |
//! | 12 | `fenced` | the daemon | when it fences or lets go (Relaxed) | shown only |
//! | 16 | `order` | the daemon | sequence word around `cores` (see `protocol`); futex word | the runtime takes only an even, unchanged generation |
//! | 20 | `count`, `fair_share`, `priority`, `credit` | the daemon | before the order's final store (Relaxed) | shown only; the runtime acts on `cores` |
//! | 40 | `ordered_at` | the daemon | before the order's final store (Relaxed): `CLOCK_MONOTONIC` ns of the order | only timestamps the processor change (an age over a second or in the future counts as none) |
//! | 64 | `max_processors` | the runtime | once, at registration (Relaxed) | clamped to `1..=MAX_CORES` |
//! | 68 | `desired` | the runtime | when its runnable work changes by a processor (Relaxed) | clamped to `1..=` cores and `max_processors` |
//! | 72 | `acked` | the runtime | after following an order (Release) | [`check_ack`]: odd or not issued since the last accepted one is malformed |
//! | 76 | `held` | the runtime | after following an order (Relaxed) | shown only |
//! | 128 | `cores[16]` | the daemon | inside the order's sequence (Relaxed) | the runtime skips cores outside its mask and beyond its processors |
//! | 256 | `willing[256]` | processor `i` of the runtime | 1 before it parks, 0 when it wakes (Relaxed) | anything but 0 or 1 is malformed |
//!
//! The daemon reads the runtime's words at each of its ticks and whenever
//! it recomputes; a word that is out of range but meaningful (a huge
//! `desired`) is clamped, one that cannot mean anything (a garbage
//! `willing` word, an `acked` ahead of the orders, a changed magic) makes
//! [`RuntimeWords::check`] return [`Malformed`], and the daemon fences the
//! process.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};
use std::time::Duration;

use super::cores::{CORE_WORDS, CoreSet, MAX_CORES};
use super::protocol::{self, Ack, check_ack};

/// The page's length in bytes.
pub const PAGE_LEN: usize = 4096;

/// The first word of a page: `ferryALC`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ferryALC");

/// The page layout's version.
pub const VERSION: u32 = 2;

/// Processors with a willing-to-yield word (processor indices below this).
pub const MAX_WILLING: usize = 256;

/// The shared page; see the module docs for who writes each word.
#[repr(C)]
pub struct Page {
    magic: AtomicU64,
    version: AtomicU32,
    fenced: AtomicU32,
    order: AtomicU32,
    count: AtomicU32,
    fair_share: AtomicU32,
    priority: AtomicU32,
    credit: AtomicI64,
    ordered_at: AtomicU64,
    _daemon_rest: [AtomicU64; 2],
    max_processors: AtomicU32,
    desired: AtomicU32,
    acked: AtomicU32,
    held: AtomicU32,
    _runtime_rest: [AtomicU64; 6],
    cores: [AtomicU64; CORE_WORDS],
    willing: [AtomicU32; MAX_WILLING],
    _rest: [AtomicU64; (PAGE_LEN - 256 - 4 * MAX_WILLING) / 8],
}

const _: () = assert!(size_of::<Page>() == PAGE_LEN);
const _: () = assert!(std::mem::offset_of!(Page, ordered_at) == 40);
const _: () = assert!(std::mem::offset_of!(Page, max_processors) == 64);
const _: () = assert!(std::mem::offset_of!(Page, cores) == 128);
const _: () = assert!(std::mem::offset_of!(Page, willing) == 256);

/// What the daemon tells a process along with its cores (the 004 words it
/// keeps for it), written with each order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OrderInfo {
    /// `fair_share`: the process's equipartition share.
    pub fair_share: u32,
    /// `priority`: its discretised credit (higher first).
    pub priority: u32,
    /// `credit`, in thousandths of a processor.
    pub credit_milli: i64,
}

/// The runtime's words, copied out of the page at one moment (raw: not yet
/// judged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeWords {
    /// `magic` (the daemon's, copied to see whether it changed).
    pub magic: u64,
    /// `version` (likewise).
    pub version: u32,
    /// `max_processors`.
    pub max_processors: u32,
    /// `desired`.
    pub desired: u32,
    /// `acked`.
    pub acked: u32,
    /// `held`.
    pub held: u32,
    /// `willing[..]`.
    pub willing: Vec<u32>,
}

/// A page that cannot be meaningful: the daemon fences its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// The magic or the version was overwritten.
    Header,
    /// `acked` is odd, or not an order issued since the last one accepted.
    Acked(u32),
    /// Processor `index`'s willing word holds `value`, neither 0 nor 1.
    Willing {
        /// The processor.
        index: usize,
        /// What the word held.
        value: u32,
    },
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Header => f.write_str("the page's magic or version was overwritten"),
            Malformed::Acked(w) => write!(f, "acked {w:#x} is not an order that was issued"),
            Malformed::Willing { index, value } => {
                write!(f, "processor {index}'s willing word holds {value:#x}")
            }
        }
    }
}

impl std::error::Error for Malformed {}

/// The runtime's words, judged and clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// `desired`, clamped to `1..=min(cores, max_processors)`.
    pub desired: usize,
    /// `max_processors`, clamped to `1..=MAX_CORES`.
    pub max_processors: usize,
    /// What `acked` says.
    pub ack: Ack,
    /// How many of the processors `0..held` (the ones on owned cores)
    /// are willing to yield.
    pub willing: usize,
}

impl RuntimeWords {
    /// Judges the words for a machine of `cores` cores, given the daemon's
    /// last issued order and last accepted acknowledgement.
    ///
    /// # Errors
    /// [`Malformed`] when a word cannot mean anything.
    pub fn check(&self, cores: usize, issued: u32, accepted: u32) -> Result<Checked, Malformed> {
        if self.magic != MAGIC || self.version != VERSION {
            return Err(Malformed::Header);
        }
        let ack = check_ack(self.acked, issued, accepted);
        if ack == Ack::Malformed {
            return Err(Malformed::Acked(self.acked));
        }
        if let Some((index, &value)) = self.willing.iter().enumerate().find(|(_, w)| **w > 1) {
            return Err(Malformed::Willing { index, value });
        }
        let max_processors = (self.max_processors as usize).clamp(1, MAX_CORES);
        let desired = (self.desired as usize).clamp(1, cores.min(max_processors).max(1));
        let held = (self.held as usize).min(self.willing.len());
        let willing = self.willing[..held].iter().filter(|&&w| w == 1).count();
        Ok(Checked {
            desired,
            max_processors,
            ack,
            willing,
        })
    }
}

impl Page {
    /// The page over `len` bytes at `ptr`, or `None` if they are too few
    /// or misaligned.
    ///
    /// # Safety
    /// The bytes stay mapped, readable and writable for `'a`, and this
    /// process touches them only through the returned page (atomically);
    /// other processes may write them at any time.
    pub unsafe fn from_raw<'a>(ptr: *mut u8, len: usize) -> Option<&'a Page> {
        if len < PAGE_LEN || ptr.align_offset(align_of::<Page>()) != 0 {
            return None;
        }
        // SAFETY: aligned and long enough (checked); `Page` is made of
        // atomics only, for which every bit pattern is valid; the caller
        // keeps the memory for `'a`.
        Some(unsafe { &*ptr.cast::<Page>() })
    }

    /// The daemon, before the page is handed over: the magic and version.
    pub fn init(&self) {
        self.magic.store(MAGIC, Relaxed);
        self.version.store(VERSION, Relaxed);
    }

    /// The daemon: copies the runtime's words out.
    pub fn runtime_words(&self) -> RuntimeWords {
        RuntimeWords {
            magic: self.magic.load(Relaxed),
            version: self.version.load(Relaxed),
            max_processors: self.max_processors.load(Relaxed),
            desired: self.desired.load(Relaxed),
            acked: protocol::acked(&self.acked),
            held: self.held.load(Relaxed),
            willing: self.willing.iter().map(|w| w.load(Relaxed)).collect(),
        }
    }

    /// The daemon: orders the process to own `cores` (the order after
    /// generation `prev`, the daemon's own count), with `info`; wakes the
    /// runtime's follower. Returns the new generation.
    pub fn publish_order(&self, prev: u32, cores: &CoreSet, info: OrderInfo) -> u32 {
        self.count.store(cores.len() as u32, Relaxed);
        self.fair_share.store(info.fair_share, Relaxed);
        self.priority.store(info.priority, Relaxed);
        self.credit.store(info.credit_milli, Relaxed);
        self.ordered_at.store(monotonic_ns(), Relaxed);
        let g = protocol::publish(&self.order, &self.cores, cores.words(), prev);
        crate::sys::futex_wake_shared(&self.order, u32::MAX);
        g
    }

    /// The daemon: marks the process fenced (or no longer).
    pub fn set_fenced(&self, fenced: bool) {
        self.fenced.store(u32::from(fenced), Relaxed);
    }

    /// Whether the daemon marked the process fenced.
    pub fn fenced(&self) -> bool {
        self.fenced.load(Relaxed) != 0
    }

    /// The 004 words as the daemon last wrote them: `(count, fair_share,
    /// priority, credit in thousandths)`.
    pub fn daemon_words(&self) -> (u32, u32, u32, i64) {
        (
            self.count.load(Relaxed),
            self.fair_share.load(Relaxed),
            self.priority.load(Relaxed),
            self.credit.load(Relaxed),
        )
    }

    /// Whether the daemon's magic and version are there.
    pub(crate) fn is_valid(&self) -> bool {
        self.magic.load(Relaxed) == MAGIC && self.version.load(Relaxed) == VERSION
    }

    /// The runtime: one try at the current order; see `protocol::read`.
    pub(crate) fn read_order(&self) -> Option<(u32, CoreSet)> {
        let mut words = [0u64; CORE_WORDS];
        let g = protocol::read(&self.order, &self.cores, &mut words)?;
        Some((g, CoreSet::from_words(words)))
    }

    /// The runtime: how long ago the daemon wrote its latest order, as the
    /// page says (zero when the word is in the future or over a second old:
    /// it only timestamps processor changes).
    pub(crate) fn order_age(&self) -> Duration {
        let age = monotonic_ns().saturating_sub(self.ordered_at.load(Relaxed));
        if age > 1_000_000_000 {
            Duration::ZERO
        } else {
            Duration::from_nanos(age)
        }
    }

    /// The runtime: sleeps while `order` holds `seen`, at most `timeout`.
    pub(crate) fn wait_order(&self, seen: u32, timeout: Duration) {
        let _ = crate::sys::futex_wait_shared(&self.order, seen, timeout);
    }

    /// The runtime: order `g` is followed and it holds `held` processors.
    pub(crate) fn ack(&self, g: u32, held: usize) {
        self.held.store(held as u32, Relaxed);
        protocol::ack(&self.acked, g);
    }

    /// The runtime: how many processors it may have.
    pub(crate) fn set_max_processors(&self, n: usize) {
        self.max_processors
            .store(u32::try_from(n).unwrap_or(u32::MAX), Relaxed);
    }

    /// The runtime: how many processors its work wants.
    pub(crate) fn set_desired(&self, n: usize) {
        self.desired
            .store(u32::try_from(n).unwrap_or(u32::MAX), Relaxed);
    }

    /// Processor `i`'s willing-to-yield word, if it has one.
    pub(crate) fn willing_word(&self, i: usize) -> Option<&AtomicU32> {
        self.willing.get(i)
    }
}

/// `CLOCK_MONOTONIC` now, in ns: the clock every process of the machine
/// shares (and `std::time::Instant`'s).
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("order", &self.order.load(Relaxed))
            .field("acked", &self.acked.load(Relaxed))
            .field("desired", &self.desired.load(Relaxed))
            .field("count", &self.count.load(Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Box<Page> {
        // SAFETY: all-zero bytes are a valid `Page` (atomics only).
        let p: Box<Page> = unsafe { Box::new_zeroed().assume_init() };
        p.init();
        p
    }

    #[test]
    fn an_order_is_read_whole_and_acknowledged() {
        let p = page();
        assert_eq!(p.read_order(), Some((0, CoreSet::new())));
        let cores: CoreSet = [1, 3].into_iter().collect();
        let g = p.publish_order(0, &cores, OrderInfo::default());
        assert_eq!(g, 2);
        assert_eq!(p.read_order(), Some((2, cores)));
        assert_eq!(p.daemon_words().0, 2);
        let w = p.runtime_words();
        assert_eq!(w.check(4, g, 0).unwrap().ack, Ack::Behind);
        p.ack(g, 2);
        let c = p.runtime_words().check(4, g, 0).unwrap();
        assert_eq!(c.ack, Ack::Current);
    }

    #[test]
    fn huge_words_are_clamped_and_meaningless_ones_refused() {
        let p = page();
        p.set_desired(usize::MAX);
        p.set_max_processors(3);
        let c = p.runtime_words().check(8, 0, 0).unwrap();
        assert_eq!((c.desired, c.max_processors), (3, 3));
        p.set_desired(0);
        assert_eq!(p.runtime_words().check(8, 0, 0).unwrap().desired, 1);

        p.willing_word(7).unwrap().store(0xdead, Relaxed);
        assert_eq!(
            p.runtime_words().check(8, 0, 0),
            Err(Malformed::Willing {
                index: 7,
                value: 0xdead
            })
        );
        p.willing_word(7).unwrap().store(1, Relaxed);
        // Willing processors count only among the ones it holds.
        assert_eq!(p.runtime_words().check(8, 0, 0).unwrap().willing, 0);
        p.ack(0, 8);
        assert_eq!(p.runtime_words().check(8, 0, 0).unwrap().willing, 1);

        p.ack(6, 8);
        assert_eq!(p.runtime_words().check(8, 4, 2), Err(Malformed::Acked(6)));
        p.ack(3, 8);
        assert_eq!(p.runtime_words().check(8, 4, 2), Err(Malformed::Acked(3)));
        p.magic.store(7, Relaxed);
        assert_eq!(p.runtime_words().check(8, 4, 2), Err(Malformed::Header));
    }

    #[test]
    fn acknowledgements_follow_the_generations_across_the_wrap() {
        assert_eq!(check_ack(0, 0, 0), Ack::Current);
        assert_eq!(check_ack(0, 2, 0), Ack::Behind);
        assert_eq!(check_ack(2, 6, 2), Ack::Behind);
        assert_eq!(check_ack(4, 6, 2), Ack::Behind);
        assert_eq!(check_ack(8, 6, 2), Ack::Malformed);
        assert_eq!(check_ack(0, 6, 2), Ack::Malformed);
        let last = u32::MAX - 1;
        assert_eq!(protocol::next_generation(last), 2);
        assert_eq!(check_ack(last, 2, last - 2), Ack::Behind);
        assert_eq!(check_ack(2, 2, last - 2), Ack::Current);
        assert_eq!(check_ack(4, 2, last - 2), Ack::Malformed);
    }
}
