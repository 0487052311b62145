//! CreateAcls, DescribeAcls and DeleteAcls on the broker: validated here,
//! committed as metadata records, and indexed again for the authorizer once
//! applied.

use super::{AclBinding, AclFilter, Authorizer};
use crate::metadata_records::MetadataRecord;
use crate::{Broker, Error};

fn disabled() -> Error {
    Error::SecurityDisabled(
        "no authorizer is configured on the broker (authorizer.class.name)".into(),
    )
}

impl Broker {
    /// The authorizer, if `authorizer.class.name` is set.
    pub fn authorizer(&self) -> Option<&Authorizer> {
        self.authorizer.as_ref()
    }

    /// Creates `bindings` (one result each, in order): a binding Kafka
    /// would refuse gets INVALID_REQUEST and the others are committed
    /// together; one that exists already is left as it is.
    pub fn create_acls(&self, bindings: &[AclBinding]) -> Vec<Result<(), Error>> {
        if self.authorizer.is_none() {
            return bindings.iter().map(|_| Err(disabled())).collect();
        }
        let checked: Vec<Result<(), Error>> = bindings
            .iter()
            .map(|b| b.validate().map_err(Error::InvalidRequest))
            .collect();
        let records: Vec<MetadataRecord> = bindings
            .iter()
            .zip(&checked)
            .filter(|(_, r)| r.is_ok())
            .map(|(b, _)| MetadataRecord::AclCreated { binding: b.clone() })
            .collect();
        self.commit_checked(records, checked)
    }

    /// The bindings `filter` selects.
    pub fn describe_acls(&self, filter: &AclFilter) -> Result<Vec<AclBinding>, Error> {
        if self.authorizer.is_none() {
            return Err(disabled());
        }
        let store = self.store.lock();
        Ok(store
            .data
            .acls
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect())
    }

    /// Deletes the bindings each filter selects, all in one commit; one
    /// result per filter with the bindings it deleted (a binding two
    /// filters select is reported by both, as Kafka does).
    pub fn delete_acls(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, Error> {
        if self.authorizer.is_none() {
            return Err(disabled());
        }
        let matched: Vec<Vec<AclBinding>> = {
            let store = self.store.lock();
            filters
                .iter()
                .map(|f| {
                    store
                        .data
                        .acls
                        .iter()
                        .filter(|b| f.matches(b))
                        .cloned()
                        .collect()
                })
                .collect()
        };
        let mut gone = std::collections::BTreeSet::new();
        let records: Vec<MetadataRecord> = matched
            .iter()
            .flatten()
            .filter(|b| gone.insert(*b))
            .map(|b| MetadataRecord::AclDeleted { binding: b.clone() })
            .collect();
        self.commit_metadata(records)?;
        Ok(matched)
    }

    /// Indexes the ACLs again after a metadata change that touched them.
    pub(crate) fn refresh_acls(&self, m: &crate::metadata_store::Metadata) {
        if let Some(a) = &self.authorizer {
            a.refresh(&m.acls);
        }
    }
}
