//! Calls into another process over pair-wise shared memory (URPC): the
//! channel's layout and its slot arena so far.

// Their user, the channel, is not built yet; nothing else may use them.
#[allow(dead_code)]
pub(crate) mod layout;
#[allow(dead_code)]
pub(crate) mod region;
#[allow(dead_code)]
pub(crate) mod slots;
