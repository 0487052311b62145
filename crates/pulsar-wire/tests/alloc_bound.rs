//! (1) Arbitrary bytes fed to the decoder in arbitrary chunks never panic
//! and never make it allocate more than the configured frame limit plus
//! the input's length.
//!
//! A counting global allocator tracks, per thread, the bytes allocated and
//! their peak. What is measured is what `FrameDecoder::decode` allocates,
//! on top of the read buffer
//! the test itself fills. The bound allows a fixed amount on top: one
//! boxed `BaseCommand` (a checksum error keeps the command) and 4 KiB of
//! bookkeeping, none of which depends on a size read from the input.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, BytesMut};
use common::*;
use magnetar_pulsar_wire::proto::{command_ack, CommandAck, MessageIdData};
use magnetar_pulsar_wire::{command, FrameDecoder};
use proptest::collection::vec;
use proptest::prelude::*;

struct Counting;

thread_local! {
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Records `grow` bytes more (negative: fewer); `transient` more are
/// counted towards the peak only (a reallocation's old and new blocks).
fn account(grow: isize, transient: isize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + grow;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now + transient)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// bookkeeping only touches const-initialised thread-locals, which never
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            account(layout.size() as isize, 0);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            account(layout.size() as isize, 0);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        account(-(layout.size() as isize), 0);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            account(
                new_size as isize - layout.size() as isize,
                layout.size() as isize,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns the peak allocation above the level at the start.
fn peak_during(f: impl FnOnce()) -> isize {
    let base = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(base));
    f();
    PEAK.with(Cell::get) - base
}

/// Fixed costs: a boxed `BaseCommand` (kept by a checksum error) and 4 KiB.
fn slack() -> isize {
    (std::mem::size_of::<magnetar_pulsar_wire::proto::BaseCommand>() + 4096) as isize
}

/// Input that reaches past the size checks: valid frames, damaged.
fn framed_input() -> impl Strategy<Value = Vec<u8>> {
    (
        vec(
            prop_oneof![
                any_base_command().prop_map(|c| encoded_command(&c).to_vec()),
                payload_frame_of(300).prop_map(|f| f.encode().0.to_vec()),
            ],
            1..4,
        ),
        vec((any::<proptest::sample::Index>(), any::<u8>()), 0..4),
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(frames, flips, cut)| {
            let mut bytes = frames.concat();
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = bytes.len() - cut.index(bytes.len() / 4 + 1);
            bytes.truncate(keep);
            bytes
        })
}

/// Input that starts with an announced size, often a huge one.
fn announced_size_input() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            any::<u32>(),
            Just(u32::MAX),
            0u32..64,
            1u32 << 20..1u32 << 31
        ],
        vec(any::<u8>(), 0..64),
    )
        .prop_map(|(size, tail)| {
            let mut bytes = size.to_be_bytes().to_vec();
            bytes.extend_from_slice(&tail);
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decoder_allocation_is_bounded(
        input in prop_oneof![
            vec(any::<u8>(), 0..4096),
            framed_input(),
            announced_size_input(),
        ],
        max_frame_size in prop_oneof![16u32..1024, 1024u32..65536, Just(magnetar_pulsar_wire::DEFAULT_MAX_FRAME_SIZE)],
        chunks in vec(1usize..512, 1..32),
    ) {
        // The read buffer is the caller's; sized up front so that filling
        // it allocates nothing while we measure.
        let mut buf = BytesMut::with_capacity(input.len());
        let mut decoder = FrameDecoder::new(max_frame_size);
        let peak = peak_during(|| {
            let mut rest = &input[..];
            let mut sizes = chunks.iter().cycle();
            'feed: while !rest.is_empty() {
                let n = (*sizes.next().unwrap()).min(rest.len());
                buf.put_slice(&rest[..n]);
                rest = &rest[n..];
                loop {
                    match decoder.decode(&mut buf) {
                        Ok(Some(frame)) => drop(frame),
                        Ok(None) => break,
                        Err(e) if e.command().is_some() => {}
                        Err(_) => break 'feed,
                    }
                }
            }
        });
        let bound = max_frame_size as isize + input.len() as isize + slack();
        prop_assert!(peak <= bound, "peak {} > bound {}", peak, bound);
    }
}

/// What protobuf decoding may cost beyond the frame's own bytes: a frame
/// packed with the smallest valid repeated sub-messages (an ACK of
/// 6-byte MessageIdData entries) decodes into about 80 bytes per entry.
/// This pins that factor so that it does not grow unnoticed; the frame
/// limit bounds it.
#[test]
fn decoded_size_is_a_bounded_multiple_of_the_frame() {
    let ids = vec![
        MessageIdData {
            ledger_id: 0,
            entry_id: 0,
            ..Default::default()
        };
        10_000
    ];
    let ack = command(CommandAck {
        consumer_id: 1,
        ack_type: command_ack::AckType::Individual as i32,
        message_id: ids,
        ..Default::default()
    });
    let mut buf = encoded_command(&ack);
    drop(ack);
    let frame_len = buf.len() as isize;
    let mut frame = None;
    let peak = peak_during(|| frame = FrameDecoder::default().decode(&mut buf).unwrap());
    assert_eq!(frame.unwrap().command.ack.unwrap().message_id.len(), 10_000);
    let factor = peak / frame_len;
    eprintln!("decoding {frame_len} bytes peaked at {peak} ({factor}x)");
    assert!(
        factor <= 40,
        "decoding {frame_len} bytes peaked at {peak} ({factor}x)"
    );
}

/// A frame lacking a required field deep inside is refused before prost
/// builds anything from it.
#[test]
fn refused_frames_are_refused_before_decoding() {
    // An ACK of 10,000 empty MessageIdData entries (2 bytes each).
    let mut cmd = vec![0x08, 10, 0x52];
    let mut ack = vec![0x08, 0x01, 0x10, 0x00];
    for _ in 0..10_000 {
        ack.extend_from_slice(&[0x1a, 0x00]);
    }
    prost::encoding::encode_varint(ack.len() as u64, &mut cmd);
    cmd.extend_from_slice(&ack);
    let mut buf = BytesMut::new();
    buf.put_u32(4 + cmd.len() as u32);
    buf.put_u32(cmd.len() as u32);
    buf.put_slice(&cmd);
    let mut result = None;
    let peak = peak_during(|| result = Some(FrameDecoder::default().decode(&mut buf)));
    assert!(result.unwrap().is_err());
    assert!(peak < 4096, "peak {peak}");
}
