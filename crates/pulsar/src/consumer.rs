//! Consumers and Readers: Subscribe, Flow, Ack, RedeliverUnacknowledged,
//! Seek, GetLastMessageId, Unsubscribe, CloseConsumer, ConsumerStats. The
//! subscription state is the broker's (`broker::subscription`); this
//! module translates message ids to offsets and back.

use std::ops::Range;

use broker::config::TopicKind;
use broker::subscription::{
    Ack, ConsumerId, ConsumerSpec, LogBounds, StartPosition, SubscribeRequest, SubscriptionKey,
    SubscriptionType,
};
use broker::{now_ms, Broker, Partition};
use magnetar_pulsar_wire::proto::command_ack::AckType;
use magnetar_pulsar_wire::proto::command_subscribe::InitialPosition;
use magnetar_pulsar_wire::proto::{
    CommandAck, CommandGetLastMessageId, CommandGetLastMessageIdResponse, CommandSeek,
    CommandSubscribe, MessageIdData, ServerError,
};
use model::{Offset, Timestamp};
use storage::BatchHeader;

use crate::error::PulsarError;
use crate::message_id::{IdSpace, Position};
use crate::topics::{self, Target};
pub use magnetar_pulsar_core::seek::offset_at_time;

/// A consumer attached on this connection.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// Its subscription.
    pub key: SubscriptionKey,
    /// Its identity in the subscription core.
    pub id: ConsumerId,
    /// What it consumes.
    pub target: Target,
    /// Its subscription type.
    pub sub_type: SubscriptionType,
    /// Its name.
    pub name: String,
}

/// Subscribes (creating the topic if allowed and the subscription if new).
/// Runs on the blocking pool: a new durable subscription is written to the
/// group log before the answer.
/// `after_seek` is where a consumer that was disconnected by a Seek
/// resumes when its client comes back without a start id (a Reader after a
/// seek by time).
pub fn subscribe(
    broker: &Broker,
    connection: u64,
    cmd: &CommandSubscribe,
    after_seek: Option<Offset>,
) -> Result<(Consumer, Vec<broker::subscription::Effect>), PulsarError> {
    let target = topics::resolve(broker, &cmd.topic, cmd.force_topic_creation.unwrap_or(true))?;
    let sub_type = SubscriptionType::from_code(cmd.sub_type as u8).ok_or_else(|| {
        PulsarError::new(
            ServerError::NotAllowedError,
            format!("unknown subscription type {}", cmd.sub_type),
        )
    })?;
    if cmd.subscription.is_empty() {
        return Err(PulsarError::new(
            ServerError::NotAllowedError,
            "empty subscription name",
        ));
    }
    let log = target.partition.log();
    let bounds = LogBounds {
        start: log.log_start_offset(),
        end: log.log_end_offset(),
    };
    let latest_or_earliest = match cmd.initial_position() {
        InitialPosition::Latest => StartPosition::Latest,
        InitialPosition::Earliest => StartPosition::Earliest,
    };
    let start = match (&cmd.start_message_id, after_seek) {
        (None, Some(o)) => StartPosition::Offset(o),
        _ => start_position(&target, cmd, bounds, latest_or_earliest)?,
    };
    let id = ConsumerId {
        connection,
        consumer: cmd.consumer_id,
    };
    let name = cmd.consumer_name.clone().unwrap_or_default();
    let key = SubscriptionKey::new(
        target.topic.name.as_str(),
        target.partition.tp.partition.0,
        cmd.subscription.clone(),
    );
    let effects = broker.subscriptions().subscribe(
        &key,
        SubscribeRequest {
            consumer: ConsumerSpec {
                id,
                name: name.clone(),
                priority_level: cmd.priority_level.unwrap_or(0),
            },
            sub_type,
            durable: cmd.durable.unwrap_or(true),
            partitioned: target.topic.kind == TopicKind::Partitioned,
            start,
        },
        bounds,
        now_ms(),
    )?;
    Ok((
        Consumer {
            key,
            id,
            target,
            sub_type,
            name,
        },
        effects,
    ))
}

