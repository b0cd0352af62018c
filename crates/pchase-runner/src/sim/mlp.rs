//! Memory-level parallelism: how many loads that leave the SM (L2 hits and misses) one SM
//! and the whole GPU keep in flight.
//!
//! A profile's `[mlp]` gives an outstanding-request limit per SM and one per GPU. The
//! pinned chase, whose warps each chase their own chain, is a closed queue: with `W` warps
//! on each of `S` SMs, `W × S` loads wait at once. Where that exceeds a limit the requests
//! queue, and every load's latency grows by the factor `max(1, W / per_sm, W·S / per_gpu)`
//! (Little's law with a server of that many slots: the throughput stays at
//! `limit / latency`). A profile without `[mlp]` has no limit, as before schema 1.5.

use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

/// Outstanding-request limits (`[mlp]` in a profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlpSpec {
    /// Loads one SM keeps in flight beyond its own caches.
    pub per_sm: u32,
    /// Loads the whole GPU keeps in flight.
    pub per_gpu: u32,
}

impl MlpSpec {
    /// Checks both limits; `Err` names the field.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] for a zero limit, or a GPU limit below one SM's.
    pub fn validate(&self) -> Result<(), RunnerError> {
        if self.per_sm == 0 {
            return Err(RunnerError::Profile(
                "mlp.per_sm: must be at least 1".into(),
            ));
        }
        if self.per_gpu < self.per_sm {
            return Err(RunnerError::Profile(format!(
                "mlp.per_gpu: {} is below per_sm ({})",
                self.per_gpu, self.per_sm
            )));
        }
        Ok(())
    }

    /// The latency factor of `warps` concurrent chains on each of `sms` SMs.
    pub fn factor(&self, warps: u32, sms: u32) -> f64 {
        let w = f64::from(warps);
        let total = w * f64::from(sms);
        (w / f64::from(self.per_sm))
            .max(total / f64::from(self.per_gpu))
            .max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tighter_limit_sets_the_queue() {
        let mlp = MlpSpec {
            per_sm: 12,
            per_gpu: 300,
        };
        mlp.validate().unwrap();
        assert_eq!(mlp.factor(1, 1), 1.0);
        assert_eq!(mlp.factor(24, 1), 2.0);
        assert_eq!(mlp.factor(10, 60), 2.0);
        // Throughput (chains / factor) saturates at the limit.
        let throughput = |w: u32, s: u32| f64::from(w * s) / mlp.factor(w, s);
        assert_eq!(throughput(32, 1), 12.0);
        assert_eq!(throughput(32, 100), 300.0);
        assert!(MlpSpec {
            per_sm: 0,
            per_gpu: 1
        }
        .validate()
        .is_err());
        assert!(MlpSpec {
            per_sm: 8,
            per_gpu: 4
        }
        .validate()
        .is_err());
    }
}
