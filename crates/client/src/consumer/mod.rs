//! The consumer: classic group membership (or manual assignment), fetching,
//! commits, and checkpoints for stream processors.

mod assignor;
mod builder;
mod checkpoint;
mod group;
mod protocol;
mod rebalance;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use tokio::time::Instant;

pub use assignor::Assignor;
pub use builder::{AutoOffsetReset, ConsumerBuilder};
pub use checkpoint::Offsets;

use crate::client::{Client, Lane};
use crate::error::{Error, Result};
use crate::fetcher::{FetchSettings, Fetcher, Order, OutOfRange, Pos, Reset};
use crate::message::{Message, TopicPartition};
use builder::ConsumerConfig;
use group::{Group, GroupConfig};

/// Called around rebalances of a subscribed [`Consumer`].
///
/// The calls are synchronous and run inside [`Consumer::recv`] (or
/// [`Consumer::poll`], [`Consumer::close`]), on the task that consumes, so
/// no message of a revoked partition is handed out after
/// `on_partitions_revoked` returns and none of an assigned one before
/// `on_partitions_assigned` is called. Keep them short: the group waits
/// (up to the rebalance timeout) while they run. Rebalances are *eager*:
/// every rebalance revokes the whole assignment, then assigns the new one.
/// With auto-commit on, positions are committed just before
/// `on_partitions_revoked`.
///
/// ```
/// use std::sync::Mutex;
/// use magnetar_client::{RebalanceListener, TopicPartition};
/// #[derive(Default)]
/// struct Log(Mutex<Vec<String>>);
/// impl RebalanceListener for Log {
///     fn on_partitions_revoked(&self, p: &[TopicPartition]) {
///         self.0.lock().unwrap().push(format!("revoked {p:?}"));
///     }
///     fn on_partitions_assigned(&self, p: &[TopicPartition]) {
///         self.0.lock().unwrap().push(format!("assigned {p:?}"));
///     }
/// }
/// ```
pub trait RebalanceListener: Send + Sync {
    /// These partitions are no longer this consumer's (sorted).
    fn on_partitions_revoked(&self, _partitions: &[TopicPartition]) {}
    /// These partitions are now this consumer's (sorted; possibly empty).
    fn on_partitions_assigned(&self, _partitions: &[TopicPartition]) {}
}

/// A listener that does nothing.
impl RebalanceListener for () {}

/// What the consumer reads.
enum Subscription {
    None,
    /// [`Consumer::assign`]ed partitions, no group membership.
    Manual,
    Topics(Vec<String>),
    /// A regex (anchored at both ends) and the topics it matched last.
    Pattern {
        regex: regex::Regex,
        matched: Vec<String>,
    },
}

/// A Kafka consumer: a member of a classic consumer group
/// ([`Consumer::subscribe`], [`Consumer::subscribe_pattern`]) or a reader
/// of partitions it was given ([`Consumer::assign`]).
///
/// Group membership speaks the standard `consumer` protocol with the
/// `range` and `roundrobin` assignors, so it shares groups with Java and
/// librdkafka consumers. Heartbeats run in a background task on a
/// connection of their own; joining, syncing and revoking happen inside
/// [`Consumer::recv`] (as in Java's `poll`), so call it regularly. Fetches
/// use another connection, and the next Fetch is in flight while you
/// process the last one.
///
/// [`Consumer::close`] commits (with auto-commit) and leaves the group at
/// once; a consumer dropped without it just stops heartbeating, like a
/// crashed one, and the group reassigns its partitions when its session
/// expires.
///
/// A message is consumed when `recv` returns it: the partition's position
/// moves past it, and that position is what [`Consumer::commit`] and
/// [`Consumer::checkpoint`] record. `recv` is cancel-safe: dropping its
/// future loses no message.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use magnetar_client::{AutoOffsetReset, Consumer};
/// let mut consumer = Consumer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .group_id("audit")
///     .auto_offset_reset(AutoOffsetReset::Earliest)
///     .build()
///     .await?;
/// consumer.subscribe(&["orders", "payments"])?;
/// for _ in 0..10 {
///     let m = consumer.recv().await?;
///     println!("{}-{}@{}: {:?}", m.topic(), m.partition(), m.offset(), m.value());
/// }
/// consumer.commit().await?;
/// consumer.close().await?;
/// # Ok(()) }
/// ```
pub struct Consumer {
    client: Client,
    cfg: ConsumerConfig,
    fetch_lane: Lane,
    fetcher: Fetcher,
    group: Option<Group>,
    sub: Subscription,
    listener: Option<Box<dyn RebalanceListener>>,
    /// Sorted.
    assignment: Vec<TopicPartition>,
    /// Positions of partitions not assigned here: restored ones not
    /// applied yet, and (without auto-commit) those of revoked partitions,
    /// for when they come back (eager rebalances revoke everything).
    carried: Offsets,
    /// [`Consumer::restore`] was called and no assignment has applied it
    /// yet: carried positions win over committed offsets. Afterwards the
    /// later of the two wins, since another member may have moved on.
    fresh_restore: bool,
    /// Partition counts of the group's topics at the last assignment we
    /// computed as leader; a change means a new rebalance.
    group_topics: BTreeMap<String, i32>,
    leader: bool,
    last_auto_commit: Vec<(TopicPartition, i64)>,
    next_auto_commit: Instant,
    next_metadata_check: Instant,
    group_retry_at: Instant,
    closed: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("group_id", &self.cfg.group_id)
            .field("assignment", &self.assignment)
            .finish_non_exhaustive()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.client.release_lane(self.fetch_lane);
    }
}

