//! Fetching for the consumer and the reader: a position per partition,
//! one Fetch in flight per leader on a lane of its own, responses decoded
//! once into per-partition buffers, and the recoveries every reader needs
//! (metadata refresh on leader errors, backoff on failures, out-of-range
//! positions resolved by a policy).
//!
//! The *position* of a partition is the next offset handed to the user;
//! the *fetch offset* runs ahead of it by whatever is buffered, so the next
//! Fetch is in flight while the user works through the last one.

pub(crate) mod decode;
pub(crate) mod list_offsets;

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::client::{Client, Lane};
use crate::error::{Error, Result};
use crate::message::{Message, TopicPartition};
use crate::metadata::NodeId;
use list_offsets::{EARLIEST, LATEST};

/// Where to put a partition whose position is not a known offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reset {
    /// The first offset still in the log.
    Earliest,
    /// The end of the log (the next offset to be written).
    Latest,
    /// The last message in the log (the end if the log is empty).
    LastMessage,
    /// The first message at or after this timestamp (ms); the end if none.
    Timestamp(i64),
    /// This offset, moved into the log's current bounds.
    Clamp(i64),
    /// No position and no policy: [`Error::NoOffset`] until a seek.
    Undefined,
}

/// A partition's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pos {
    /// The next offset to hand out.
    At(i64),
    /// To be looked up with ListOffsets.
    Pending(Reset),
}

/// What OFFSET_OUT_OF_RANGE does to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutOfRange {
    /// Start over from here (a consumer's `auto_offset_reset`).
    Reset(Reset),
    /// Report an error (`auto_offset_reset = none`).
    Fail,
    /// Move to the nearest offset in the log (the reader).
    Clamp,
}

/// In which order buffered messages of different partitions come out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Round-robin over partitions with data, one message each.
    Arrival,
    /// Smallest timestamp first among the partitions' next messages (see
    /// [`crate::Reader`]).
    Timestamp,
}

/// Fetch request settings.
#[derive(Debug, Clone)]
pub(crate) struct FetchSettings {
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
}

struct Part {
    tp: TopicPartition,
    topic: Arc<str>,
    pos: Pos,
    fetch_offset: i64,
    buffer: VecDeque<Message>,
    /// Response bytes behind `buffer`; 0 once it drains.
    buffered_bytes: usize,
    /// Request id and partition epoch of the Fetch in flight.
    inflight: Option<(u64, u64)>,
    /// Changes on every seek, so answers to older fetches are dropped.
    epoch: u64,
    /// From the last successful fetch; -1 before the first.
    high_watermark: i64,
    retry_at: Option<Instant>,
    failures: u32,
    /// OFFSET_OUT_OF_RANGE arrived while messages were still buffered;
    /// handled once they are handed out.
    out_of_range: bool,
    queued: bool,
    /// The last answer held only part of a batch: a batch larger than the
    /// broker would send for a partition that was not first in the
    /// request. It goes first next time (brokers always send the first
    /// partition's first batch whole).
    starved: bool,
}

struct Done {
    node: NodeId,
    id: u64,
    sent: Vec<(Arc<str>, i32)>,
    result: Result<FetchResponse>,
}

type InFlight = Pin<Box<dyn Future<Output = Done> + Send>>;

/// The fetch state of a set of partitions.
pub(crate) struct Fetcher {
    client: Client,
    lane: Lane,
    cfg: FetchSettings,
    order: Order,
    out_of_range: OutOfRange,
    parts: Vec<Part>,
    index: HashMap<Arc<str>, HashMap<i32, usize>>,
    /// Partitions with buffered messages, for [`Order::Arrival`].
    ready: VecDeque<usize>,
    inflight: FuturesUnordered<InFlight>,
    busy: HashSet<NodeId>,
    next_id: u64,
    stale_metadata: bool,
    next_metadata: Instant,
    errors: VecDeque<Error>,
}

