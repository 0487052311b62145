//! Client quotas on the broker: the sensors that measure each client
//! (`sensor`), the manager that throttles them (`manager`) and the quota
//! admin operations (`ops`). The quota entities and values are metadata
//! records (`magnetar_metadata::quota`), re-exported here.

pub mod manager;
pub mod ops;
pub mod sensor;

pub use magnetar_metadata::quota::*;

pub use manager::{QuotaManager, QuotaWindow};
pub use ops::QuotaAlteration;
