//! A channel's layout and slot arena (`src/rpc/layout.rs`, `region.rs`,
//! `slots.rs`), over two shared mappings of one memfd standing for the
//! client's and the server's processes: the layout round trip, `attach`
//! refusing each corrupted header field, calls and replies through the
//! queues, forged and late replies refused. (A hostile peer's scribbling and
//! property tests of the decoders: `rpc_hostile.rs`.)

mod rpc_support;

use std::sync::atomic::Ordering::Relaxed;

use rpc_support::rpc::layout::{
    AreaName, ChannelLayout, ChannelRegion, ChannelView, LINE, LayoutError, MAX_SLOT_SIZE,
    MAX_SLOTS, Side, attach, init, slot_stride,
};
use rpc_support::rpc::slots::{
    CALL, ClientSlots, FREE, REPLY, ServerSlots, SlotError, Ticket, control, meta,
};
use rpc_support::{slot_word, two_mappings};

#[test]
fn new_lays_areas_aligned_inside_and_apart() {
    for (n, s) in [(1, 8), (8, 64), (64, 248), (1024, 4096)] {
        let l = ChannelLayout::new(n, s).unwrap();
        let areas = [
            l.call_queue(),
            l.reply_queue(),
            l.slots(),
            l.doorbells(),
            l.liveness(),
        ];
        for (i, a) in areas.iter().enumerate() {
            assert_eq!(a.offset % LINE, 0);
            assert!(a.offset >= LINE && a.offset + a.len <= l.total_size());
            for b in &areas[i + 1..] {
                assert!(a.offset + a.len <= b.offset || b.offset + b.len <= a.offset);
            }
        }
        assert_eq!(l.slots().len, n * slot_stride(s));
        assert_eq!((l.slot_count() as usize, l.slot_size()), (n, s));
    }
    assert_eq!(slot_stride(64), 128);
    assert_eq!(slot_stride(120), 256);
}

#[test]
fn new_refuses_bad_sizes() {
    for n in [0, 3, 12, MAX_SLOTS as usize * 2] {
        assert_eq!(
            ChannelLayout::new(n, 64),
            Err(LayoutError::BadSlotCount { found: n as u64 })
        );
    }
    for s in [0, 4, 12, MAX_SLOT_SIZE + 8] {
        assert_eq!(
            ChannelLayout::new(8, s),
            Err(LayoutError::BadSlotSize { found: s as u64 })
        );
    }
}

#[test]
fn layout_round_trips_through_a_second_mapping() {
    for (n, s) in [(1, 8), (16, 256), (256, 1024)] {
        let layout = ChannelLayout::new(n, s).unwrap();
        let (server, client) = two_mappings(&layout);
        assert_eq!(
            attach(client.region()),
            Err(LayoutError::BadMagic { found: 0 }),
            "a channel not yet initialised is refused"
        );
        let sv = init(server.region(), &layout).unwrap();
        assert_eq!(attach(client.region()), Ok(layout));
        let cv = ChannelView::new(client.region(), &layout).unwrap();
        // The two views see one memory.
        sv.heartbeat(Side::Server).store(7, Relaxed);
        assert_eq!(cv.heartbeat(Side::Server).load(Relaxed), 7);
        cv.doorbell(Side::Server).store(1, Relaxed);
        assert_eq!(sv.doorbell(Side::Server).load(Relaxed), 1);
        assert_eq!(sv.doorbell(Side::Client).load(Relaxed), 0);
        cv.closed(Side::Client).store(1, Relaxed);
        assert_eq!(sv.closed(Side::Client).load(Relaxed), 1);
        assert_eq!(sv.closed(Side::Server).load(Relaxed), 0);
    }
}

