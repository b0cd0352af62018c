//! `--keep-raw`: the raw latency curves as CSV and SVG plots with the change marked.

use std::{fmt::Write as _, fs, path::Path};

use pchase_runner::measure::{
    l2::{L2Findings, L2Line},
    RawCurve,
};
use plotters::prelude::*;

/// Mean and median latency of each swept size.
fn summary(curve: &RawCurve) -> Vec<(u64, f64, f64)> {
    curve
        .points
        .iter()
        .map(|p| {
            let mut sorted = p.values.clone();
            sorted.sort_by(f64::total_cmp);
            let mean = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64;
            let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
            (p.bytes, mean, median)
        })
        .collect()
}

/// One CSV row per size and replica.
fn csv(curve: &RawCurve) -> String {
    let mut out = format!("{}\n", topology::raw::CURVE_CSV_HEADER);
    for p in &curve.points {
        // Sweeps run on one SM per launch (the L2's) record no SM per value.
        for (i, v) in p.values.iter().enumerate() {
            let smid = p.smids.get(i).map_or(String::new(), u32::to_string);
            let _ = writeln!(out, "{},{i},{smid},{v:.4}", p.bytes);
        }
    }
    out
}

fn plot(curve: &RawCurve, path: &Path) -> Result<(), String> {
    let points = summary(curve);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Ok(());
    };
    let y_max = points.iter().map(|p| p.1.max(p.2)).fold(0.0, f64::max) * 1.1 + 1.0;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    let draw = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&curve.name, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(first.0 as f64..last.0 as f64, 0.0..y_max)
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("array size (bytes)")
        .y_desc("latency (cycles)")
        .draw()
        .map_err(|e| draw(&e))?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0 as f64, p.1)),
            &BLUE,
        ))
        .map_err(|e| draw(&e))?
        .label("mean")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0 as f64, p.2)),
            &BLACK,
        ))
        .map_err(|e| draw(&e))?
        .label("median")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    if let Some(change) = curve.change_index.and_then(|i| curve.points.get(i)) {
        let x = change.bytes as f64;
        chart
            .draw_series(LineSeries::new([(x, 0.0), (x, y_max)], RED.stroke_width(2)))
            .map_err(|e| draw(&e))?
            .label(format!("change point: {} B", change.bytes))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))
}

/// Writes `<name>.csv` and `<name>.svg` for every curve into `dir`.
pub fn write_curves(dir: &Path, curves: &[RawCurve]) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for curve in curves {
        let stem: String = curve
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        fs::write(dir.join(format!("{stem}.csv")), csv(curve)).map_err(|e| e.to_string())?;
        plot(curve, &dir.join(format!("{stem}.svg")))?;
    }
    Ok(())
}

/// Writes the L2 line probe's timed loads as `l2-line.csv` into `dir`: one row per load
/// with its byte offset in the array, its cycles and whether it counted as a miss.
pub fn write_l2_line(dir: &Path, line: &L2Line) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut out = format!(
        "# array_bytes={} evicting_nodes={} granularity={} threshold={:.1} line_bytes={}\nload,offset_bytes,cycles,miss\n",
        line.array_bytes, line.evicting_nodes, line.granularity, line.threshold, line.bytes
    );
    for (k, &cycles) in line.latencies.iter().enumerate() {
        let miss = u8::from(f64::from(cycles) > line.threshold);
        let _ = writeln!(out, "{k},{},{cycles},{miss}", k as u64 * line.granularity);
    }
    fs::write(dir.join("l2-line.csv"), out).map_err(|e| e.to_string())
}

/// Writes the L2 sweep's sampled loads as `l2-samples.csv` into `dir`: one row per load
/// (array bytes, sample number, cycles with the overhead subtracted, the level it fell
/// into), so that every level's distribution can be redrawn.
pub fn write_l2_samples(dir: &Path, l2: &L2Findings) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut out = String::from("bytes,sample,cycles,level\n");
    for point in &l2.points {
        for (k, &cycles) in point.samples.iter().enumerate() {
            let level = level_of(l2, cycles).unwrap_or("");
            let _ = writeln!(out, "{},{k},{cycles:.1},{level}", point.bytes);
        }
    }
    fs::write(dir.join("l2-samples.csv"), out).map_err(|e| e.to_string())
}

