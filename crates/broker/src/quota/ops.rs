//! AlterClientQuotas and DescribeClientQuotas on the broker: changes are
//! metadata records, committed together; the quota snapshot is refreshed
//! once they are applied.

use std::collections::BTreeMap;

use super::{filter_matches, validate, ComponentMatch, QuotaEntity, QuotaManager};
use crate::metadata_records::MetadataRecord;
use crate::{Broker, Error};

/// One entity's changes: key → new value, or `None` to remove it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    /// Whose quotas.
    pub entity: QuotaEntity,
    /// The changes.
    pub ops: Vec<(String, Option<f64>)>,
}

impl Broker {
    /// The quotas and their sensors.
    pub fn quotas(&self) -> &QuotaManager {
        &self.quotas
    }

    /// Applies `alterations` (AlterClientQuotas), one result each: an
    /// entity with an invalid key or value, or a key named twice, gets
    /// INVALID_REQUEST and changes nothing; the others are committed in
    /// one batch (or only checked, with `validate_only`).
    pub fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
    ) -> Vec<Result<(), Error>> {
        let checked: Vec<Result<(), Error>> = alterations
            .iter()
            .map(|a| {
                let mut seen = std::collections::BTreeSet::new();
                for (key, value) in &a.ops {
                    if !seen.insert(key.as_str()) {
                        return Err(Error::InvalidRequest(format!(
                            "the quota key {key} appears more than once for one entity"
                        )));
                    }
                    // Removing a key that is not set (or not known) is a
                    // no-op, as in Kafka.
                    if let Some(v) = value {
                        validate(key, *v).map_err(Error::InvalidRequest)?;
                    }
                }
                Ok(())
            })
            .collect();
        if validate_only {
            return checked;
        }
        let records: Vec<MetadataRecord> = alterations
            .iter()
            .zip(&checked)
            .filter(|(_, r)| r.is_ok())
            .flat_map(|(a, _)| {
                a.ops
                    .iter()
                    .filter(|(key, value)| value.is_some() || super::KEYS.contains(&key.as_str()))
                    .map(|(key, value)| MetadataRecord::ClientQuotaSet {
                        entity: a.entity.clone(),
                        key: key.clone(),
                        value: *value,
                    })
            })
            .collect();
        self.commit_checked(records, checked)
    }

    /// The quotas of the entities the filter selects (DescribeClientQuotas).
    pub fn describe_client_quotas(
        &self,
        user: Option<&ComponentMatch>,
        client_id: Option<&ComponentMatch>,
        strict: bool,
    ) -> Vec<(QuotaEntity, BTreeMap<String, f64>)> {
        let store = self.store.lock();
        store
            .data
            .client_quotas
            .iter()
            .filter(|(e, _)| filter_matches(e, user, client_id, strict))
            .map(|(e, v)| (e.clone(), v.clone()))
            .collect()
    }

    /// Takes the quotas again after a metadata change that touched them.
    pub(crate) fn refresh_quotas(&self, m: &crate::metadata_store::Metadata) {
        self.quotas.refresh(&m.client_quotas);
    }
}