/// Where a new subscription starts: the start id (Readers), a rollback
/// duration, or the initial position.
fn start_position(
    target: &Target,
    cmd: &CommandSubscribe,
    bounds: LogBounds,
    latest_or_earliest: StartPosition,
) -> Result<StartPosition, PulsarError> {
    Ok(match &cmd.start_message_id {
        Some(id) => match target.ids.position(id) {
            Position::Earliest | Position::OtherLedger => StartPosition::Earliest,
            Position::Latest => latest_or_earliest,
            Position::At(o) if o >= bounds.end => latest_or_earliest,
            Position::At(o) => StartPosition::Offset(o),
        },
        None => match cmd.start_message_rollback_duration_sec.unwrap_or(0) {
            0 => latest_or_earliest,
            secs => {
                let since = Timestamp(now_ms().0 - (secs as i64).saturating_mul(1000));
                StartPosition::Offset(offset_at_time(&target.partition, since)?)
            }
        },
    })
}

/// How many records the stored batch starting at `entry` holds (1 when
/// `entry` is not a batch start or cannot be read).
fn entry_size(partition: &Partition, entry: Offset) -> u32 {
    let Ok(found) = partition.log().read_region(entry, 1, true) else {
        return 1;
    };
    let Some(region) = found.region else { return 1 };
    let mut header = [0u8; storage::batch::HEADER_LEN];
    if region.read_at(0, &mut header).is_err() {
        return 1;
    }
    match BatchHeader::parse(&header) {
        Ok(h) if h.base_offset == entry => (h.last_offset_delta + 1).max(1) as u32,
        _ => 1,
    }
}

/// The offsets an acknowledged id covers: the whole entry, or one message
/// of it (a batch index), or the messages whose bits are clear in its
/// `ack_set` (batch-index acknowledgement: set bits are still unacked).
fn acked_offsets(partition: &Partition, ids: &IdSpace, id: &MessageIdData) -> Vec<Range<Offset>> {
    let Position::At(at) = ids.position(id) else {
        return Vec::new();
    };
    let entry = Offset(id.entry_id as i64);
    if !id.ack_set.is_empty() {
        let n = entry_size(partition, entry) as usize;
        return (0..n)
            .filter(|i| {
                let word = id.ack_set.get(i / 64).copied().unwrap_or(0);
                word & (1i64 << (i % 64)) == 0
            })
            .map(|i| Offset(entry.0 + i as i64)..Offset(entry.0 + i as i64 + 1))
            .collect();
    }
    if id.batch_index.unwrap_or(-1) >= 0 {
        return vec![at..at.plus(1)];
    }
    let n = entry_size(partition, entry);
    vec![entry..Offset(entry.0 + i64::from(n))]
}

/// CommandAck. Runs on the blocking pool (it may read batch headers).
pub fn ack(broker: &Broker, consumer: &Consumer, cmd: &CommandAck) -> Result<(), PulsarError> {
    let subs = broker.subscriptions();
    let p = &consumer.target.partition;
    let ids = &consumer.target.ids;
    match cmd.ack_type() {
        AckType::Individual => {
            let ranges: Vec<Range<Offset>> = cmd
                .message_id
                .iter()
                .flat_map(|id| acked_offsets(p, ids, id))
                .collect();
            tracing::trace!(?ranges, "individual ack");
            if !ranges.is_empty() {
                subs.ack(&consumer.key, consumer.id, Ack::Individual(ranges))?;
            }
        }
        AckType::Cumulative => {
            for id in &cmd.message_id {
                let Position::At(at) = ids.position(id) else {
                    continue;
                };
                let entry = Offset(id.entry_id as i64);
                let through = if !id.ack_set.is_empty() {
                    // A partial batch: everything before it, and its acked bits.
                    let bits = acked_offsets(p, ids, id);
                    if !bits.is_empty() {
                        subs.ack(&consumer.key, consumer.id, Ack::Individual(bits))?;
                    }
                    entry.plus(-1)
                } else if id.batch_index.unwrap_or(-1) >= 0 {
                    at
                } else {
                    Offset(entry.0 + i64::from(entry_size(p, entry)) - 1)
                };
                if through.0 >= 0 {
                    subs.ack(&consumer.key, consumer.id, Ack::Cumulative(through))?;
                }
            }
        }
    }
    Ok(())
}

