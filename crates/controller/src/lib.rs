//! Magnetar's controller quorum (WIP).

#![warn(missing_docs)]

mod error;
mod io;
mod log_file;
pub mod log_store;
pub mod sm_store;
mod state_machine;
pub mod types;

pub use error::{ControllerError, Result};
pub use io::IoMode;
pub use state_machine::{KvMap, KvRecord, StateMachine};
