//! A hostile peer against a channel's layout and slot arena: a scribbler
//! writing random words over the whole channel (header, queues, doorbells,
//! liveness, slots) while the other side keeps using it through its own
//! mapping, and property tests feeding arbitrary headers to `attach` and
//! arbitrary slot contents to `read_call` / `read_reply`: errors, never a
//! panic or an access out of bounds.

mod rpc_support;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

use proptest::prelude::*;

use rpc_support::rpc::layout::{
    ChannelLayout, ChannelRegion, ChannelView, LINE, Side, attach, init, slot_stride,
};
use rpc_support::rpc::slots::{
    CALL, ClientSlots, REPLY, ServerSlots, SlotError, Ticket, control, meta,
};
use rpc_support::{Rng, slot_word, two_mappings};

#[test]
fn a_scribbler_over_the_whole_channel_causes_errors_never_panics() {
    let layout = ChannelLayout::new(8, 64).unwrap();
    let (server_map, client_map) = two_mappings(&layout);
    let sv = init(server_map.region(), &layout).unwrap();
    let doorbell_words = [
        layout.doorbells().offset / 8,
        (layout.doorbells().offset + LINE) / 8,
    ];
    let stop = AtomicBool::new(false);
    /// Stops the scribbler when the user side ends, also by a failed assertion.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }
    let rounds = AtomicU64::new(0);
    let slot0 = layout.slots().offset / 8;
    let stride = slot_stride(layout.slot_size()) / 8;
    let (mut ok, mut err) = (0u64, 0u64);
    std::thread::scope(|scope| {
        // The hostile peer: sweeps and random hits over every word.
        scope.spawn(|| {
            let words = server_map.words();
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut sweep = 0;
            while !stop.load(Relaxed) {
                for _ in 0..64 {
                    let i = if rng.next().is_multiple_of(2) {
                        sweep = (sweep + 1) % words.len();
                        sweep
                    } else {
                        (rng.next() % words.len() as u64) as usize
                    };
                    let v = match rng.next() % 4 {
                        0 => rng.next(),
                        1 => rng.next() % 16,
                        2 => control((rng.next() % 3) as u32, (rng.next() % 4) as u32),
                        _ => meta(0, (rng.next() % 128) as u32),
                    };
                    if let Some(side) = doorbell_words.iter().position(|&d| d == i) {
                        let side = if side == 0 {
                            Side::Client
                        } else {
                            Side::Server
                        };
                        sv.doorbell(side).store(v as u32, Relaxed);
                    } else {
                        words[i].store(v, Relaxed);
                    }
                }
                // A coherent forgery: a slot turned into a call or a reply
                // at the generation it holds, with a length past the slot.
                let c = slot0 + (rng.next() % 8) as usize * stride;
                let g = (words[c].load(Relaxed) >> 32) as u32;
                let state = if rng.next().is_multiple_of(2) {
                    CALL
                } else {
                    REPLY
                };
                words[c + 1].store(meta(0, 65 + (rng.next() % 200) as u32), Relaxed);
                words[c].store(control(state, g), Relaxed);
                rounds.fetch_add(1, Relaxed);
            }
        });
        // The other side, using the channel through its own mapping.
        let _stop = Stop(&stop);
        let mut rng = Rng(42);
        let mut count = |r: bool| if r { ok += 1 } else { err += 1 };
        let cv = ChannelView::new(client_map.region(), &layout).unwrap();
        let server = ServerSlots::new(&cv);
        let mut client = ClientSlots::new(&cv);
        let mut tickets: Vec<Ticket> = Vec::new();
        // At least 20,000 passes, and until the scribbler has made 2,000
        // rounds (progress, not time: it may start late).
        let mut pass = 0u64;
        while pass < 20_000 || rounds.load(Relaxed) < 2_000 {
            pass += 1;
            count(attach(client_map.region()).is_ok());
            if let Ok(c) = cv.call_consumer() {
                for _ in 0..4 {
                    if let Ok(Some(i)) = c.try_pop() {
                        count(server.read_call(i).is_ok());
                    }
                }
            }
            if let Ok(p) = cv.call_producer() {
                count(p.try_push((rng.next() % 16) as u32).is_ok());
            }
            if let Ok(c) = cv.reply_consumer() {
                count(c.try_pop().is_ok());
            }
            let index = (rng.next() % 10) as u32;
            match server.read_call(index) {
                Ok(call) => {
                    assert!(call.args.len() <= 64);
                    count(server.write_reply(&call, &call.args).is_ok());
                }
                Err(_) => count(false),
            }
            let len = (rng.next() % 80) as usize;
            match client.begin_call(7, &vec![0xab; len]) {
                Ok(t) => tickets.push(t),
                Err(e) => count(matches!(
                    e,
                    SlotError::TooLarge { .. } | SlotError::NoFreeSlot
                )),
            }
            if let Some(t) = tickets.pop() {
                match client.read_reply(t.index, &t) {
                    Ok(bytes) => {
                        assert!(bytes.len() <= 64);
                        count(true);
                    }
                    Err(_) => {
                        if rng.next().is_multiple_of(2) {
                            client.abandon(&t).unwrap();
                        } else {
                            tickets.insert(0, t);
                        }
                    }
                }
            }
            assert_eq!(client.free_slots() + tickets.len(), 8);
        }
    });
    // Both outcomes happened: the scribbler reached the decoders, and the
    // channel still worked at times.
    assert!(ok > 0 && err > 0, "ok {ok} err {err}");
}