/// CommandRedeliverUnacknowledgedMessages: these entries (all their
/// messages) or everything unacknowledged.
pub fn redeliver(
    broker: &Broker,
    consumer: &Consumer,
    ids: &[MessageIdData],
) -> Result<(), PulsarError> {
    let subs = broker.subscriptions();
    if ids.is_empty() {
        subs.redeliver(&consumer.key, consumer.id, None)?;
        return Ok(());
    }
    let p = &consumer.target.partition;
    let offsets: Vec<Offset> = ids
        .iter()
        .flat_map(|id| {
            let entry = Offset(id.entry_id as i64);
            let n = entry_size(p, entry);
            (0..i64::from(n)).map(move |i| Offset(entry.0 + i))
        })
        .collect();
    subs.redeliver(&consumer.key, consumer.id, Some(&offsets))?;
    Ok(())
}

/// CommandSeek: by message id or publish time. Returns the offset the
/// subscription now reads from.
pub fn seek(
    broker: &Broker,
    consumer: &Consumer,
    cmd: &CommandSeek,
) -> Result<Offset, PulsarError> {
    let log = consumer.target.partition.log();
    let offset = if let Some(id) = &cmd.message_id {
        match consumer.target.ids.position(id) {
            Position::Earliest | Position::OtherLedger => log.log_start_offset(),
            Position::Latest => log.log_end_offset(),
            Position::At(o) => o.min(log.log_end_offset()).max(log.log_start_offset()),
        }
    } else if let Some(t) = cmd.message_publish_time {
        offset_at_time(&consumer.target.partition, Timestamp(t as i64))?
    } else {
        return Err(PulsarError::new(
            ServerError::NotAllowedError,
            "seek needs a message id or a publish time",
        ));
    };
    broker.subscriptions().seek(&consumer.key, offset)?;
    Ok(offset)
}

/// CommandGetLastMessageId: the id of the partition's last message and the
/// subscription's mark-delete position (the last acknowledged offset).
/// Runs on the blocking pool (it reads the last batch's header).
pub fn last_message_id(
    broker: &Broker,
    consumer: &Consumer,
    cmd: &CommandGetLastMessageId,
) -> CommandGetLastMessageIdResponse {
    let p = &consumer.target.partition;
    let ids = &consumer.target.ids;
    let log = p.log();
    let end = log.log_end_offset();
    let last = if end > log.log_start_offset() {
        let last = end.plus(-1);
        let base = batch_start(p, last).unwrap_or(last);
        let count = (last.0 - base.0 + 1) as u32;
        ids.id(base, count, last)
    } else {
        MessageIdData {
            ledger_id: ids.ledger,
            entry_id: u64::MAX,
            partition: Some(ids.partition),
            batch_index: Some(-1),
            ..Default::default()
        }
    };
    let mark_delete = broker
        .subscriptions()
        .mark_delete(&consumer.key)
        .map(|m| MessageIdData {
            ledger_id: ids.ledger,
            entry_id: (m.0 - 1) as u64,
            partition: Some(ids.partition),
            batch_index: Some(-1),
            ..Default::default()
        });
    CommandGetLastMessageIdResponse {
        last_message_id: last,
        request_id: cmd.request_id,
        consumer_mark_delete_position: mark_delete,
    }
}

/// The base offset of the batch holding `offset`.
fn batch_start(partition: &Partition, offset: Offset) -> Option<Offset> {
    let found = partition.log().read_region(offset, 1, true).ok()?;
    let region = found.region?;
    let mut header = [0u8; storage::batch::HEADER_LEN];
    region.read_at(0, &mut header).ok()?;
    BatchHeader::parse(&header).ok().map(|h| h.base_offset)
}
