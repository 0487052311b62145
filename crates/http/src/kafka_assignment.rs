//! Reading a classic Kafka group member's assignment (the consumer
//! protocol's `ConsumerProtocolAssignment`, opaque to the group
//! coordinator) to tell which partitions it holds, for topic stats.
//!
//! Layout (versions 0–3 alike, big-endian): version int16, then an array
//! (int32 count) of topics, each a string (int16 length + UTF-8) and an
//! array (int32 count) of int32 partitions; user data follows and is
//! ignored.

/// The topics and partitions an assignment gives, or `None` if the bytes
/// are not a consumer-protocol assignment (another protocol type, or
/// garbage). Counts are checked against the bytes left before anything is
/// allocated.
pub fn assigned(bytes: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    let mut b = bytes;
    let version = take_i16(&mut b)?;
    if version < 0 {
        return None;
    }
    let topics = take_count(&mut b, 2 + 4)?;
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        let len = usize::try_from(take_i16(&mut b)?).ok()?;
        let name = std::str::from_utf8(b.get(..len)?).ok()?.to_string();
        b = &b[len..];
        let n = take_count(&mut b, 4)?;
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push(take_i32(&mut b)?);
        }
        out.push((name, partitions));
    }
    Some(out)
}

fn take_i16(b: &mut &[u8]) -> Option<i16> {
    let v = i16::from_be_bytes(b.get(..2)?.try_into().ok()?);
    *b = &b[2..];
    Some(v)
}

fn take_i32(b: &mut &[u8]) -> Option<i32> {
    let v = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    *b = &b[4..];
    Some(v)
}

/// An array count whose `min_item` bytes per item fit in what is left.
fn take_count(b: &mut &[u8], min_item: usize) -> Option<usize> {
    let n = usize::try_from(take_i32(b)?).ok()?;
    (n.checked_mul(min_item)? <= b.len()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(topics: &[(&str, &[i32])], user_data: &[u8]) -> Vec<u8> {
        let mut out = 1i16.to_be_bytes().to_vec();
        out.extend((topics.len() as i32).to_be_bytes());
        for (t, ps) in topics {
            out.extend((t.len() as i16).to_be_bytes());
            out.extend(t.as_bytes());
            out.extend((ps.len() as i32).to_be_bytes());
            for p in *ps {
                out.extend(p.to_be_bytes());
            }
        }
        out.extend((user_data.len() as i32).to_be_bytes());
        out.extend(user_data);
        out
    }

    #[test]
    fn reads_topics_and_partitions_and_refuses_garbage() {
        let bytes = encode(&[("orders", &[0, 2]), ("b", &[])], b"ud");
        assert_eq!(
            assigned(&bytes),
            Some(vec![("orders".into(), vec![0, 2]), ("b".into(), vec![])])
        );
        assert_eq!(assigned(&[]), None);
        assert_eq!(assigned(&bytes[..9]), None, "truncated");
        // A count far beyond the bytes is refused before allocating.
        let mut huge = 0i16.to_be_bytes().to_vec();
        huge.extend(i32::MAX.to_be_bytes());
        assert_eq!(assigned(&huge), None);
        assert_eq!(assigned(&(-1i16).to_be_bytes()), None);
    }
}
