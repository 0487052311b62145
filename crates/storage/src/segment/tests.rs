use super::*;
use crate::test_util::{batch, simple_records};

fn fill(segment: &mut Segment, batches: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut next = segment.next_offset();
    for i in 0..batches {
        let mut b = batch(&simple_records(0, 4, i as i64 * 10));
        batch::set_base_offset(&mut b, next);
        let epoch = BatchHeader::parse(&b).unwrap().partition_leader_epoch;
        segment
            .append(
                &b,
                next,
                epoch,
                crate::segment::Stamps {
                    fixes: &[],
                    log_append_time: None,
                },
                200,
                Timestamp(0),
            )
            .unwrap();
        next = next.plus(4);
        out.push(b);
    }
    out
}

#[test]
fn names_are_zero_padded_offsets() {
    assert_eq!(file_name(Offset(42), LOG_EXT), "00000000000000000042.log");
    assert_eq!(
        parse_file_name("00000000000000000042.log", LOG_EXT),
        Some(Offset(42))
    );
    assert_eq!(parse_file_name("00000000000000000042.index", LOG_EXT), None);
    assert_eq!(parse_file_name("42.log", LOG_EXT), None);
}

#[test]
fn index_lookups_find_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut segment = Segment::create(dir.path(), Offset(1000)).unwrap();
    let batches = fill(&mut segment, 40);
    assert!(segment.offset_index.entries().len() > 5);
    assert_eq!(segment.next_offset(), Offset(1160));
    assert_eq!(segment.max_timestamp(), Timestamp(393));
    assert_eq!(segment.offset_of_max_timestamp(), Offset(1159));
    for (i, b) in batches.iter().enumerate() {
        for o in 0..4 {
            let view = segment
                .view_for_offset(Offset(1000 + i as i64 * 4 + o))
                .unwrap();
            assert!(view.start <= batches[..i].iter().map(|b| b.len() as u64).sum());
            let (region, next) = view
                .locate(Offset(1000 + i as i64 * 4 + o), b.len(), false)
                .unwrap()
                .unwrap();
            assert_eq!(&region.read_all().unwrap()[..], &b[..]);
            assert_eq!(next, Offset(1000 + (i as i64 + 1) * 4), "after the batch");
        }
    }
    // Timestamp search through the time index.
    let view = segment.view_for_timestamp(Timestamp(205)).unwrap();
    let found = find_timestamp_in(&view, Timestamp(205), Offset(0))
        .unwrap()
        .unwrap();
    assert_eq!(
        (found.offset, found.timestamp),
        (Offset(1000 + 21 * 4), Timestamp(210))
    );
}

#[test]
fn load_trusts_indexes_and_finds_the_end_of_the_last_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut segment = Segment::create(dir.path(), Offset(0)).unwrap();
    fill(&mut segment, 25);
    segment.seal_time_index().unwrap();
    let entries = segment.offset_index.entries().to_vec();
    drop(segment);
    let loaded = Segment::load(dir.path(), Offset(0), None, 200).unwrap();
    assert!(!loaded.index_rebuilt && !loaded.needs_recovery);
    assert_eq!(loaded.segment.offset_index.entries(), &entries[..]);
    assert_eq!(loaded.segment.next_offset(), Offset(100));
    assert_eq!(loaded.segment.max_timestamp(), Timestamp(243));
    assert_eq!(loaded.segment.first_batch_timestamp(), Some(Timestamp(3)));
    // A closed segment takes its end from the next segment's base.
    let loaded = Segment::load(dir.path(), Offset(0), Some(Offset(100)), 200).unwrap();
    assert_eq!(loaded.segment.next_offset(), Offset(100));
}

#[test]
fn recovery_cuts_at_the_first_corrupt_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut segment = Segment::create(dir.path(), Offset(0)).unwrap();
    let batches = fill(&mut segment, 10);
    let path = segment.log_path().to_path_buf();
    drop(segment);
    // Flip a byte inside the 7th batch's records.
    let mut content = std::fs::read(&path).unwrap();
    let at: usize = batches[..6].iter().map(Vec::len).sum::<usize>() + 70;
    content[at] ^= 0x55;
    std::fs::write(&path, &content).unwrap();
    let (segment, truncated) = Segment::recover(dir.path(), Offset(0), 200).unwrap();
    let kept: usize = batches[..6].iter().map(Vec::len).sum();
    assert_eq!(segment.size(), kept as u64);
    assert_eq!(truncated as usize, content.len() - kept);
    assert_eq!(segment.next_offset(), Offset(24));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), kept as u64);
}
