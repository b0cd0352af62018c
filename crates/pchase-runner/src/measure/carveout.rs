//! The shared-memory configurations of the unified L1/shared store, and how each one is
//! put in force for a size search.
//!
//! The driver splits the store of an SM into shared memory and L1 by one of a few
//! *configurations* per architecture (CUDA C++ Programming Guide, "Compute Capabilities":
//! e.g. 0, 8, 16, 32, 64, 100, 132, 164, 196 or 228 KiB on compute capability 9.0). It picks
//! one from the kernel's preferred carveout *and* the shared memory its blocks need, the
//! dynamic bytes plus 1 KiB the system reserves per block. Asking for carveout 0 % with
//! `C − reserve` dynamic bytes leaves it one choice: the smallest configuration holding
//! `C`, which is `C` itself. Measured on the H100 and H200
//! (`docs/evidence/2026-11-25-h100-h200-shared-memory-configurations/`): at
//! carveout 0 % the driver picks exactly that, and a kernel without shared memory gets the
//! 32 KiB configuration, not 0 (every block reserves 1 KiB, so no kernel runs with 0).
//!
//! The search proves each row's configuration twice: from below by the bytes its blocks
//! need, and from the measured sizes, whose steps between neighbouring configurations
//! must equal the configurations' steps ([`StepCheck`]).

use crate::device::{ComputeCapability, DeviceInfo};

use super::Carveout;

/// The documented shared-memory configurations (KiB per SM) of an architecture, smallest
/// first; `None` where the L1 and shared memory are not one configurable store (before
/// Volta) or the architecture is not listed.
pub fn shared_configs_kib(cc: ComputeCapability) -> Option<&'static [u32]> {
    match (cc.major, cc.minor) {
        (7, 0) | (7, 2) => Some(&[0, 8, 16, 32, 64, 96]),
        (7, 5) => Some(&[32, 64]),
        (8, 0) | (8, 7) => Some(&[0, 8, 16, 32, 64, 100, 132, 164]),
        (8, 6) | (8, 9) | (12, _) => Some(&[0, 8, 16, 32, 64, 100]),
        (9, 0) | (10, _) => Some(&[0, 8, 16, 32, 64, 100, 132, 164, 196, 228]),
        _ => None,
    }
}

/// Why a size search runs at its setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The smallest configuration a kernel can get: the largest L1.
    LargestL1,
    /// No dynamic shared memory and no carveout asked for: what a kernel without shared
    /// memory gets from the driver.
    DriverDefault,
    /// One more configuration of the table.
    Config,
}

/// One size search's launch setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The carveout asked for.
    pub carveout: Carveout,
    /// Dynamic shared bytes per block.
    pub dynamic_shared_bytes: u32,
    /// The configuration this forces (shared bytes per SM), where one is forced.
    pub config_bytes: Option<u64>,
    /// Why.
    pub role: Role,
}

/// The settings of the L1's searches on `device`: the largest L1 first, then the driver's
/// default, then every further configuration the device offers (each once). Without a
/// documented configuration list: carveout 0 % and no shared memory, once.
pub fn settings(device: &DeviceInfo, table: bool) -> Vec<Setting> {
    let reserve = device.reserved_shared_per_block_bytes.unwrap_or(0);
    let reachable: Vec<u64> = shared_configs_kib(device.compute_capability)
        .unwrap_or(&[])
        .iter()
        .map(|&kib| u64::from(kib) * 1024)
        // A block always reserves `reserve` bytes, and may ask for at most the opt-in.
        .filter(|&c| c > 0 && c >= reserve && c - reserve <= device.shared_per_block_optin_bytes)
        .collect();
    let forced = |config: u64, role| Setting {
        carveout: Carveout::Percent(0),
        dynamic_shared_bytes: u32::try_from(config - reserve).unwrap_or(u32::MAX),
        config_bytes: Some(config),
        role,
    };
    let Some(&smallest) = reachable.first() else {
        return settings_without_shared();
    };
    let mut out = vec![forced(smallest, Role::LargestL1)];
    if table {
        out.push(Setting {
            carveout: Carveout::DriverDefault,
            dynamic_shared_bytes: 0,
            config_bytes: None,
            role: Role::DriverDefault,
        });
        out.extend(reachable[1..].iter().map(|&c| forced(c, Role::Config)));
    }
    out
}

