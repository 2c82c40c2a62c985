//! blz: a chunked, compressed, persistent array store.
//!
//! Layers, from the bottom: [`storage`] (where bytes live), [`blosc`] (one compressed chunk),
//! [`blpk`] (superchunk files of many chunks, bloscpack format 3).

pub mod blosc;
pub mod blpk;
pub mod error;
pub mod storage;

pub use error::{Error, Result};
