//! # tracecast-calibrate
//!
//! Turns measured traces into a performance model: the hardware [`catalog`]
//! (peak FLOP/s and bandwidths per GPU, as TOML data users can extend),
//! [`work`] accounting of the ops behind each kernel, kernel-efficiency fits
//! (t = t0 + W/(η·P)) and link fits (t = α + k·S/B) with their quality, in a
//! [`profile::Profile`] per device (DESIGN §4).
//!
//! It also writes **synthetic traces with known ground truth** ([`synth`]):
//! Kineto JSON that `ingest` reads like a real trace, produced from stated
//! efficiencies and link parameters so tests can check that analysis and
//! calibration recover them.
//!
//! ```
//! use tracecast_calibrate::synth::{JobSpec, render_job};
//! let mut spec = JobSpec::default();
//! spec.ranks = 2;
//! spec.steps = 1;
//! spec.layers = 2;
//! let ranks = render_job(&spec);
//! assert_eq!(ranks.len(), 2);
//! assert!(ranks[0].json.starts_with("{\"schemaVersion\": 1"));
//! assert_eq!(ranks[0].clock_offset_us, 0.0);
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod catalog;
pub mod cost;
pub mod diff;
mod error;
pub mod fit;
pub mod madmax;
pub mod measured;
pub mod model;
pub mod pricing;
pub mod profile;
pub mod shipped;
pub mod synth;
pub mod timeline;
pub mod work;

pub use catalog::Catalog;
pub use error::{Error, Result};
pub use model::DeviceModel;
pub use profile::{CalibrateOptions, Profile, calibrate};
