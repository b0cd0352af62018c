//! Renders compared with committed golden files (`MEMTOPO_BLESS=1` rewrites them).

use topology::render;

use crate::fixtures::{check_golden, h200_illustrative, k20c_partial};

#[test]
fn table_of_h200_matches_golden() {
    check_golden("h200-table.txt", &render::table(&h200_illustrative()));
}

#[test]
fn table_of_k20c_matches_golden() {
    check_golden("k20c-table.txt", &render::table(&k20c_partial()));
}

#[test]
fn markdown_of_h200_matches_golden() {
    check_golden("h200-report.md", &render::markdown(&h200_illustrative()));
}

#[test]
fn markdown_of_k20c_matches_golden() {
    check_golden("k20c-report.md", &render::markdown(&k20c_partial()));
}

#[test]
fn svg_of_h200_matches_golden() {
    check_golden("h200-diagram.svg", &render::svg(&h200_illustrative()));
}

#[test]
fn svg_of_k20c_matches_golden() {
    check_golden("k20c-diagram.svg", &render::svg(&k20c_partial()));
}

#[test]
fn table_has_one_row_per_element_with_thesis_columns() {
    let text = render::table(&k20c_partial());
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name} in\n{text}"))
    };
    let texture: Vec<&str> = row("Texture")
        .split("  ")
        .filter(|c| !c.trim().is_empty())
        .collect();
    assert_eq!(
        texture.iter().map(|c| c.trim()).collect::<Vec<_>>(),
        ["Texture", "12.012 KiB", "32 B", "111", "157", "RO", "4"]
    );
    assert!(row("Constant L1.5").contains("not measured [1]"));
    assert!(text.contains("[1] Constant L1.5 latency: not measured: kernel launch failed"));
    assert_eq!(text.lines().filter(|l| l.starts_with("L1 data")).count(), 1);
}

#[test]
fn table_shows_l2_partitions_as_rows() {
    let text = render::table(&h200_illustrative());
    let near = text
        .lines()
        .find(|l| l.trim_start().starts_with("near partition"))
        .unwrap();
    // Medians with their interquartile ranges.
    assert!(
        near.contains("25 MiB") && near.contains("222 [219–225]"),
        "{near}"
    );
    let far = text
        .lines()
        .find(|l| l.trim_start().starts_with("far partition"))
        .unwrap();
    assert!(far.contains("394 [392–399]"), "{far}");
}

#[test]
fn svg_is_well_formed_enough_to_parse() {
    let svg = render::svg(&h200_illustrative());
    // Every opened element is closed: count tags of the kinds we emit.
    for tag in ["text", "svg"] {
        let open = svg.matches(&format!("<{tag}")).count();
        let close = svg.matches(&format!("</{tag}>")).count();
        assert_eq!(open, close, "<{tag}> opened {open} times, closed {close}");
    }
    assert!(svg.contains("near partition") && svg.contains("far partition"));
    assert!(svg.contains("≥ 64 KiB"));
    // The L1's cache group and shared memory drawn as the one store they are, with what
    // the carveout splits.
    assert!(svg.contains("One L1 / shared-memory store per SM"), "{svg}");
    assert!(svg.contains("L1D + TXT + RO: one cache"), "{svg}");
    assert!(svg.contains("what the carveout splits"), "{svg}");
}

#[test]
fn table_shows_the_fetch_granularity_where_no_line_size_is_known() {
    use topology::{Bytes, ComputeCapability, DeviceInfo, ElementKind, Provenance, Size, Topology};
    let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 1));
    topo.element_mut(ElementKind::L1Data)
        .set_fetch_granularity(Size::exact(Bytes(32), Provenance::Benchmark));
    let table = topology::render::table(&topo);
    let row = table
        .lines()
        .find(|l| l.starts_with("L1 data"))
        .expect("L1 row");
    assert!(row.contains("32 B (fetch)"), "{row}");
    topo.element_mut(ElementKind::L1Data)
        .set_line_size(Size::exact(Bytes(128), Provenance::Benchmark));
    let table = topology::render::table(&topo);
    let row = table
        .lines()
        .find(|l| l.starts_with("L1 data"))
        .expect("L1 row");
    assert!(row.contains("128 B") && !row.contains("(fetch)"), "{row}");
}
