//! The raw curves `memtopo --keep-raw` writes read back, and malformed ones refused.

use topology::raw::{load_curve_csv, read_curve_csv, RawCsvError, CURVE_CSV_HEADER};

#[test]
fn a_curve_measured_on_an_h200_reads_back() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/h200-l1-size-curve.csv"
    );
    let points = load_curve_csv(path).expect("a memtopo curve");
    assert_eq!(points.len(), 312);
    assert_eq!(points[0].bytes, 246_336);
    assert!(points.iter().all(|p| p.smid.is_some() && p.replica < 8));
    assert!(points.windows(2).all(|w| w[0].bytes <= w[1].bytes));
    // Hits before the L1's 246,784 B, misses well past it.
    assert!(points[0].mean_cycles < 40.0);
    assert!(points.last().is_some_and(|p| p.mean_cycles > 40.0));
}

#[test]
fn malformed_curves_are_refused_with_the_line() {
    let row = |text: &str| format!("{CURVE_CSV_HEADER}\n4096,0,1,38.7\n{text}\n");
    let line_of = |text: &str| match read_curve_csv(&row(text)) {
        Err(RawCsvError::Row { line, message }) => (line, message),
        other => panic!("{text}: expected a row error, got {other:?}"),
    };
    for (text, says) in [
        ("8192,0,1", "3 fields"),
        ("8192,0,1,NaN", "no latency"),
        ("8192,0,1,1e300", "no latency"),
        ("0,0,1,38.0", "no array size"),
        ("18446744073709551615,0,1,38.0", "no array size"),
        ("2048,0,1,38.0", "must not go down"),
        ("8192,-1,1,38.0", "replica"),
        ("8192,0,x,38.0", "smid"),
    ] {
        let (line, message) = line_of(text);
        assert_eq!(line, 3, "{text}");
        assert!(message.contains(says), "{text}: {message}");
    }
    assert!(matches!(read_curve_csv(""), Err(RawCsvError::Empty)));
    let huge = format!("{}\n", "y".repeat(100_000));
    match read_curve_csv(&huge) {
        Err(RawCsvError::Header { found }) => assert!(found.len() < 100),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        load_curve_csv("/nonexistent/curve.csv"),
        Err(RawCsvError::Io { .. })
    ));
}
