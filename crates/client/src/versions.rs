//! API version negotiation: what the broker advertises, capped by what this
//! client implements.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Request, VersionRange};

use crate::error::{Error, Result};

/// The version ranges a broker advertised in its ApiVersions response.
///
/// ```
/// use magnetar_client::ApiVersions;
/// use kafka_protocol::messages::{ApiKey, MetadataRequest};
/// let v = ApiVersions::from_ranges(&[(ApiKey::Metadata as i16, 0, 3)]);
/// assert_eq!(v.broker_range(ApiKey::Metadata).map(|r| r.max), Some(3));
/// // Highest version both sides speak:
/// assert_eq!(v.pick::<MetadataRequest>().unwrap(), 3);
/// assert!(v.pick::<kafka_protocol::messages::ProduceRequest>().is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ApiVersions {
    ranges: Vec<Option<VersionRange>>,
}

impl ApiVersions {
    /// Builds the table from `(api_key, min, max)` triples.
    pub fn from_ranges(ranges: &[(i16, i16, i16)]) -> ApiVersions {
        let mut v = ApiVersions::default();
        for &(key, min, max) in ranges {
            if key < 0 {
                continue;
            }
            let i = key as usize;
            if v.ranges.len() <= i {
                v.ranges.resize(i + 1, None);
            }
            v.ranges[i] = Some(VersionRange { min, max });
        }
        v
    }

    /// The range the broker advertised for `key`, if any.
    pub fn broker_range(&self, key: ApiKey) -> Option<VersionRange> {
        self.ranges.get(key as i16 as usize).copied().flatten()
    }

    /// The highest version of `key` that both this client and the broker
    /// support, or `None` if the ranges do not meet.
    pub fn max_version(&self, key: ApiKey) -> Option<i16> {
        let broker = self.broker_range(key)?;
        let both = broker.intersect(&client_range(key));
        (!both.is_empty()).then_some(both.max)
    }

    /// [`ApiVersions::max_version`] for a request type, as an error naming
    /// the API when there is no common version.
    pub fn pick<R: Request>(&self) -> Result<i16> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| Error::NotSupported(format!("API key {}", R::KEY)))?;
        self.max_version(key).ok_or_else(|| {
            Error::NotSupported(match self.broker_range(key) {
                Some(r) => format!(
                    "{key:?}: broker speaks v{}..v{}, this client v{}",
                    r.min,
                    r.max,
                    client_range(key)
                ),
                None => format!("{key:?}: not offered by the broker"),
            })
        })
    }

    /// Every `(api_key, min, max)` the broker advertised.
    pub fn iter(&self) -> impl Iterator<Item = (i16, VersionRange)> + '_ {
        self.ranges
            .iter()
            .enumerate()
            .filter_map(|(k, r)| r.map(|r| (k as i16, r)))
    }
}

/// The versions this client can speak for `key`: whatever `kafka-protocol`
/// encodes, capped where this crate's request-building code has not been
/// written for newer versions.
///
/// ```
/// use kafka_protocol::messages::ApiKey;
/// assert_eq!(magnetar_client::client_range(ApiKey::Produce).max, 12);
/// ```
pub fn client_range(key: ApiKey) -> VersionRange {
    let all = key.valid_versions();
    let cap = match key {
        // v13 addresses topics by id only; the producer sends names.
        ApiKey::Produce => 12,
        // v13 addresses topics by id only (KIP-516); not needed yet.
        ApiKey::Fetch => 12,
        // v13 is the same as v12 apart from a new error for
        // rebootstrapping; stay where every field is understood.
        ApiKey::Metadata => 12,
        // v10 (topic ids) is not used by the admin client.
        ApiKey::OffsetFetch => 9,
        ApiKey::OffsetCommit => 9,
        _ => all.max,
    };
    VersionRange {
        min: all.min,
        max: all.max.min(cap),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{FindCoordinatorRequest, ProduceRequest};

    #[test]
    fn picks_highest_common_version() {
        let v = ApiVersions::from_ranges(&[(0, 3, 13), (10, 0, 3), (18, 0, 3)]);
        assert_eq!(v.pick::<ProduceRequest>().unwrap(), 12);
        assert_eq!(v.pick::<FindCoordinatorRequest>().unwrap(), 3);
        assert_eq!(v.max_version(ApiKey::Fetch), None);
    }

    #[test]
    fn disjoint_ranges_are_not_supported() {
        // A broker that only speaks Produce v0..v2 meets no version of ours.
        let v = ApiVersions::from_ranges(&[(0, 0, 2)]);
        let err = v.pick::<ProduceRequest>().unwrap_err();
        assert!(matches!(err, Error::NotSupported(_)), "{err}");
    }
}
