//! Per-thread locals for user-level threads: [`thread_local!`](crate::thread_local)
//! and [`LocalKey`].
//!
//! This room owns each thread's table of local values; it must not keep a
//! reference into a table across anything that could switch threads, and it
//! never reaches a thread through a cached thread-local address.
//!
//! A ferry thread's locals live in its own control block, so they follow the
//! thread from processor to processor. On a plain kernel thread the same key
//! reads a per-kernel-thread table instead, so library code works on both.

use std::cell::RefCell;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::header::locals::LocalTable;

static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

std::thread_local! {
    /// The table of a plain kernel thread (not a ferry thread).
    static KERNEL_TABLE: RefCell<LocalTable> = const { RefCell::new(LocalTable::new()) };
}

/// A key for a per-thread local value, declared with
/// [`thread_local!`](crate::thread_local).
///
/// ```
/// ferry::thread_local! {
///     static HITS: std::cell::Cell<u32> = std::cell::Cell::new(0);
/// }
/// ferry::run(|| {
///     HITS.with(|h| h.set(h.get() + 1));
///     let other = ferry::spawn(|| HITS.with(|h| h.get()));
///     assert_eq!(other.join().unwrap(), 0); // its own copy
///     assert_eq!(HITS.with(|h| h.get()), 1);
/// })
/// .unwrap();
/// ```
pub struct LocalKey<T: Send + 'static> {
    init: fn() -> T,
    /// `0` until the first use, then this key's index + 1 (set once, by CAS).
    slot: AtomicUsize,
}

impl<T: Send + 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            init,
            slot: AtomicUsize::new(0),
        }
    }

    fn index(&self) -> usize {
        let slot = self.slot.load(Acquire);
        if slot != 0 {
            return slot - 1;
        }
        let fresh = NEXT_KEY.fetch_add(1, AcqRel);
        match self.slot.compare_exchange(0, fresh, AcqRel, Acquire) {
            Ok(_) => fresh - 1,
            Err(won) => won - 1,
        }
    }

    /// Runs `f` with the calling thread's value, made by the key's
    /// initialiser on first use in that thread.
    ///
    /// # Panics
    /// If the initialiser itself uses the same key.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let index = self.index();
        let found = access(|table| {
            let any = table.get(index)?.as_deref()?;
            Some(
                any.downcast_ref::<T>()
                    .expect("a key's slot holds its own type") as *const T,
            )
        });
        let value = match found {
            Some(value) => value,
            None => {
                // Run the initialiser with no table lent out, so that it
                // may use other keys (or even switch threads).
                let fresh = Box::new((self.init)());
                access(|table| {
                    if table.len() <= index {
                        table.resize_with(index + 1, || None);
                    }
                    assert!(
                        table[index].is_none(),
                        "ferry::thread_local: a key's initialiser used the same key"
                    );
                    let ptr: *const T = &*fresh;
                    table[index] = Some(fresh);
                    ptr
                })
            }
        };
        // SAFETY: the value is boxed in the calling thread's table (the box
        // does not move when the table grows) and leaves it only when the
        // thread ends, which cannot happen while `f` runs on it; the table
        // itself is not borrowed any more, so `f` may use other keys.
        f(unsafe { &*value })
    }
}

/// Lends the calling thread's table to `f`: the ferry thread's own, or the
/// kernel thread's.
fn access<R>(f: impl FnOnce(&mut LocalTable) -> R) -> R {
    let entered = crate::upcall::enter();
    match entered.as_ref().and_then(|e| e.p.current_ref(&e.tok)) {
        Some(me) => {
            // SAFETY: only the running thread touches its own table, `f`
            // never runs user code, and the loan ends with this call.
            unsafe { me.with_locals(f) }
        }
        None => KERNEL_TABLE.with(|table| f(&mut table.borrow_mut())),
    }
}

/// Declares per-thread locals for ferry threads, like `std::thread_local!`:
/// each ferry thread (and each plain kernel thread) gets its own value,
/// created on first use and dropped when the thread ends. Values must be
/// `Send`, because a ferry thread, and its locals with it, moves between
/// kernel threads.
#[macro_export]
macro_rules! thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])* $vis static $name: $crate::thread::LocalKey<$t> =
            $crate::thread::LocalKey::new({
                fn init() -> $t {
                    $init
                }
                init
            });
        $crate::thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
    () => {};
}
