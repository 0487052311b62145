//! Admin.