/// The L2 level a sampled load falls into, if any.
fn level_of(l2: &L2Findings, cycles: f64) -> Option<&'static str> {
    l2.levels
        .iter()
        .find(|l| l.distribution.contains(cycles, 0.0))
        .map(|l| l.kind.name())
}

/// The run's curves (with the change each sweep found) and the L2 sweep's samples, for
/// the HTML report (`-o report.html`): what `--keep-raw` writes, without the files.
pub fn report_data(curves: &[RawCurve], l2: Option<&L2Findings>) -> topology::raw::RawData {
    let curves = curves
        .iter()
        .map(|curve| topology::raw::Curve {
            name: curve.name.clone(),
            points: curve
                .points
                .iter()
                .flat_map(|p| {
                    p.values
                        .iter()
                        .enumerate()
                        .map(|(i, &mean_cycles)| topology::raw::RawPoint {
                            bytes: p.bytes,
                            replica: u32::try_from(i).unwrap_or(u32::MAX),
                            smid: p.smids.get(i).copied(),
                            mean_cycles,
                        })
                })
                .collect(),
            change_points: curve
                .change_index
                .and_then(|i| curve.points.get(i))
                .map(|p| vec![p.bytes])
                .unwrap_or_default(),
        })
        .collect();
    let level_samples = l2.map_or_else(Vec::new, |l2| {
        l2.points
            .iter()
            .flat_map(|point| {
                point
                    .samples
                    .iter()
                    .map(|&cycles| topology::raw::LevelSample {
                        bytes: point.bytes,
                        cycles,
                        level: level_of(l2, cycles).map(str::to_owned),
                    })
            })
            .collect()
    });
    topology::raw::RawData {
        curves,
        level_samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pchase_runner::measure::probe::SizeSamples;

    #[test]
    fn csv_has_a_row_per_value_with_or_without_sms() {
        let curve = RawCurve {
            name: "l2-size".into(),
            points: vec![
                SizeSamples {
                    bytes: 1024,
                    values: vec![282.0],
                    smids: Vec::new(),
                },
                SizeSamples {
                    bytes: 2048,
                    values: vec![38.5, 38.75],
                    smids: vec![3, 7],
                },
            ],
            change_index: Some(1),
        };
        let text = csv(&curve);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 4, "{text}");
        assert_eq!(rows[1], "1024,0,,282.0000");
        assert_eq!(rows[3], "2048,1,7,38.7500");
        // topology's reader reads back what the writer wrote.
        let back = topology::raw::read_curve_csv(&text).expect("reads back");
        assert_eq!(back.len(), 3);
        assert_eq!((back[0].bytes, back[0].smid), (1024, None));
        assert_eq!(
            (back[2].replica, back[2].smid, back[2].mean_cycles),
            (1, Some(7), 38.75)
        );
    }

    #[test]
    fn the_l2_line_probe_is_written_with_offsets_and_misses() {
        let dir = std::env::temp_dir().join(format!("memtopo-raw-{}", std::process::id()));
        let line = L2Line {
            bytes: 128,
            agreement: 1.0,
            runs: 1,
            miss_share: 0.5,
            array_bytes: 1 << 20,
            evicting_nodes: 1024,
            threshold: 450.0,
            granularity: 64,
            latencies: vec![280, 660, 661, 281],
        };
        write_l2_line(&dir, &line).unwrap();
        let text = fs::read_to_string(dir.join("l2-line.csv")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 6, "{text}");
        assert!(rows[0].contains("line_bytes=128"), "{text}");
        assert_eq!(rows[2], "0,0,280,0");
        assert_eq!(rows[3], "1,64,660,1");
        assert_eq!(rows[5], "3,192,281,0");
    }
}
