//! The HTML report: self-contained, with the diagram, the tables and, given a `--keep-raw`
//! directory, every raw curve with its change point.

use topology::{raw, render, Topology};

use crate::fixtures::{check_golden, h200_illustrative};

/// A default run on an H100 (schema 1.3) and the raw curves `--keep-raw` wrote beside it.
const H100: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

#[test]
fn html_of_h200_matches_golden() {
    check_golden(
        "h200-report.html",
        &render::html(&h200_illustrative(), None),
    );
}

/// Nothing in the report is fetched or run: no scripts, no external references.
fn assert_self_contained(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in ["<script", "src=", "href=", "<link", "@import"] {
        assert!(!html.contains(forbidden), "the report contains {forbidden}");
    }
    // `url(…)` only for the diagram's own markers.
    assert!(html.split("url(").skip(1).all(|rest| rest.starts_with('#')));
}

#[test]
fn a_real_h100_result_renders_with_every_raw_curve() {
    let topo = Topology::load(format!("{H100}/h100-result.json")).expect("the H100 result loads");
    let data = raw::load_dir(format!("{H100}/h100-raw-curves")).expect("the raw curves load");
    // Every curve of the directory (an l2-line.csv would be the line probe, not a curve).
    let csv_files = std::fs::read_dir(format!("{H100}/h100-raw-curves"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.ends_with(".csv") && name != "l2-line.csv"
        })
        .count();
    assert_eq!(data.curves.len(), csv_files);
    let html = render::html(&topo, Some(&data));
    assert_self_contained(&html);
    assert_eq!(html.matches("<figure>").count(), data.curves.len());
    // The change points come from the result's sizes: the L1 beside 8 KiB of shared
    // memory (241 KiB), beside 228 KiB (21 KiB), and the near L2 partition (25 MiB).
    for change in ["change 241 KiB", "change 21 KiB", "change 25 MiB"] {
        assert!(html.contains(change), "no {change}");
    }
    // The diagram shows the one store the carveout splits, and the run's conditions.
    assert!(html.contains("One L1 / shared-memory store per SM"));
    assert!(html.contains("L1 + shared memory = 249 KiB in each of 9 configurations"));
    assert!(html.contains("Run conditions") && html.contains("GPU-b0b2b4b2"));
    // P-values of the size tests are numbers, never 0.0000.
    assert!(html.contains("5.3e-11") && !html.contains("0.0000"));
}

#[test]
fn without_raw_data_the_report_says_how_to_get_it() {
    let html = render::html(&h200_illustrative(), None);
    assert_self_contained(&html);
    assert!(html.contains("--keep-raw DIR"));
    assert!(!html.contains("<figure>"));
    // The quartile strips need the quartiles: one box per latency of the fixture.
    let topo = h200_illustrative();
    let latencies = topo
        .elements
        .iter()
        .filter(|(_, e)| e.latency.is_some())
        .count()
        + topo.l2_partitions().map_or(0, |p| {
            usize::from(p.near_latency.is_some()) + usize::from(p.far_latency.is_some())
        });
    let strips = html.matches("class=\"strip\"").count();
    assert_eq!(strips, latencies);
    assert_eq!(html.matches("fill=\"#bfdbfe\"").count(), strips);
}

#[test]
fn the_l2_samples_become_one_histogram_per_level() {
    let dir = std::env::temp_dir().join(format!("topology-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut samples = String::from("bytes,sample,cycles,level\n");
    for k in 0..200 {
        let (cycles, level) = if k % 4 == 0 {
            (450 + k % 7, "far hit")
        } else {
            (280 + k % 5, "near hit")
        };
        samples.push_str(&format!("1048576,{k},{cycles}.0,{level}\n"));
    }
    std::fs::write(dir.join("l2-samples.csv"), samples).unwrap();
    std::fs::write(
        dir.join("l2-line.csv"),
        "# not a curve\nload,offset_bytes,cycles,miss\n",
    )
    .unwrap();
    let data = raw::load_dir(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(data.curves.is_empty());
    assert_eq!(data.level_samples.len(), 200);
    let html = render::html(&h200_illustrative(), Some(&data));
    assert_eq!(html.matches("class=\"histogram\"").count(), 2);
    assert!(
        html.contains(">n = 150<") && html.contains(">n = 50<"),
        "counts per level"
    );
}

#[test]
fn a_directory_with_a_broken_curve_names_the_file() {
    let dir = std::env::temp_dir().join(format!("topology-html-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("l1-size.csv"), "bytes,replica\n1,2\n").unwrap();
    let err = raw::load_dir(&dir).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    match &err {
        raw::RawCsvError::InFile { path, source } => {
            assert!(path.ends_with("l1-size.csv"));
            assert!(matches!(**source, raw::RawCsvError::Header { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("l1-size.csv"), "{err}");
}
