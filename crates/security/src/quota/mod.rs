//! Client quotas: the quota records (re-exported from
//! `magnetar_metadata::quota`), the sensors that measure each client
//! (`sensor`) and the manager that throttles them (`manager`).

pub mod manager;
pub mod sensor;

pub use magnetar_metadata::quota::*;

pub use manager::{QuotaManager, QuotaWindow};