/// One search at carveout 0 % without shared memory: for caches outside the L1/shared
/// store, and devices without a documented configuration list.
pub fn settings_without_shared() -> Vec<Setting> {
    vec![Setting {
        carveout: Carveout::Percent(0),
        dynamic_shared_bytes: 0,
        config_bytes: None,
        role: Role::LargestL1,
    }]
}

/// The shared bytes per block a setting for `config` needs, as the driver counts them.
pub fn block_need(device: &DeviceInfo, dynamic_shared_bytes: u32) -> u64 {
    u64::from(dynamic_shared_bytes) + device.reserved_shared_per_block_bytes.unwrap_or(0)
}

/// Two neighbouring configurations' L1 sizes against their step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCheck {
    /// The smaller configuration, bytes.
    pub from_config: u64,
    /// The larger one, bytes.
    pub to_config: u64,
    /// How much the L1 shrank between them, bytes.
    pub l1_shrank: i64,
    /// Whether that equals the configurations' step to a quarter of it (at least 2 KiB):
    /// each of the two ran with the configuration it forced.
    pub agrees: bool,
}

/// The step checks of `(config bytes, L1 bytes)` pairs, sorted by configuration.
pub fn step_checks(rows: &[(u64, u64)]) -> Vec<StepCheck> {
    let mut rows = rows.to_vec();
    rows.sort_unstable();
    rows.windows(2)
        .map(|pair| {
            let ((c0, l0), (c1, l1)) = (pair[0], pair[1]);
            let step = c1.abs_diff(c0) as i64;
            let shrank = l0 as i64 - l1 as i64;
            StepCheck {
                from_config: c0,
                to_config: c1,
                l1_shrank: shrank,
                agrees: (shrank - step).abs() <= (step / 4).max(2048),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hopper_gets_every_reachable_configuration_once_largest_l1_first() {
        let mut device = crate::sim::SimProfile::bundled("h200")
            .expect("bundled")
            .device;
        device.compute_capability = ComputeCapability { major: 9, minor: 0 };
        device.reserved_shared_per_block_bytes = Some(1024);
        device.shared_per_block_optin_bytes = 227 * 1024;
        let s = settings(&device, true);
        assert_eq!(s[0].role, Role::LargestL1);
        assert_eq!(s[0].dynamic_shared_bytes, 7 * 1024);
        assert_eq!(s[1].role, Role::DriverDefault);
        let configs: Vec<u64> = s
            .iter()
            .filter_map(|s| s.config_bytes)
            .map(|b| b / 1024)
            .collect();
        assert_eq!(configs, vec![8, 16, 32, 64, 100, 132, 164, 196, 228]);
        assert!(
            s.iter()
                .all(|s| block_need(&device, s.dynamic_shared_bytes)
                    == s.config_bytes.unwrap_or(1024))
        );
        assert_eq!(settings(&device, false).len(), 1);
    }

    #[test]
    fn older_and_unknown_architectures_search_once() {
        let mut device = crate::sim::SimProfile::bundled("h200")
            .expect("bundled")
            .device;
        device.compute_capability = ComputeCapability { major: 5, minor: 2 };
        let s = settings(&device, true);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].dynamic_shared_bytes, s[0].config_bytes), (0, None));
    }

    #[test]
    fn steps_agree_when_the_l1_shrinks_by_the_configuration_step() {
        let kib = |k: u64| k * 1024;
        let rows = [
            (kib(8), kib(241)),
            (kib(16), kib(233)),
            (kib(32), kib(217)),
            (kib(64), kib(200)),
        ];
        let checks = step_checks(&rows);
        assert_eq!(checks.len(), 3);
        assert!(checks[0].agrees && checks[1].agrees);
        // 217 → 200 KiB is 17 KiB for a 32 KiB step: not the configuration it forced.
        assert!(!checks[2].agrees);
    }
}
