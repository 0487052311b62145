//! The pieces of the `magnetar` binary that tests and embedders start
//! in-process: a [`node::Node`] is one broker with its listeners.

pub mod node;
