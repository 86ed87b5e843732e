//! Making threads runnable on a processor: through its policy (which
//! places them in its queues), then waking as many sleeping processors as
//! there is new work for.
//!
//! This file owns the placing of woken threads and the wake-up it costs;
//! it must not choose which thread runs next (the policy does, in the
//! scheduler loop).

use super::{OwnerToken, Processor, Set};
use crate::header::Thread;
use crate::sched::{Chain, Chosen, Cx, Policy, Ready};

impl Processor {
    /// Runs `f` with this processor's policy and the view it decides on.
    #[inline]
    pub(super) fn with_policy<R>(
        &self,
        mut tok: OwnerToken<'_>,
        f: impl FnOnce(&mut Chosen, &Cx<'_>) -> R,
    ) -> R {
        let owner = self.owner(tok.rb());
        let shared = self.shared();
        let cx = Cx {
            queue: &owner.queue,
            next: &self.next,
            injector: &shared.injector,
            quantum: &self.quantum,
        };
        f(&mut owner.policy, &cx)
    }

    /// Makes `t` runnable on this processor, as the policy places it, and
    /// lets an idle processor know.
    ///
    /// The first activation given a call by this processor's own delivery
    /// ([`Ready::Call`]) is kept for the delivery's caller to switch to
    /// straight away ([`Processor::deliver_sources`], which queues it after
    /// all if anything else is ready by the delivery's end); any other
    /// call reaches the policy as [`Ready::Woken`].
    pub(crate) fn make_ready(&self, mut tok: OwnerToken<'_>, t: Thread, why: Ready) {
        let why = if why == Ready::Call {
            let owner = self.owner(tok.rb());
            if owner.delivering && owner.handoff.is_none() {
                owner.handoff = Some(t);
                return;
            }
            Ready::Woken
        } else {
            why
        };
        self.with_policy(tok.rb(), |policy, cx| policy.ready(cx, t, why));
        let shared = self.shared();
        // With one processor, this one (running now) is the one to run it;
        // so is an idle poller, for its first.
        if self.take_polling(tok.rb(), shared) {
            return;
        }
        if shared.processors.len() > 1 {
            shared.notify_work();
        }
    }

    /// Makes every thread of `batch` runnable on this processor at once,
    /// as the policy places a batch (`Policy::ready_batch`: never the
    /// next-to-run slot), and wakes as many
    /// sleeping processors as there is work for ([`Set::notify_work_n`]).
    pub(crate) fn make_ready_batch(&self, mut tok: OwnerToken<'_>, batch: Chain) {
        let n = batch.len();
        if n == 0 {
            return;
        }
        self.with_policy(tok.rb(), |policy, cx| policy.ready_batch(cx, batch));
        let shared = self.shared();
        // This processor goes on with the waker, so each of them is work
        // for a sleeper (as for `make_ready`); an idle poller runs the
        // first itself.
        let own = usize::from(self.take_polling(tok.rb(), shared));
        if shared.processors.len() > 1 {
            shared.notify_work_n(n - own);
        }
    }

    /// Whether this processor is the idle poller delivering a harvest
    /// ([`Owner::polling`](super::Owner::polling)); if so, it stops being one and leaves the
    /// sleepers, so that a notifier does not take it for one: the thread
    /// just made runnable is its own next work.
    #[inline]
    fn take_polling(&self, mut tok: OwnerToken<'_>, shared: &Set) -> bool {
        let owner = self.owner(tok.rb());
        if !owner.polling {
            return false;
        }
        owner.polling = false;
        shared.sleeper_exit(self.index);
        true
    }
}