impl Fetcher {
    pub fn new(
        client: Client,
        lane: Lane,
        cfg: FetchSettings,
        order: Order,
        out_of_range: OutOfRange,
    ) -> Fetcher {
        Fetcher {
            client,
            lane,
            cfg,
            order,
            out_of_range,
            parts: Vec::new(),
            index: HashMap::new(),
            ready: VecDeque::new(),
            inflight: FuturesUnordered::new(),
            busy: HashSet::new(),
            next_id: 0,
            stale_metadata: false,
            next_metadata: Instant::now(),
            errors: VecDeque::new(),
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Adds `tp` at `pos`, or moves it there if present.
    pub fn add(&mut self, tp: TopicPartition, pos: Pos) {
        if self.seek(&tp, pos) {
            return;
        }
        let epoch = self.next_id();
        let topic = match self.index.get_key_value(tp.topic.as_str()) {
            Some((t, _)) => t.clone(),
            None => Arc::from(tp.topic.as_str()),
        };
        self.index
            .entry(topic.clone())
            .or_default()
            .insert(tp.partition, self.parts.len());
        self.parts.push(Part {
            tp,
            topic,
            pos,
            fetch_offset: match pos {
                Pos::At(o) => o,
                Pos::Pending(_) => -1,
            },
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            inflight: None,
            epoch,
            high_watermark: -1,
            retry_at: None,
            failures: 0,
            out_of_range: false,
            queued: false,
            starved: false,
        });
    }

    /// Keeps only the partitions `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&TopicPartition) -> bool) {
        self.parts.retain(|p| keep(&p.tp));
        self.index.clear();
        for (i, p) in self.parts.iter().enumerate() {
            self.index
                .entry(p.topic.clone())
                .or_default()
                .insert(p.tp.partition, i);
        }
        self.ready.clear();
        for (i, p) in self.parts.iter_mut().enumerate() {
            p.queued = !p.buffer.is_empty();
            if p.queued {
                self.ready.push_back(i);
            }
        }
    }

    /// Moves `tp` to `pos`, dropping what was buffered. False if `tp` is
    /// not one of ours.
    pub fn seek(&mut self, tp: &TopicPartition, pos: Pos) -> bool {
        let Some(i) = self.find(&tp.topic, tp.partition) else {
            return false;
        };
        let epoch = self.next_id();
        let p = &mut self.parts[i];
        p.pos = pos;
        if let Pos::At(o) = pos {
            p.fetch_offset = o;
        }
        p.buffer.clear();
        p.buffered_bytes = 0;
        p.epoch = epoch;
        p.retry_at = None;
        p.failures = 0;
        p.out_of_range = false;
        true
    }

    fn find(&self, topic: &str, partition: i32) -> Option<usize> {
        self.index.get(topic)?.get(&partition).copied()
    }

    /// The partitions, in the order they were added.
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.parts.iter().map(|p| &p.tp)
    }

    /// Whether `tp` is one of ours.
    pub fn contains(&self, tp: &TopicPartition) -> bool {
        self.find(&tp.topic, tp.partition).is_some()
    }

    /// `tp`'s position.
    pub fn position(&self, tp: &TopicPartition) -> Option<Pos> {
        self.find(&tp.topic, tp.partition)
            .map(|i| self.parts[i].pos)
    }