#[test]
fn attach_refuses_every_corrupted_header_field() {
    let layout = ChannelLayout::new(8, 64).unwrap();
    let (server, client) = two_mappings(&layout);
    init(server.region(), &layout).unwrap();
    let h = server.words();
    let total = layout.total_size();
    let cq = layout.call_queue().offset as u64;
    let q_len = layout.call_queue().len;
    // (word, value, expected error)
    let cases: Vec<(usize, u64, LayoutError)> = vec![
        (0, 0, LayoutError::BadMagic { found: 0 }),
        (0, 0x1234, LayoutError::BadMagic { found: 0x1234 }),
        (1, 2, LayoutError::BadVersion { found: 2 }),
        (1, 4, LayoutError::BadVersion { found: 4 }),
        (1, 0, LayoutError::BadVersion { found: 0 }),
        (
            2,
            total as u64 + 128,
            LayoutError::SizeMismatch {
                header: total as u64 + 128,
                region: total,
            },
        ),
        (
            2,
            0,
            LayoutError::SizeMismatch {
                header: 0,
                region: total,
            },
        ),
        (3, 0, LayoutError::BadSlotCount { found: 0 }),
        (3, 6, LayoutError::BadSlotCount { found: 6 }),
        (3, u64::MAX, LayoutError::BadSlotCount { found: u64::MAX }),
        (3, 1 << 32, LayoutError::BadSlotCount { found: 1 << 32 }),
        (4, 0, LayoutError::BadSlotSize { found: 0 }),
        (4, 65, LayoutError::BadSlotSize { found: 65 }),
        (
            4,
            u64::MAX - 7,
            LayoutError::BadSlotSize {
                found: u64::MAX - 7,
            },
        ),
        // Valid count and size that no longer fit the region: the
        // queues grow (reply queue pushed out of its place), the arena
        // runs past the end.
        (
            3,
            16,
            LayoutError::OutOfBounds {
                area: AreaName::Slots,
                offset: layout.slots().offset as u64,
                len: 16 * slot_stride(64),
                total,
            },
        ),
        (
            4,
            128,
            LayoutError::OutOfBounds {
                area: AreaName::Slots,
                offset: layout.slots().offset as u64,
                len: 8 * slot_stride(128),
                total,
            },
        ),
        (
            5,
            cq + 8,
            LayoutError::Misaligned {
                area: AreaName::CallQueue,
                offset: cq + 8,
            },
        ),
        (
            5,
            0,
            LayoutError::OutOfBounds {
                area: AreaName::CallQueue,
                offset: 0,
                len: q_len,
                total,
            },
        ),
        (
            5,
            total as u64,
            LayoutError::OutOfBounds {
                area: AreaName::CallQueue,
                offset: total as u64,
                len: q_len,
                total,
            },
        ),
        (
            5,
            !127u64,
            LayoutError::OutOfBounds {
                area: AreaName::CallQueue,
                offset: !127u64,
                len: q_len,
                total,
            },
        ),
        (
            6,
            cq,
            LayoutError::Overlap {
                first: AreaName::CallQueue,
                second: AreaName::ReplyQueue,
            },
        ),
        (
            7,
            1 << 40,
            LayoutError::OutOfBounds {
                area: AreaName::Slots,
                offset: 1 << 40,
                len: 8 * slot_stride(64),
                total,
            },
        ),
        (
            8,
            layout.liveness().offset as u64,
            LayoutError::Overlap {
                first: AreaName::Doorbells,
                second: AreaName::Liveness,
            },
        ),
        (
            8,
            4,
            LayoutError::Misaligned {
                area: AreaName::Doorbells,
                offset: 4,
            },
        ),
        (
            9,
            cq + 128,
            LayoutError::Overlap {
                first: AreaName::CallQueue,
                second: AreaName::Liveness,
            },
        ),
        (
            9,
            layout.slots().offset as u64,
            LayoutError::Overlap {
                first: AreaName::Slots,
                second: AreaName::Liveness,
            },
        ),
    ];
    for (word, value, expected) in cases {
        let good = h[word].swap(value, Relaxed);
        let got = attach(client.region());
        h[word].store(good, Relaxed);
        assert_eq!(got, Err(expected), "header word {word} = {value:#x}");
        assert!(!expected.to_string().is_empty());
        // Restored, the header is accepted again.
        assert_eq!(attach(client.region()), Ok(layout));
    }
    // A region of another length than the header states.
    let short = ChannelRegion::new(&client.words()[..total / 8 - 16]);
    assert_eq!(
        attach(short),
        Err(LayoutError::SizeMismatch {
            header: total as u64,
            region: total - 128
        })
    );
    assert!(ChannelView::new(short, &layout).is_err());
    assert_eq!(
        attach(ChannelRegion::new(&client.words()[..8])),
        Err(LayoutError::RegionTooSmall { len: 64 })
    );
    // A queue's own header scribbled on: its endpoints refuse to attach.
    let view = ChannelView::new(client.region(), &layout).unwrap();
    h[layout.call_queue().offset / 8].store(0, Relaxed);
    assert!(matches!(view.call_consumer(), Err(LayoutError::Queue(_))));
    assert!(view.reply_consumer().is_ok());
}

