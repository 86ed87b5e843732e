//! How a `u64` moves through a queue under test: the [`Transport`] trait
//! every system of the `queues` experiment implements, the spin loops the
//! non-blocking ones share, the [`Control`] flags that turn a lost item
//! into an error, and ferry-queue's own transports.
//!
//! This module owns the systems' operations, not the timing or the run
//! schedule (`queues`); the peers' transports live in `peers`.

use std::hint;
use std::sync::atomic::{AtomicBool, Ordering};

use ferry_queue::wait::Spin;

/// Flags through which the two sides of a run learn that the other has
/// stopped. They are read only on the slow paths (queue full or empty), so
/// they cost nothing while items flow, and they turn a lost item into an error
/// instead of an endless spin.
#[derive(Debug, Default)]
pub struct Control {
    /// Set (Release) by the producer after its last push, or when it dies.
    pub producer_done: AtomicBool,
    /// Set by the consumer when it gives up on a bad item.
    pub consumer_quit: AtomicBool,
}

impl Control {
    /// For the `1-thread` case: nobody else pushes or pops, so "empty after a
    /// push" and "full with one item" are immediately errors.
    pub fn single_threaded() -> Control {
        Control {
            producer_done: AtomicBool::new(true),
            consumer_quit: AtomicBool::new(true),
        }
    }
}

/// Sets the flag when dropped, so a panicking producer still releases a
/// spinning consumer.
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// One system under test: how to make a queue of capacity `n` and move a
/// `u64` through it. Implementations are zero-sized markers, so each
/// benchmark loop is monomorphised for its system.
pub trait Transport {
    /// Name in the report.
    const NAME: &'static str;
    /// The producer's handle.
    type Tx: Send;
    /// The consumer's handle.
    type Rx: Send;
    /// A queue of the given capacity.
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Sends `v`, waiting while the queue is full. `false` if the consumer is
    /// gone or has given up.
    fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool;
    /// Receives one item, waiting while the queue is empty. `None` if the
    /// producer is done or gone and the queue is empty.
    fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64>;
}

/// `try_push` in a loop with `spin_loop()` while full.
#[inline(always)]
pub fn spin_send(
    mut v: u64,
    ctl: &Control,
    mut try_push: impl FnMut(u64) -> Result<(), u64>,
) -> bool {
    loop {
        match try_push(v) {
            Ok(()) => return true,
            Err(back) => {
                if ctl.consumer_quit.load(Ordering::Relaxed) {
                    return false;
                }
                v = back;
                hint::spin_loop();
            }
        }
    }
}

/// `try_pop` in a loop with `spin_loop()` while empty.
#[inline(always)]
pub fn spin_recv(ctl: &Control, mut try_pop: impl FnMut() -> Option<u64>) -> Option<u64> {
    loop {
        if let Some(v) = try_pop() {
            return Some(v);
        }
        if ctl.producer_done.load(Ordering::Acquire) {
            // Everything the producer pushed happened before this load, so
            // one more try sees it; still empty means it is lost.
            return try_pop();
        }
        hint::spin_loop();
    }
}

/// Defines a [`Transport`] for a ferry queue kind with the `Spin` strategy,
/// driven by `try_push`/`try_pop` spin loops.
macro_rules! ferry_spin {
    ($marker:ident, $kind:ident, $name:literal) => {
        #[doc = concat!("`", $name, "`: `ferry_queue::", stringify!($kind), "` with `Spin`, try_push/try_pop loops.")]
        pub struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = ferry_queue::$kind::Producer<u64, Spin>;
            type Rx = ferry_queue::$kind::Consumer<u64, Spin>;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                ferry_queue::$kind::channel_with::<u64, Spin>(capacity)
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
                spin_send(v, ctl, |v| tx.try_push(v))
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
                spin_recv(ctl, || rx.try_pop())
            }
        }
    };
}

/// Defines a [`Transport`] `$marker` named `$name` over handles `$tx` and
/// `$rx` made by `$channel(capacity)`, driven by the blocking methods
/// `$send` and `$recv` (each returning a `Result`).
macro_rules! blocking_transport {
    ($(#[$doc:meta])* $marker:ident, $name:expr, $tx:ty, $rx:ty, $channel:path, $send:ident, $recv:ident) => {
        $(#[$doc])*
        pub struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = $tx;
            type Rx = $rx;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                $channel(capacity)
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, _ctl: &Control) -> bool {
                tx.$send(v).is_ok()
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, _ctl: &Control) -> Option<u64> {
                rx.$recv().ok()
            }
        }
    };
}
pub(crate) use blocking_transport;