/// A header word: mostly the valid value (so that most cases reach the
/// later checks), else anything, an aligned offset, or a small number.
fn word(valid: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        9 => Just(valid),
        1 => any::<u64>(),
        1 => (0u64..64).prop_map(|k| k * 128),
        1 => 0u64..20_000,
    ]
}

proptest! {
    #[test]
    fn attach_never_panics_and_what_it_accepts_fits(
        w in (word(0x4652_5943_4841_4e00), word(1), word(2688), word(8), word(64),
              (word(128), word(640), word(1664), word(1152), word(1408))),
    ) {
        let layout = ChannelLayout::new(8, 64).unwrap();
        // The valid values the strategy offers are this layout's.
        prop_assert_eq!(
            [layout.total_size(), layout.call_queue().offset, layout.reply_queue().offset,
             layout.slots().offset, layout.doorbells().offset, layout.liveness().offset],
            [2688, 128, 640, 1664, 1152, 1408]
        );
        let words: Vec<AtomicU64> = (0..layout.total_size() / 8).map(|_| AtomicU64::new(0)).collect();
        let (a, b, c, d, e, (f, g, h, i, j)) = w;
        for (k, v) in [a, b, c, d, e, f, g, h, i, j].into_iter().enumerate() {
            words[k].store(v, Relaxed);
        }
        if let Ok(l) = attach(ChannelRegion::new(&words)) {
            let areas = [l.call_queue(), l.reply_queue(), l.slots(), l.doorbells(), l.liveness()];
            for (x, p) in areas.iter().enumerate() {
                prop_assert!(p.offset % LINE == 0 && p.offset >= LINE);
                prop_assert!(p.offset + p.len <= words.len() * 8);
                for q in &areas[x + 1..] {
                    prop_assert!(p.offset + p.len <= q.offset || q.offset + q.len <= p.offset);
                }
            }
            let view = ChannelView::new(ChannelRegion::new(&words), &l).unwrap();
            let _ = view.call_consumer();
            let _ = ServerSlots::new(&view).read_call(0);
        }
    }

    #[test]
    fn slot_decoders_never_panic_and_respect_the_slot(
        ctl in prop_oneof![any::<u64>(), (0u32..4, 0u32..3).prop_map(|(s, g)| control(s, g))],
        m in prop_oneof![any::<u64>(), (any::<u32>(), 0u32..80).prop_map(|(o, l)| meta(o, l))],
        payload in proptest::collection::vec(any::<u64>(), 8),
        index in prop_oneof![0u32..8, any::<u32>()],
    ) {
        let layout = ChannelLayout::new(4, 64).unwrap();
        let words: Vec<AtomicU64> = (0..layout.total_size() / 8).map(|_| AtomicU64::new(0)).collect();
        let view = init(ChannelRegion::new(&words), &layout).unwrap();
        let mut client = ClientSlots::new(&view);
        let t = client.begin_call(1, b"call").unwrap();
        let slot = index % 4;
        slot_word(&view, slot, 0).store(ctl, Relaxed);
        slot_word(&view, slot, 1).store(m, Relaxed);
        for (k, v) in payload.iter().enumerate() {
            slot_word(&view, slot, 2 + k).store(*v, Relaxed);
        }
        if let Ok(call) = ServerSlots::new(&view).read_call(index) {
            prop_assert!(index < 4 && call.args.len() <= 64);
            prop_assert_eq!(ctl as u32, CALL);
        }
        match client.read_reply(index, &t) {
            Ok(bytes) => {
                prop_assert!(bytes.len() <= 64);
                prop_assert_eq!(ctl, control(REPLY, t.generation));
                prop_assert_eq!(index, t.index);
            }
            Err(_) => prop_assert_eq!(client.in_flight(t.index), Some(t)),
        }
    }
}
