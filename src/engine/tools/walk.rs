//! Shared directory walking for Glob and Grep (placeholder).
