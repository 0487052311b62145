//! ListTransactions (key 66): the transactional ids, filtered by state,
//! producer id, (v1) how long their transaction has been open and (v2) a
//! regular expression over the id (`kafka-transactions list`,
//! `find-hanging`).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::Versions;
use broker::txn::TxnState;
use broker::{now_ms, Broker};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// The most a client's id pattern may compile to, and its longest text: a
/// hostile pattern costs bounded memory and time and is refused beyond.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
const PATTERN_MAX_LEN: usize = 4096;

/// v2's `transactional_id_pattern` as a full-match regex (Java's
/// `Pattern.matcher(id).matches()`); `None` for no filter, `Err` for an
/// invalid (or too large) pattern.
fn id_pattern(version: i16, pattern: Option<&str>) -> Result<Option<regex::Regex>, ()> {
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|_| ())
    };
    match pattern {
        Some(p) if version >= 2 && !p.is_empty() => {
            if p.len() > PATTERN_MAX_LEN {
                return Err(());
            }
            // Valid on its own first: `a)|(b` must not pass once wrapped.
            build(p)?;
            build(&format!("^(?:{p})$")).map(Some)
        }
        _ => Ok(None),
    }
}

const STATES: [TxnState; 6] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
];

/// Answers ListTransactions.
///
/// Lists only the transactional ids the principal may Describe.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let unknown: Vec<StrBytes> = req
        .state_filters
        .iter()
        .filter(|s| !STATES.iter().any(|k| k.name() == s.as_str()))
        .cloned()
        .collect();
    let producers: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    // v1: only transactions open for longer than this many ms.
    let min_duration = if version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let Ok(pattern) = id_pattern(
        version,
        req.transactional_id_pattern.as_ref().map(|p| p.as_str()),
    ) else {
        return ListTransactionsResponse::default()
            .with_error_code(ResponseError::InvalidRegularExpression.code());
    };
    let now = now_ms().0;
    match broker.list_transactions(&states, &producers) {
        Err(e) => ListTransactionsResponse::default().with_error_code(response_error(&e).code()),
        Ok(list) => {
            let described = if min_duration >= 0 {
                let ids: Vec<String> = list.iter().map(|l| l.transactional_id.clone()).collect();
                broker.describe_transactions(&ids).unwrap_or_default()
            } else {
                Vec::new()
            };
            let transaction_states = list
                .into_iter()
                .enumerate()
                .filter(|(_, l)| {
                    access.transactional_id(
                        broker::security::acl::Operation::Describe,
                        &l.transactional_id,
                    )
                })
                .filter(|(_, l)| {
                    pattern
                        .as_ref()
                        .is_none_or(|p| p.is_match(&l.transactional_id))
                })
                .filter(|(i, _)| {
                    min_duration < 0
                        || described
                            .get(*i)
                            .and_then(|m| m.as_ref())
                            .is_some_and(|m| m.start_ms >= 0 && now - m.start_ms > min_duration)
                })
                .map(|(_, l)| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(
                            l.transactional_id,
                        )))
                        .with_producer_id(ProducerId(l.producer_id))
                        .with_transaction_state(StrBytes::from_static_str(l.state.name()))
                })
                .collect();
            ListTransactionsResponse::default()
                .with_unknown_state_filters(unknown)
                .with_transaction_states(transaction_states)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn id_patterns_match_whole_ids_and_refuse_what_does_not_compile_alone() {
        let p = super::id_pattern(2, Some("tx-.*")).unwrap().unwrap();
        assert!(p.is_match("tx-1") && !p.is_match("my-tx-1"));
        assert!(super::id_pattern(2, Some("a)|(?:.*")).is_err());
        assert!(super::id_pattern(2, Some(&"a".repeat(5000))).is_err());
        assert!(
            super::id_pattern(1, Some("(")).unwrap().is_none(),
            "v1 has no pattern"
        );
        assert!(super::id_pattern(2, Some("")).unwrap().is_none());
    }
}
