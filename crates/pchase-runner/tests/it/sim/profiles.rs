//! Profiles: the bundled ones, validation of every field, the memory budget, loading.

use pchase_runner::sim::{L2Interleave, Replacement, SimBackend, SimProfile, SIM_MEMORY_BUDGET};
use pchase_runner::{Carveout, LoadPath, RunnerError};

use super::*;

#[test]
fn every_bundled_profile_loads_and_round_trips() {
    let names: Vec<&str> = SimProfile::bundled_names().collect();
    assert_eq!(names, ["kepler", "maxwell", "volta", "h100", "h200"]);
    for name in names {
        let profile = SimProfile::bundled(name).expect("bundled profile is valid");
        assert_eq!(profile.name, name);
        let text = profile.to_toml_string().expect("serialises");
        assert_eq!(
            SimProfile::from_toml_str(&text).expect("re-parses"),
            profile
        );
        let shipped = format!(
            "{}/../../examples/profiles/{name}.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        assert_eq!(SimProfile::load(&shipped).expect("file loads"), profile);
    }
}

#[test]
fn bundled_profiles_state_what_the_issue_asks() {
    let kepler = SimProfile::bundled("kepler").unwrap();
    let texture = kepler.caches_on_path(LoadPath::Texture).next().unwrap();
    assert_eq!(
        (texture.size_bytes, texture.copies_per_sm),
        (Some(12288), 4)
    );
    let l1 = kepler.caches_on_path(LoadPath::GlobalCa).next().unwrap();
    assert!(!l1.serves(LoadPath::Texture), "Kepler's L1 is separate");
    assert_eq!(
        l1.size_at(
            kepler
                .shared_carveout_for(Carveout::DriverDefault, 0)
                .unwrap()
        ),
        16384
    );

    let maxwell = SimProfile::bundled("maxwell").unwrap();
    assert!(!maxwell.caches_global_loads());
    assert_eq!(maxwell.device.global_l1_cache_supported, Some(false));
    assert_eq!(
        maxwell
            .caches_on_path(LoadPath::Texture)
            .next()
            .unwrap()
            .copies_per_sm,
        2
    );

    let volta = SimProfile::bundled("volta").unwrap();
    assert_eq!(
        volta.l2.home_bits(),
        None,
        "one partition, homed by no bits"
    );
    let unified = volta.unified_cache().unwrap();
    assert!(matches!(unified.replacement, Replacement::EarlyMiss { .. }));
    assert!([LoadPath::GlobalCa, LoadPath::GlobalNc, LoadPath::Texture]
        .iter()
        .all(|&p| unified.serves(p)));

    for (name, l2, bits) in [
        ("h100", 50u64 << 20, [12, 13, 16, 17, 19]),
        ("h200", 60 << 20, [12, 13, 15, 17, 19]),
    ] {
        let hopper = SimProfile::bundled(name).unwrap();
        assert_eq!(hopper.device.sm_count, 132);
        assert_eq!(hopper.l2.size_bytes, l2);
        assert_eq!(hopper.l2.partitions, 2);
        // Measured on H100s and H200s: the parity of five address bits (one differs) and
        // a bit of each 2 MiB page.
        assert_eq!(hopper.l2.interleave, L2Interleave::Masked);
        assert_eq!(hopper.l2.home_bits, bits);
        assert_eq!(hopper.l2.home_page_bytes, Some(2 << 20));
        assert_eq!(hopper.l2.home_bits(), Some(&bits[..]));
        assert!(hopper.l2.far() > hopper.l2.near_latency);
        let store = hopper.unified_cache().unwrap().unified.as_ref().unwrap();
        // Measured: L1 + shared = 249 KiB (four sets of whole ways at every configuration).
        assert_eq!(store.store_bytes, 249 * 1024);
        let l1 = hopper.unified_cache().unwrap();
        assert_eq!(l1.associativity, pchase_runner::sim::Associativity::Sets(4));
        assert_eq!(l1.ways_at(217 * 1024), 434);
        assert_eq!(store.shared_carveouts_bytes.last(), Some(&(228 * 1024)));
    }
}

#[test]
fn unknown_bundled_name_lists_the_known_ones() {
    let message = profile_message(SimProfile::bundled("fermi"));
    assert!(
        message.contains("fermi") && message.contains("volta"),
        "{message}"
    );
}

/// A profile whose caches would take more host memory than the budget is refused before
/// anything is allocated: a 1 GiB "L2" per partition is fine, a 64 MiB constant cache on
/// each of 132 SMs (four copies) is not.
#[test]
fn a_profile_beyond_the_memory_budget_is_refused() {
    let h200 = SimProfile::bundled("h200").unwrap();
    assert!(h200.model_bytes() < SIM_MEMORY_BUDGET / 100);
    let mut huge = h200.clone();
    let cache = huge
        .caches
        .iter_mut()
        .find(|c| c.unified.is_none())
        .expect("a constant cache");
    cache.size_bytes = Some(64 << 20);
    cache.copies_per_sm = 4;
    assert!(huge.model_bytes() > SIM_MEMORY_BUDGET);
    let message = match SimBackend::new(huge) {
        Err(RunnerError::Profile(message)) => message,
        other => panic!("expected a profile error, got {other:?}"),
    };
    assert!(
        message.contains("host memory") && message.contains("budget"),
        "{message}"
    );
}

#[test]
fn validation_names_the_bad_field() {
    let cases = [
        (
            "line_bytes = 64\nassociativity = 4",
            "line_bytes = 48\nassociativity = 4",
            "line_bytes",
        ),
        ("size_bytes = 4096", "size_bytes = 4000", "size_bytes"),
        ("l2_bytes = 65536", "l2_bytes = 131072", "l2.size_bytes"),
        (
            r#"paths = ["global_ca"]"#,
            r#"paths = ["global_ac"]"#,
            "unknown load path `global_ac`",
        ),
        (r#"paths = ["global_ca"]"#, r#"paths = ["shared"]"#, "paths"),
        (r#"paths = ["global_ca"]"#, "paths = []", "paths"),
        (
            r#"replacement = { policy = "lru" }
hit_latency = 30"#,
            r#"replacement = { policy = "early-miss", reserved_ways = 4 }
hit_latency = 30"#,
            "reserved_ways",
        ),
        ("hit_latency = 30", "hit_latency = 0", "hit_latency"),
        ("sm_count = 4", "sm_count = 0", "device.sm_count"),
        ("sm_mhz = 1000.0", "sm_mhz = -1.0", "clock.sm_mhz"),
        (
            "global_l1_cache_supported = true",
            "global_l1_cache_supported = false",
            "global_l1_cache_supported",
        ),
        (
            "near_latency = 200",
            "near_latency = 200\npartitions = 3",
            "l2.partitions",
        ),
        ("seed = 1", "seed = 1\ncolour = \"red\"", "colour"),
        (
            "associativity = 4",
            "associativity = \"many\"",
            "associativity",
        ),
    ];
    for (old, new, field) in cases {
        let message = profile_message(toy_with(old, new));
        assert!(
            message.contains(field),
            "`{new}`: `{message}` does not name `{field}`"
        );
    }
}

#[test]
fn load_reports_a_missing_file() {
    let message = profile_message(SimProfile::load("/nonexistent/profile.toml"));
    assert!(message.contains("/nonexistent/profile.toml"), "{message}");
}

/// The masked interleave: a valid toy L2 of two partitions homed by byte-address bit 12
/// and a 64 KiB page, and each way its fields can be wrong.
#[test]
fn a_masked_interleave_is_checked_field_by_field() {
    let masked = "near_latency = 200\npartitions = 2\ninterleave = \"masked\"\n";
    let valid = format!("{masked}home_bits = [6, 12]\nhome_page_bytes = 65536");
    let profile = toy_with("near_latency = 200", &valid).expect("a valid masked L2");
    assert_eq!(profile.l2.home_bits, [6, 12]);
    let text = profile.to_toml_string().expect("serialises");
    assert!(text.contains("interleave = \"masked\""), "{text}");
    assert_eq!(
        SimProfile::from_toml_str(&text).expect("re-parses"),
        profile
    );
    SimBackend::new(profile).expect("builds");

    let cases = [
        (
            valid.replace("partitions = 2", "partitions = 4"),
            "l2.interleave: \"masked\" needs exactly 2 partitions, not 4",
        ),
        (
            valid.replace("partitions = 2\n", ""),
            "l2.interleave: \"masked\" needs exactly 2 partitions, not 1",
        ),
        (format!("{masked}home_bits = [12]"), "l2.home_page_bytes: missing"),
        (
            format!("{masked}home_bits = [12]\nhome_page_bytes = 65000"),
            "l2.home_page_bytes: 65000 is not a power of two",
        ),
        (format!("{masked}home_page_bytes = 65536"), "l2.home_bits: empty"),
        (
            valid.replace("[6, 12]", "[5, 12]"),
            "l2.home_bits: bit 5 is not between 6",
        ),
        (
            valid.replace("[6, 12]", "[6, 16]"),
            "l2.home_bits: bit 16 is not between 6 (the 64 B line) and 15",
        ),
        (
            valid.replace("[6, 12]", "[12, 6, 12]"),
            "l2.home_bits: bit 12 is listed twice",
        ),
        (
            valid.replace("\"masked\"", "\"hash\""),
            "l2.home_bits / home_page_bytes: only with interleave = \"masked\", not \"hash\"",
        ),
        (
            "near_latency = 200\npartitions = 2\ninterleave = \"balanced\"\nhome_page_bytes = 65536"
                .to_owned(),
            "not \"balanced\"",
        ),
        (
            "near_latency = 200\nhome_bits = [12]".to_owned(),
            "l2.home_bits / home_page_bytes: only with interleave",
        ),
        (
            valid.replace("\"masked\"", "\"parity\""),
            "unknown variant `parity`",
        ),
    ];
    for (new, expected) in cases {
        let message = profile_message(toy_with("near_latency = 200", &new));
        assert!(message.contains(expected), "`{new}`: `{message}`");
    }
}