#[test]
fn calls_and_replies_round_trip_through_two_mappings() {
    let s = 64;
    let layout = ChannelLayout::new(4, s).unwrap();
    let (server_map, client_map) = two_mappings(&layout);
    let sv = init(server_map.region(), &layout).unwrap();
    let cv = ChannelView::new(client_map.region(), &attach(client_map.region()).unwrap()).unwrap();
    let server = ServerSlots::new(&sv);
    let mut client = ClientSlots::new(&cv);
    let (calls_in, calls_out) = (cv.call_producer().unwrap(), sv.call_consumer().unwrap());
    let (replies_in, replies_out) = (sv.reply_producer().unwrap(), cv.reply_consumer().unwrap());
    for round in 0..3u32 {
        for len in [0, 1, 7, 8, 9, s - 1, s] {
            let args: Vec<u8> = (0..len).map(|i| (i as u8) ^ (round as u8)).collect();
            let ticket = client.begin_call(round * 100 + len as u32, &args).unwrap();
            calls_in.try_push(ticket.index).unwrap();

            let index = calls_out.try_pop().unwrap().unwrap();
            let call = server.read_call(index).unwrap();
            assert_eq!((call.op, &call.args), (round * 100 + len as u32, &args));
            assert_eq!(call.generation, ticket.generation);
            let result: Vec<u8> = args.iter().rev().map(|b| !b).collect();
            server.write_reply(&call, &result).unwrap();
            replies_in.try_push(call.index).unwrap();

            let index = replies_out.try_pop().unwrap().unwrap();
            let t = client.in_flight(index).unwrap();
            assert_eq!(t, ticket);
            assert_eq!(client.read_reply(index, &t).unwrap(), result);
            assert_eq!(client.in_flight(index), None);
            assert_eq!(client.free_slots(), 4);
        }
    }
    // One byte too many: refused on both sides, nothing taken or written.
    assert_eq!(
        client.begin_call(1, &vec![0; s + 1]),
        Err(SlotError::TooLarge { len: s + 1, max: s })
    );
    assert_eq!(client.free_slots(), 4);
    let ticket = client.begin_call(1, b"x").unwrap();
    let call = server.read_call(ticket.index).unwrap();
    assert_eq!(
        server.write_reply(&call, &vec![0; s + 1]),
        Err(SlotError::TooLarge { len: s + 1, max: s })
    );
    assert_eq!(
        slot_word(&sv, ticket.index, 0).load(Relaxed),
        control(CALL, ticket.generation)
    );
    // Many calls in flight at once, answered out of order.
    let t2 = client.begin_call(2, b"two").unwrap();
    let t3 = client.begin_call(3, b"three").unwrap();
    assert_eq!(client.begin_call(4, b"four").map(|_| ()), Ok(()));
    assert_eq!(client.begin_call(5, b"five"), Err(SlotError::NoFreeSlot));
    for t in [t3, t2, ticket] {
        let call = server.read_call(t.index).unwrap();
        server.write_reply(&call, &call.args).unwrap();
    }
    assert_eq!(client.read_reply(t3.index, &t3).unwrap(), b"three");
    assert_eq!(client.read_reply(t2.index, &t2).unwrap(), b"two");
    assert_eq!(client.read_reply(ticket.index, &ticket).unwrap(), b"x");
}