impl Consumer {
    /// A builder with Kafka's defaults.
    pub fn builder() -> ConsumerBuilder {
        ConsumerBuilder::default()
    }

    pub(crate) fn new(client: Client, cfg: ConsumerConfig) -> Consumer {
        let fetch_lane = client.new_lane();
        let fetcher = Fetcher::new(
            client.clone(),
            fetch_lane,
            FetchSettings {
                max_wait: cfg.fetch_max_wait,
                min_bytes: cfg.fetch_min_bytes,
                max_bytes: cfg.fetch_max_bytes,
                partition_max_bytes: cfg.max_partition_fetch_bytes,
                request_timeout: cfg.request_timeout,
                retry_backoff: cfg.retry_backoff,
            },
            Order::Arrival,
            match cfg.auto_offset_reset {
                AutoOffsetReset::Earliest => OutOfRange::Reset(Reset::Earliest),
                AutoOffsetReset::Latest => OutOfRange::Reset(Reset::Latest),
                AutoOffsetReset::None => OutOfRange::Fail,
            },
        );
        let group = cfg.group_id.as_ref().map(|g| {
            Group::new(
                client.clone(),
                GroupConfig {
                    group_id: g.clone(),
                    session_timeout: cfg.session_timeout,
                    rebalance_timeout: cfg.rebalance_timeout,
                    heartbeat_interval: cfg.heartbeat_interval,
                    request_timeout: cfg.request_timeout,
                },
            )
        });
        let now = Instant::now();
        Consumer {
            client,
            fetch_lane,
            fetcher,
            group,
            sub: Subscription::None,
            listener: None,
            assignment: Vec::new(),
            carried: Offsets::new(),
            fresh_restore: false,
            group_topics: BTreeMap::new(),
            leader: false,
            last_auto_commit: Vec::new(),
            next_auto_commit: now + cfg.auto_commit_interval,
            next_metadata_check: now + cfg.metadata_refresh_interval,
            group_retry_at: now,
            closed: false,
            cfg,
        }
    }

    /// The cluster handle.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The group id, if any.
    pub fn group_id(&self) -> Option<&str> {
        self.cfg.group_id.as_deref()
    }

    fn group_for(&self, what: &str) -> Result<&Group> {
        self.group
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument(format!("{what} needs a group_id")))
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Joins the group for `topics` (replacing any earlier subscription).
    /// Topics are not created; ones that appear later are picked up at the
    /// next metadata refresh by the group leader.
    pub fn subscribe(&mut self, topics: &[&str]) -> Result<()> {
        self.subscribe_inner(topics, None)
    }

    /// [`Consumer::subscribe`] with a listener for assignment changes.
    pub fn subscribe_with_listener(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + 'static,
    ) -> Result<()> {
        self.subscribe_inner(topics, Some(Box::new(listener)))
    }

    fn subscribe_inner(
        &mut self,
        topics: &[&str],
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.check_open()?;
        self.check_not_manual()?;
        let group = self.group_for("subscribe")?;
        let mut t: Vec<String> = topics.iter().map(|s| s.to_string()).collect();
        t.sort();
        t.dedup();
        group.request_rejoin();
        self.sub = Subscription::Topics(t);
        self.listener = listener;
        Ok(())
    }