    /// Every known position.
    pub fn positions(&self) -> impl Iterator<Item = (&TopicPartition, i64)> + '_ {
        self.parts.iter().filter_map(|p| match p.pos {
            Pos::At(o) => Some((&p.tp, o)),
            Pos::Pending(_) => None,
        })
    }

    /// Whether any message is buffered.
    pub fn has_buffered(&self) -> bool {
        self.parts.iter().any(|p| !p.buffer.is_empty())
    }

    /// An error a fetch ran into, once.
    pub fn take_error(&mut self) -> Option<Error> {
        self.errors.pop_front()
    }

    /// The next buffered message in this fetcher's [`Order`]; advances its
    /// partition's position.
    pub fn next(&mut self) -> Option<Message> {
        let i = match self.order {
            Order::Arrival => loop {
                let i = self.ready.pop_front()?;
                let p = &mut self.parts[i];
                p.queued = false;
                if !p.buffer.is_empty() {
                    break i;
                }
            },
            Order::Timestamp => self.earliest_head()?,
        };
        let half = (self.cfg.partition_max_bytes.max(2) / 2) as usize;
        let p = &mut self.parts[i];
        let m = p.buffer.pop_front()?;
        p.pos = Pos::At(m.offset() + 1);
        let before = p.buffered_bytes;
        // What a message took in its batch, roughly: enough for flow control.
        let size = m.key().map_or(0, <[u8]>::len) + m.value().map_or(0, <[u8]>::len) + 16;
        p.buffered_bytes = p.buffered_bytes.saturating_sub(size);
        if p.buffer.is_empty() {
            p.buffered_bytes = 0;
            if p.out_of_range {
                p.out_of_range = false;
                let policy = self.out_of_range;
                self.apply_out_of_range(i, policy);
            }
        } else if self.order == Order::Arrival {
            p.queued = true;
            self.ready.push_back(i);
        }
        // Half drained: fetch more now, so the answer is on its way while
        // the rest is handed out (instead of fetching only once all is).
        let p = &self.parts[i];
        if before >= half && p.buffered_bytes < half || p.buffer.is_empty() {
            self.prefetch();
        }
        Some(m)
    }

    /// Takes in fetches that have answered and sends new ones for
    /// partitions with room, without waiting for anything.
    fn prefetch(&mut self) {
        self.take_answers();
        self.send_fetches();
        // Polling once sends the new requests; their answers are taken in
        // by a later prefetch or fill.
        self.take_answers();
    }

    /// Takes in every fetch that has answered, without waiting. Polled
    /// outside tokio's cooperative budget: a consumer handing out buffered
    /// messages may have used its budget up, and a budget-limited poll
    /// would then not even send the requests.
    fn take_answers(&mut self) {
        while let Some(Some(done)) = tokio::task::unconstrained(self.inflight.next()).now_or_never()
        {
            self.complete(done);
        }
    }

    /// The partition whose next message has the smallest (timestamp,
    /// partition), or `None` while a partition known to have more data has
    /// nothing buffered yet.
    fn earliest_head(&self) -> Option<usize> {
        let mut best: Option<(i64, i32, usize)> = None;
        for (i, p) in self.parts.iter().enumerate() {
            match p.buffer.front() {
                Some(m) => {
                    let key = (m.timestamp(), p.tp.partition, i);
                    if best.is_none_or(|b| key < b) {
                        best = Some(key);
                    }
                }
                None => {
                    let healthy = p.retry_at.is_none() && !p.out_of_range;
                    let behind = match p.pos {
                        Pos::Pending(_) => true,
                        Pos::At(_) => p.high_watermark < 0 || p.fetch_offset < p.high_watermark,
                    };
                    if healthy && behind {
                        return None;
                    }
                }
            }
        }
        best.map(|b| b.2)
    }

    /// Resolves pending positions, sends fetches, and waits until a fetch
    /// answers, `deadline` passes or `wake` is notified.
    pub async fn fill(&mut self, deadline: Instant, wake: Option<&Notify>) {
        self.refresh_metadata_if_stale().await;
        self.resolve_pending().await;
        self.send_fetches();
        let now = Instant::now();
        let retry = self
            .parts
            .iter()
            .filter_map(|p| p.retry_at)
            .filter(|t| *t > now)
            .min();
        let until = retry.map_or(deadline, |r| r.min(deadline));
        let woken = async {
            match wake {
                Some(n) => n.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(done) = self.inflight.next(), if !self.inflight.is_empty() => self.complete(done),
            _ = tokio::time::sleep_until(until) => {}
            _ = woken => {}
        }
        // Take in whatever else answered and ask again at once, so the
        // next answers travel while these messages are handed out.
        self.prefetch();
    }

    async fn refresh_metadata_if_stale(&mut self) {
        if !self.stale_metadata || Instant::now() < self.next_metadata {
            return;
        }
        self.stale_metadata = false;
        self.next_metadata = Instant::now() + self.cfg.retry_backoff;
        let topics: Vec<&str> = self.index.keys().map(|t| &**t).collect();
        if let Err(e) = self.client.refresh_metadata(&topics).await {
            tracing::debug!(error = %e, "metadata refresh failed");
            self.stale_metadata = true;
        }
    }

    /// Looks up every pending position that is not backing off.
    pub async fn resolve_pending(&mut self) {
        let now = Instant::now();
        let mut which = Vec::new();
        let mut queries = Vec::new();
        let mut undefined = Vec::new();
        for (i, p) in self.parts.iter().enumerate() {
            let Pos::Pending(r) = p.pos else { continue };
            if p.retry_at.is_some_and(|t| t > now) {
                continue;
            }
            let specs: &[i64] = match r {
                Reset::Undefined => {
                    undefined.push(i);
                    continue;
                }
                Reset::Earliest => &[EARLIEST],
                Reset::Latest => &[LATEST],
                Reset::LastMessage | Reset::Clamp(_) => &[EARLIEST, LATEST],
                Reset::Timestamp(ts) => &[ts, LATEST],
            };
            which.push((i, p.epoch, queries.len()));
            queries.extend(specs.iter().map(|s| (p.topic.clone(), p.tp.partition, *s)));
        }
        for i in undefined {
            let p = &mut self.parts[i];
            p.retry_at = Some(now + Duration::from_secs(1));
            self.errors.push_back(Error::NoOffset(p.tp.clone()));
        }
        if which.is_empty() {
            return;
        }
        let answers = list_offsets::list_offsets(&self.client, self.lane, &queries).await;
        for (n, &(i, epoch, at)) in which.iter().enumerate() {
            let end = which.get(n + 1).map_or(answers.len(), |w| w.2);
            let got: Result<Vec<i64>> = answers[at..end].iter().cloned().collect();
            let Some(p) = self.parts.get(i).filter(|p| p.epoch == epoch) else {
                continue; // moved or removed while we asked
            };
            let Pos::Pending(r) = p.pos else { continue };
            match got {
                Ok(o) => {
                    let offset = match r {
                        Reset::Earliest | Reset::Latest | Reset::Undefined => o[0],
                        Reset::LastMessage => (o[1] - 1).max(o[0]),
                        Reset::Timestamp(_) if o[0] >= 0 => o[0],
                        Reset::Timestamp(_) => o[1],
                        Reset::Clamp(want) => want.clamp(o[0], o[1].max(o[0])),
                    };
                    let p = &mut self.parts[i];
                    p.pos = Pos::At(offset);
                    p.fetch_offset = offset;
                    p.retry_at = None;
                    p.failures = 0;
                }
                Err(e) => self.failed(i, e),
            }
        }
    }

    fn failed(&mut self, i: usize, e: Error) {
        if e.invalidates_metadata() {
            self.stale_metadata = true;
        }
        let p = &mut self.parts[i];
        tracing::debug!(partition = %p.tp, error = %e, "fetch failed; backing off");
        p.failures = p.failures.saturating_add(1);
        let factor = 1u32 << p.failures.min(4).saturating_sub(1);
        let delay = (self.cfg.retry_backoff * factor).min(Duration::from_secs(1));
        p.retry_at = Some(Instant::now() + delay);
        if !e.is_retriable() {
            self.errors.push_back(e);
        }
    }

    fn fetchable(&self, p: &Part, now: Instant) -> bool {
        matches!(p.pos, Pos::At(_))
            && p.inflight.is_none()
            && !p.out_of_range
            && p.retry_at.is_none_or(|t| t <= now)
            // Room for one more answer: fetching goes on while the
            // application works through what came before.
            && p.buffered_bytes < self.cfg.partition_max_bytes.max(1) as usize * 2
    }

    /// One Fetch per leader that has none in flight, for every partition
    /// that is not backing off and has room in its buffer.
    fn send_fetches(&mut self) {
        let now = Instant::now();
        let md = self.client.metadata();
        let mut per_node: HashMap<NodeId, Vec<usize>> = HashMap::new();
        for (i, p) in self.parts.iter().enumerate() {
            if !self.fetchable(p, now) {
                continue;
            }
            match md.leader(&p.topic, p.tp.partition) {
                Some(n) if !self.busy.contains(&n) => per_node.entry(n).or_default().push(i),
                Some(_) => {}
                None => self.stale_metadata = true,
            }
        }
        for (node, mut idx) in per_node {
            idx.sort_by_key(|&i| !self.parts[i].starved);
            let id = self.next_id();
            let mut wanted: Vec<(Arc<str>, i32, i64, i32)> = Vec::with_capacity(idx.len());
            for i in idx {
                let p = &mut self.parts[i];
                p.inflight = Some((id, p.epoch));
                p.retry_at = None;
                let epoch = md
                    .topics
                    .get(&*p.topic)
                    .and_then(|t| t.partition(p.tp.partition))
                    .map_or(-1, |m| m.leader_epoch);
                wanted.push((p.topic.clone(), p.tp.partition, p.fetch_offset, epoch));
            }
            self.busy.insert(node);
            let client = self.client.clone();
            let lane = self.lane;
            let cfg = self.cfg.clone();
            self.inflight.push(Box::pin(async move {
                let sent = wanted.iter().map(|w| (w.0.clone(), w.1)).collect();
                let result = fetch(&client, lane, node, &cfg, wanted).await;
                Done {
                    node,
                    id,
                    sent,
                    result,
                }
            }));
        }
    }

    fn complete(&mut self, done: Done) {
        self.busy.remove(&done.node);
        let resp = match done
            .result
            .and_then(|r| Error::check(r.error_code, None).map(|_| r))
        {
            Ok(r) => r,
            Err(e) => {
                for (t, p) in &done.sent {
                    if let Some(i) = self.ours(t, *p, done.id) {
                        self.parts[i].inflight = None;
                        self.failed(i, e.clone());
                    }
                }
                return;
            }
        };
        for topic in resp.responses {
            for pd in topic.partitions {
                let Some(i) = self.ours(topic.topic.0.as_str(), pd.partition_index, done.id) else {
                    continue;
                };
                let (_, sent_epoch) = self.parts[i].inflight.take().expect("ours");
                if self.parts[i].epoch != sent_epoch {
                    continue; // sought elsewhere meanwhile
                }
                match Error::from_code(pd.error_code, None) {
                    None => self.absorb(i, pd.high_watermark, pd.records.unwrap_or_default()),
                    Some(e) if e.kafka_error() == Some(ResponseError::OffsetOutOfRange) => {
                        let p = &mut self.parts[i];
                        if p.buffer.is_empty() {
                            let policy = self.out_of_range;
                            self.apply_out_of_range(i, policy);
                        } else {
                            p.out_of_range = true;
                        }
                    }
                    Some(e) => self.failed(i, e),
                }
            }
        }
        // Partitions the broker left out of its answer.
        for (t, p) in &done.sent {
            if let Some(i) = self.ours(t, *p, done.id) {
                self.parts[i].inflight = None;
            }
        }
    }

    /// The index of `topic`/`partition` if request `id` is its fetch.
    fn ours(&self, topic: &str, partition: i32, id: u64) -> Option<usize> {
        let i = self.find(topic, partition)?;
        (self.parts[i].inflight.map(|f| f.0) == Some(id)).then_some(i)
    }

    fn absorb(&mut self, i: usize, high_watermark: i64, records: bytes::Bytes) {
        let p = &mut self.parts[i];
        p.high_watermark = high_watermark;
        p.failures = 0;
        let was_empty = p.buffer.is_empty();
        let had_records = !records.is_empty();
        match decode::absorb(
            &p.topic,
            p.tp.partition,
            records,
            p.fetch_offset,
            &mut p.buffer,
        ) {
            Ok((next, used)) => {
                p.starved = had_records && used == 0;
                p.fetch_offset = next;
                p.buffered_bytes += used;
                if was_empty && !p.buffer.is_empty() && !p.queued {
                    p.queued = true;
                    self.ready.push_back(i);
                }
            }
            Err(e) => {
                self.errors.push_back(e.clone());
                self.failed(i, e);
            }
        }
    }

    fn apply_out_of_range(&mut self, i: usize, policy: OutOfRange) {
        let p = &mut self.parts[i];
        let at = p.fetch_offset;
        tracing::debug!(partition = %p.tp, offset = at, ?policy, "offset out of range");
        match policy {
            OutOfRange::Reset(r) => p.pos = Pos::Pending(r),
            OutOfRange::Clamp => p.pos = Pos::Pending(Reset::Clamp(at)),
            OutOfRange::Fail => {
                let msg = format!("{} has no offset {at} and auto_offset_reset is none", p.tp);
                let e = Error::from_code(ResponseError::OffsetOutOfRange.code(), Some(&msg))
                    .expect("non-zero code");
                self.errors.push_back(e.clone());
                self.failed(i, e);
            }
        }
    }

    /// The (earliest, end) offsets of every partition, in the order of
    /// [`Fetcher::partitions`]. The future borrows nothing (it is `Send`).
    pub fn bounds(&self) -> impl Future<Output = Vec<Result<(i64, i64)>>> + Send + 'static {
        let queries: Vec<_> = self
            .parts
            .iter()
            .flat_map(|p| [EARLIEST, LATEST].map(|spec| (p.topic.clone(), p.tp.partition, spec)))
            .collect();
        let client = self.client.clone();
        let lane = self.lane;
        async move {
            let answers = list_offsets::list_offsets(&client, lane, &queries).await;
            answers
                .chunks(2)
                .map(|c| Ok((c[0].clone()?, c[1].clone()?)))
                .collect()
        }
    }
}

/// One Fetch request to `node` on `lane`.
async fn fetch(
    client: &Client,
    lane: Lane,
    node: NodeId,
    cfg: &FetchSettings,
    wanted: Vec<(Arc<str>, i32, i64, i32)>,
) -> Result<FetchResponse> {
    let conn = client.connection_on_lane(node, lane).await?;
    let v = conn.versions().pick::<FetchRequest>()?;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (topic, partition, offset, epoch) in wanted {
        let mut fp = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(cfg.partition_max_bytes);
        if v >= 9 {
            fp = fp.with_current_leader_epoch(epoch);
        }
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == &*topic => t.partitions.push(fp),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![fp]),
            ),
        }
    }
    let req = FetchRequest::default()
        .with_max_wait_ms(cfg.max_wait.as_millis().min(i32::MAX as u128) as i32)
        .with_min_bytes(cfg.min_bytes)
        .with_max_bytes(cfg.max_bytes)
        .with_topics(topics);
    conn.send_with_timeout(v, &req, cfg.max_wait + cfg.request_timeout)?
        .await
}
