//! The systems ferry is measured against, a module per peer: how each does
//! the operations of an experiment, and nothing else (run schedules, sizes,
//! checks and printing are the experiments').
//!
//! | peer | in experiment | module |
//! |------|---------------|--------|
//! | std: `sync_channel`; kernel threads with `std::sync` | queues; threads | [`stdlib`] |
//! | glibc `pthread_mutex_t` | threads (`ACQUIRE;RELEASE`) | [`pthread`] |
//! | crossbeam `ArrayQueue`, crossbeam-channel `bounded` | queues | [`crossbeam`] |
//! | corosensei coroutines | switch | [`corosensei`] |
//! | Tokio tasks, current-thread and multi-thread | threads | [`tokio`] |
//! | Go goroutines (`go/main.go`) | threads | [`go`] |
//! | the C program on pthreads and on ferry's C-Threads (`c/threads.c`) | threads `--lang c` | [`c`] |
//!
//! The kernel-thread regimes of `upcalls` (Figure 2's suspension and
//! time-slicing, the same-core futex baseline) are part of that experiment's
//! scenarios and live with them.

pub mod c;
pub mod corosensei;
pub mod crossbeam;
pub mod go;
pub mod pthread;
pub mod stdlib;
pub mod tokio;