    /// Joins the group for every topic whose whole name matches `pattern`
    /// (a `regex` crate expression, matched like Java's
    /// `Pattern.matches`; internal topics never match). Metadata of all
    /// topics is refreshed every `metadata_refresh_interval`: a new
    /// matching topic triggers a rebalance that assigns it, a deleted one a
    /// rebalance that revokes it, and `listener` sees both.
    pub fn subscribe_pattern(
        &mut self,
        pattern: &str,
        listener: impl RebalanceListener + 'static,
    ) -> Result<()> {
        self.check_open()?;
        self.check_not_manual()?;
        let regex = regex::Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| Error::InvalidArgument(format!("pattern {pattern:?}: {e}")))?;
        let group = self.group_for("subscribe_pattern")?;
        group.request_rejoin();
        self.sub = Subscription::Pattern {
            regex,
            matched: Vec::new(),
        };
        self.listener = Some(Box::new(listener));
        // Match before the first join.
        self.next_metadata_check = Instant::now();
        Ok(())
    }

    fn check_not_manual(&self) -> Result<()> {
        if matches!(self.sub, Subscription::Manual) && !self.assignment.is_empty() {
            return Err(Error::InvalidArgument(
                "partitions were assigned manually; call unsubscribe first".into(),
            ));
        }
        Ok(())
    }

    /// The subscribed topics: the names given, or what the pattern matched
    /// at the last refresh.
    pub fn subscription(&self) -> Vec<String> {
        match &self.sub {
            Subscription::Topics(t) => t.clone(),
            Subscription::Pattern { matched, .. } => matched.clone(),
            Subscription::None | Subscription::Manual => Vec::new(),
        }
    }

    /// Stops consuming: revokes the assignment (committing first with
    /// auto-commit) and leaves the group.
    pub async fn unsubscribe(&mut self) -> Result<()> {
        self.check_open()?;
        self.revoke_all().await;
        if let Some(g) = &self.group {
            g.leave().await;
        }
        self.sub = Subscription::None;
        self.listener = None;
        Ok(())
    }

    /// Reads exactly `partitions`, without group membership (replacing any
    /// earlier manual assignment). Each starts at its restored position
    /// ([`Consumer::restore`]), else its committed offset (with a
    /// `group_id`), else per `auto_offset_reset`; partitions already
    /// assigned keep their positions.
    pub async fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.check_open()?;
        if matches!(
            self.sub,
            Subscription::Topics(_) | Subscription::Pattern { .. }
        ) {
            return Err(Error::InvalidArgument(
                "subscribed to a group; call unsubscribe first".into(),
            ));
        }
        let mut parts = partitions.to_vec();
        parts.sort();
        parts.dedup();
        let new: Vec<TopicPartition> = parts
            .iter()
            .filter(|tp| !self.fetcher.contains(tp))
            .cloned()
            .collect();
        let positions = self.initial_positions(&new).await?;
        self.fetcher.retain(|tp| parts.binary_search(tp).is_ok());
        for (tp, pos) in positions {
            self.fetcher.add(tp, pos);
        }
        self.assignment = parts;
        self.sub = Subscription::Manual;
        Ok(())
    }

    /// The partitions this consumer reads now (sorted).
    pub fn assignment(&self) -> &[TopicPartition] {
        &self.assignment
    }

    /// Where `tp` goes on: the offset of the next message `recv` returns
    /// from it, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        match self.fetcher.position(tp)? {
            Pos::At(o) => Some(o),
            Pos::Pending(_) => None,
        }
    }

    /// Continues `tp` at `offset` (an assigned partition).
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        self.seek_pos(tp, Pos::At(offset))
    }

    /// Continues `tp` at the first message still in the log.
    pub fn seek_to_beginning(&mut self, tp: &TopicPartition) -> Result<()> {
        self.seek_pos(tp, Pos::Pending(Reset::Earliest))
    }

    /// Continues `tp` after the last message in the log.
    pub fn seek_to_end(&mut self, tp: &TopicPartition) -> Result<()> {
        self.seek_pos(tp, Pos::Pending(Reset::Latest))
    }

    fn seek_pos(&mut self, tp: &TopicPartition, pos: Pos) -> Result<()> {
        self.check_open()?;
        if self.fetcher.seek(tp, pos) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!("{tp} is not assigned")))
        }
    }

    /// The positions of the assigned partitions, plus (carried, see
    /// [`Offsets`]) those restored for partitions not assigned here and,
    /// without auto-commit, those of partitions revoked from this consumer.
    pub fn checkpoint(&self) -> Offsets {
        let mut carried = Offsets::new();
        for (tp, off) in self.carried.iter() {
            if !self.fetcher.contains(tp) {
                carried.insert_carried(tp.clone(), off);
            }
        }
        let mut o = Offsets::new();
        for (tp, off) in self.fetcher.positions() {
            o.insert(tp.clone(), off);
        }
        o.merge(carried);
        o
    }

    /// Applies a checkpoint: assigned partitions in it move to its
    /// positions now; the others keep their positions here and appear in
    /// later checkpoints meanwhile. At the next assignment they win over
    /// committed offsets (a restore may rewind); at later ones, the later
    /// of the two wins, since other members may have moved on and
    /// committed meanwhile. Replaces positions carried earlier.
    ///
    /// With a group whose assignment may change, restore every instance
    /// from the [`Offsets::merge`] of all instances' checkpoints before any
    /// of them consumes. Positions only travel between members through
    /// commits: with auto-commit, revoked partitions are committed, so
    /// whoever gets them next goes on from there.
    pub fn restore(&mut self, offsets: &Offsets) {
        self.carried = Offsets::new();
        self.fresh_restore = true;
        for (tp, off) in offsets.iter() {
            if !self.fetcher.seek(tp, Pos::At(off)) {
                self.carried.insert_carried(tp.clone(), off);
            }
        }
    }

    /// Commits the positions of every assigned partition and waits for
    /// the answer.
    pub async fn commit(&mut self) -> Result<()> {
        self.commit_async().await
    }

    /// Commits the positions of every assigned partition now and returns a
    /// future of the answer; the commit completes whether or not the
    /// future is awaited. Commits reach the coordinator in call order.
    pub fn commit_async(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let offsets: Vec<(TopicPartition, i64)> = self
            .fetcher
            .positions()
            .map(|(tp, o)| (tp.clone(), o))
            .collect();
        self.commit_list(offsets)
    }

    /// Commits the given positions (which need not be assigned here).
    pub async fn commit_offsets(&mut self, offsets: &Offsets) -> Result<()> {
        let list = offsets.iter().map(|(tp, o)| (tp.clone(), o)).collect();
        self.commit_list(list).await
    }

    fn commit_list(
        &self,
        offsets: Vec<(TopicPartition, i64)>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = self
            .check_open()
            .and_then(|_| self.group_for("commit"))
            .map(|g| (!offsets.is_empty()).then(|| g.commit_detached(offsets)));
        async move {
            match sent? {
                Some(f) => f.await,
                None => Ok(()),
            }
        }
    }

    /// The committed offsets of `partitions` (those without one are
    /// absent).
    pub fn committed<'a>(
        &'a self,
        partitions: &'a [TopicPartition],
    ) -> impl Future<Output = Result<Offsets>> + Send + 'a {
        // Borrows only the group, so the future is Send.
        let group = self.group_for("committed");
        async move { Ok(group?.committed(partitions).await?.into_iter().collect()) }
    }

    /// The next message, waiting as long as it takes. Rebalances,
    /// heartbeat-flagged rejoins, auto-commits and pattern refreshes happen
    /// in here.
    pub async fn recv(&mut self) -> Result<Message> {
        loop {
            if let Some(m) = self.poll_until(None).await? {
                return Ok(m);
            }
        }
    }

    /// The next message, or `None` after `timeout` (a rebalance under way
    /// may hold it longer, up to the rebalance timeout).
    pub async fn poll(&mut self, timeout: Duration) -> Result<Option<Message>> {
        self.poll_until(Some(Instant::now() + timeout)).await
    }

    /// Messages as a stream (each item is one [`Consumer::recv`]).
    ///
    /// ```no_run
    /// # async fn f(mut consumer: magnetar_client::Consumer) -> magnetar_client::Result<()> {
    /// use futures::StreamExt;
    /// let mut stream = consumer.stream();
    /// while let Some(m) = stream.next().await {
    ///     println!("{:?}", m?.value());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stream(&mut self) -> BoxStream<'_, Result<Message>> {
        futures::stream::unfold(self, |c| async move {
            if c.closed {
                return None;
            }
            let m = c.recv().await;
            Some((m, c))
        })
        .boxed()
    }

    async fn poll_until(&mut self, deadline: Option<Instant>) -> Result<Option<Message>> {
        self.check_open()?;
        if matches!(self.sub, Subscription::None) {
            return Err(Error::InvalidArgument(
                "not subscribed to any topic nor assigned any partition".into(),
            ));
        }
        loop {
            self.maintain().await?;
            if let Some(e) = self.fetcher.take_error() {
                return Err(e);
            }
            if let Some(m) = self.fetcher.next() {
                return Ok(Some(m));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let mut until = deadline.unwrap_or(now + Duration::from_secs(3600));
            until = until.min(self.next_metadata_check);
            if self.cfg.enable_auto_commit && self.group.is_some() {
                until = until.min(self.next_auto_commit);
            }
            if self.group.as_ref().is_some_and(|g| g.needs_rejoin()) && self.is_subscribed() {
                until = until.min(self.group_retry_at);
            }
            let wake = self.group.as_ref().map(|g| &g.shared.wake);
            self.fetcher.fill(until, wake).await;
        }
    }

    fn is_subscribed(&self) -> bool {
        matches!(
            self.sub,
            Subscription::Topics(_) | Subscription::Pattern { .. }
        )
    }

    /// Group upkeep between messages.
    async fn maintain(&mut self) -> Result<()> {
        let now = Instant::now();
        if self.is_subscribed() {
            if now >= self.next_metadata_check {
                self.next_metadata_check = now + self.cfg.metadata_refresh_interval;
                self.check_metadata().await;
            }
            let rejoin = self.group.as_ref().is_some_and(|g| g.needs_rejoin());
            if rejoin && Instant::now() >= self.group_retry_at {
                if let Err(e) = self.rebalance().await {
                    let quick = rebalance::rejoin_at_once(&e);
                    tracing::debug!(error = %e, quick, "rebalance did not complete");
                    self.group_retry_at = Instant::now()
                        + if quick {
                            Duration::ZERO
                        } else {
                            self.cfg.retry_backoff
                        };
                    if !quick && !e.is_retriable() {
                        return Err(e);
                    }
                }
            }
        } else {
            self.next_metadata_check = now + self.cfg.metadata_refresh_interval;
        }
        if self.cfg.enable_auto_commit && self.group.is_some() && now >= self.next_auto_commit {
            self.next_auto_commit = now + self.cfg.auto_commit_interval;
            self.auto_commit();
        }
        Ok(())
    }

    /// Commits in the background if positions moved since last time.
    fn auto_commit(&mut self) {
        let offsets: Vec<(TopicPartition, i64)> = self
            .fetcher
            .positions()
            .map(|(tp, o)| (tp.clone(), o))
            .collect();
        if offsets.is_empty() || offsets == self.last_auto_commit {
            return;
        }
        self.last_auto_commit = offsets.clone();
        let f = self.commit_list(offsets);
        tokio::spawn(async move {
            if let Err(e) = f.await {
                tracing::debug!(error = %e, "auto-commit failed");
            }
        });
    }

    /// Commits (with auto-commit), revokes the assignment and leaves the
    /// group. Later calls fail with [`Error::Closed`].
    pub async fn close(&mut self) -> Result<()> {
        self.check_open()?;
        let r = if self.is_subscribed() {
            self.revoke_all().await;
            Ok(())
        } else if self.cfg.enable_auto_commit && self.group.is_some() {
            self.commit().await
        } else {
            Ok(())
        };
        if let Some(g) = &self.group {
            g.leave().await;
        }
        self.closed = true;
        self.fetcher.retain(|_| false);
        self.assignment.clear();
        self.group = None;
        self.client.release_lane(self.fetch_lane);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every future of the consumer and the reader can move to another
    /// task (a compile-time check).
    #[allow(dead_code)]
    fn futures_are_send(c: &mut Consumer, r: &mut crate::Reader) {
        fn send<T: Send>(_: T) {}
        send(c.recv());
        send(c.poll(Duration::ZERO));
        send(c.stream());
        send(c.commit());
        send(c.commit_async());
        send(c.commit_offsets(&Offsets::new()));
        send(c.committed(&[]));
        send(c.assign(&[]));
        send(c.unsubscribe());
        send(c.close());
        send(r.read_next());
        send(r.read_next_timeout(Duration::ZERO));
        send(r.has_message_available());
        send(crate::Reader::builder("t").build());
        send(Consumer::builder().build());
    }
}