#[test]
fn forged_replies_are_refused_and_leave_the_call_in_flight() {
    let s = 32;
    let layout = ChannelLayout::new(4, s).unwrap();
    let (server_map, client_map) = two_mappings(&layout);
    let sv = init(server_map.region(), &layout).unwrap();
    let cv = ChannelView::new(client_map.region(), &layout).unwrap();
    let server = ServerSlots::new(&sv);
    let mut client = ClientSlots::new(&cv);
    let t = client.begin_call(9, b"args").unwrap();
    let (c, m) = (slot_word(&sv, t.index, 0), slot_word(&sv, t.index, 1));
    let g = t.generation;

    c.store(control(REPLY, g.wrapping_add(1)), Relaxed);
    assert_eq!(
        client.read_reply(t.index, &t),
        Err(SlotError::BadGeneration {
            found: g.wrapping_add(1),
            expected: g
        })
    );
    c.store(control(REPLY, g.wrapping_sub(1)), Relaxed);
    assert_eq!(
        client.read_reply(t.index, &t),
        Err(SlotError::BadGeneration {
            found: g.wrapping_sub(1),
            expected: g
        })
    );
    for state in [FREE, CALL, 3, u32::MAX] {
        c.store(control(state, g), Relaxed);
        assert_eq!(
            client.read_reply(t.index, &t),
            Err(SlotError::BadState {
                found: state,
                expected: REPLY
            })
        );
    }
    c.store(control(REPLY, g), Relaxed);
    for len in [s as u32 + 1, u32::MAX] {
        m.store(meta(9, len), Relaxed);
        assert_eq!(
            client.read_reply(t.index, &t),
            Err(SlotError::BadLength { len, max: s })
        );
    }
    for index in [4, 5, 1 << 20, u32::MAX] {
        assert_eq!(
            client.read_reply(index, &t),
            Err(SlotError::BadIndex { index, count: 4 })
        );
        assert_eq!(
            server.read_call(index),
            Err(SlotError::BadIndex { index, count: 4 })
        );
    }
    // An index in range but not the ticket's, and a ticket never issued.
    let other = (t.index + 1) % 4;
    assert_eq!(
        client.read_reply(other, &t),
        Err(SlotError::NotInFlight {
            index: other,
            generation: g
        })
    );
    let forged = Ticket {
        index: other,
        generation: 1,
    };
    assert_eq!(
        client.read_reply(other, &forged),
        Err(SlotError::NotInFlight {
            index: other,
            generation: 1
        })
    );
    // The call is still in flight; the genuine reply completes it, once.
    assert_eq!(client.in_flight(t.index), Some(t));
    assert_eq!(client.free_slots(), 3);
    c.store(control(CALL, g), Relaxed);
    m.store(meta(9, 4), Relaxed);
    let call = server.read_call(t.index).unwrap();
    server.write_reply(&call, b"result").unwrap();
    assert_eq!(client.read_reply(t.index, &t).unwrap(), b"result");
    assert_eq!(
        client.read_reply(t.index, &t),
        Err(SlotError::NotInFlight {
            index: t.index,
            generation: g
        })
    );
    assert_eq!(client.free_slots(), 4);
    // A server handed an index whose slot holds no call.
    assert_eq!(
        server.read_call(other),
        Err(SlotError::BadState {
            found: FREE,
            expected: CALL
        })
    );
    slot_word(&sv, other, 0).store(control(CALL, 3), Relaxed);
    slot_word(&sv, other, 1).store(meta(0, u32::MAX), Relaxed);
    assert_eq!(
        server.read_call(other),
        Err(SlotError::BadLength {
            len: u32::MAX,
            max: s
        })
    );
}

#[test]
fn a_late_reply_after_the_slot_was_reused_is_refused() {
    let layout = ChannelLayout::new(1, 16).unwrap();
    let (server_map, client_map) = two_mappings(&layout);
    let sv = init(server_map.region(), &layout).unwrap();
    let cv = ChannelView::new(client_map.region(), &layout).unwrap();
    let server = ServerSlots::new(&sv);
    let mut client = ClientSlots::new(&cv);

    // The server takes the call, the client gives up and reuses the slot.
    let t1 = client.begin_call(1, b"first").unwrap();
    let c1 = server.read_call(0).unwrap();
    client.abandon(&t1).unwrap();
    assert_eq!(
        client.abandon(&t1),
        Err(SlotError::NotInFlight {
            index: 0,
            generation: t1.generation
        })
    );
    let t2 = client.begin_call(2, b"second").unwrap();
    assert_eq!(t2.index, t1.index);
    assert_ne!(t2.generation, t1.generation);
    // The late reply is not published...
    assert_eq!(
        server.write_reply(&c1, b"late"),
        Err(SlotError::Stale {
            index: 0,
            generation: t1.generation
        })
    );
    // ...and forged as if it were, it completes neither call.
    slot_word(&sv, 0, 0).store(control(REPLY, t1.generation), Relaxed);
    assert_eq!(
        client.read_reply(0, &t2),
        Err(SlotError::BadGeneration {
            found: t1.generation,
            expected: t2.generation
        })
    );
    assert_eq!(
        client.read_reply(0, &t1),
        Err(SlotError::NotInFlight {
            index: 0,
            generation: t1.generation
        })
    );
    // The second call goes through once the slot holds it again.
    slot_word(&sv, 0, 0).store(control(CALL, t2.generation), Relaxed);
    let c2 = server.read_call(0).unwrap();
    assert_eq!((c2.op, c2.args.as_slice()), (2, &b"second"[..]));
    server.write_reply(&c2, b"answer").unwrap();
    assert_eq!(client.read_reply(0, &t2).unwrap(), b"answer");

    // Abandoned before the server looked: the call is withdrawn.
    let t3 = client.begin_call(3, b"third").unwrap();
    client.abandon(&t3).unwrap();
    assert_eq!(
        server.read_call(0),
        Err(SlotError::BadState {
            found: FREE,
            expected: CALL
        })
    );
}
