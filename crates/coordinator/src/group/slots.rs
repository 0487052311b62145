//! Where a request's group lives: the group of the protocol asked for,
//! created if missing (an empty group of the other protocol is replaced).

use std::collections::HashMap;

use super::classic::{ClassicConfig, ClassicGroup};
use super::consumer::ConsumerGroup;
use super::coordinator::Group;
use super::views::{CoordinatorError, ProtocolMismatch};

/// The classic group `group_id`, created if missing; an empty
/// consumer-protocol group of that id is replaced (a group id belongs to one
/// protocol at a time, but an empty group may switch).
pub(super) fn classic_slot<'a>(
    groups: &'a mut HashMap<String, Group>,
    group_id: &str,
    config: &ClassicConfig,
) -> Result<&'a mut ClassicGroup, CoordinatorError> {
    let fresh = || {
        Group::Classic(Box::new(ClassicGroup::new(
            group_id.to_string(),
            config.clone(),
        )))
    };
    let slot = groups.entry(group_id.to_string()).or_insert_with(fresh);
    if matches!(slot, Group::Consumer(g) if g.is_empty()) {
        *slot = fresh();
    }
    match slot {
        Group::Classic(g) => Ok(g),
        Group::Consumer(_) => Err(CoordinatorError::WrongProtocol(
            group_id.to_string(),
            ProtocolMismatch::ClassicOnConsumer,
        )),
    }
}

/// The consumer-protocol group `group_id`, created if missing; an empty
/// classic group of that id is replaced.
pub(super) fn consumer_slot<'a>(
    groups: &'a mut HashMap<String, Group>,
    group_id: &str,
) -> Result<&'a mut ConsumerGroup, CoordinatorError> {
    let fresh = || Group::Consumer(ConsumerGroup::new(group_id.to_string()));
    let slot = groups.entry(group_id.to_string()).or_insert_with(fresh);
    if matches!(slot, Group::Classic(g) if g.is_empty()) {
        *slot = fresh();
    }
    match slot {
        Group::Consumer(g) => Ok(g),
        Group::Classic(_) => Err(CoordinatorError::WrongProtocol(
            group_id.to_string(),
            ProtocolMismatch::ConsumerOnClassic,
        )),
    }
}
