//! Client quotas on the broker: the quota admin operations (`ops`). The
//! quota records, sensors and the manager that throttles clients are
//! `magnetar_security::quota`, re-exported here.

pub mod ops;

pub use magnetar_security::quota::*;

pub use ops::QuotaAlteration;