/// Defines a [`Transport`] for a multi-producer (and, with `both`,
/// multi-consumer) ferry kind whose handles each have an idle twin kept
/// alive, so every operation takes the shared-side path (a CAS per claim)
/// instead of the lone-handle path the plain rows measure.
macro_rules! ferry_shared {
    ($marker:ident, $kind:ident, $name:literal, $rx:ty, $rx_twin:expr) => {
        #[doc = concat!("`", $name, "`: `ferry_queue::", stringify!($kind), "` with `Spin` and a second, idle handle per multi side.")]
        pub struct $marker;
        impl Transport for $marker {
            const NAME: &'static str = $name;
            type Tx = (
                ferry_queue::$kind::Producer<u64, Spin>,
                ferry_queue::$kind::Producer<u64, Spin>,
            );
            type Rx = $rx;
            fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
                let (tx, rx) = ferry_queue::$kind::channel_with::<u64, Spin>(capacity);
                let twin = tx.clone();
                ((tx, twin), $rx_twin(rx))
            }
            #[inline(always)]
            fn send(tx: &Self::Tx, v: u64, ctl: &Control) -> bool {
                spin_send(v, ctl, |v| tx.0.try_push(v))
            }
            #[inline(always)]
            fn recv(rx: &Self::Rx, ctl: &Control) -> Option<u64> {
                spin_recv(ctl, || first(rx).try_pop())
            }
        }
    };
}

/// The handle a transport uses, whether or not it has an idle twin.
pub trait First {
    /// The handle.
    type Handle;
    /// The first (working) handle.
    fn first(&self) -> &Self::Handle;
}

impl<K: ferry_queue::Kind> First for ferry_queue::Consumer<u64, K, Spin> {
    type Handle = Self;
    fn first(&self) -> &Self {
        self
    }
}

impl<K: ferry_queue::Kind> First
    for (
        ferry_queue::Consumer<u64, K, Spin>,
        ferry_queue::Consumer<u64, K, Spin>,
    )
{
    type Handle = ferry_queue::Consumer<u64, K, Spin>;
    fn first(&self) -> &Self::Handle {
        &self.0
    }
}

#[inline(always)]
fn first<F: First>(f: &F) -> &F::Handle {
    f.first()
}

ferry_spin!(FerrySpsc, spsc, "ferry spsc");
ferry_spin!(FerryMpsc, mpsc, "ferry mpsc");
ferry_spin!(FerrySpmc, spmc, "ferry spmc");
ferry_spin!(FerryMpmc, mpmc, "ferry mpmc");
blocking_transport!(
    /// `ferry spsc (park)`: `ferry_queue::spsc` with `SpinPark`, blocking push/pop.
    FerrySpscPark,
    "ferry spsc (park)",
    ferry_queue::spsc::Producer<u64>,
    ferry_queue::spsc::Consumer<u64>,
    ferry_queue::spsc::channel::<u64>,
    push,
    pop
);
blocking_transport!(
    /// `ferry mpsc (park)`: `ferry_queue::mpsc` with `SpinPark`, blocking push/pop.
    FerryMpscPark,
    "ferry mpsc (park)",
    ferry_queue::mpsc::Producer<u64>,
    ferry_queue::mpsc::Consumer<u64>,
    ferry_queue::mpsc::channel::<u64>,
    push,
    pop
);
ferry_shared!(
    FerryMpscShared,
    mpsc,
    "ferry mpsc (2 producer handles)",
    ferry_queue::mpsc::Consumer<u64, Spin>,
    |rx| rx
);
ferry_shared!(
    FerryMpmcShared,
    mpmc,
    "ferry mpmc (2+2 handles)",
    (
        ferry_queue::mpmc::Consumer<u64, Spin>,
        ferry_queue::mpmc::Consumer<u64, Spin>
    ),
    |rx: ferry_queue::mpmc::Consumer<u64, Spin>| {
        let twin = rx.clone();
        (rx, twin)
    }
);
