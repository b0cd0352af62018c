//! The benchmarks' sections ([`crate::Section`], schema 1.8) in every renderer: a titled
//! table of label and value per section, in the order of the sections' names, with the
//! method below the title. Nothing here knows a benchmark: a row renders by its kind.

use std::fmt::Write as _;

use crate::model::Topology;

/// Each section as an aligned two-column table under its title (and method); empty where
/// the topology has no sections.
pub(super) fn text(topo: &Topology) -> String {
    let mut out = String::new();
    for section in topo.sections.values() {
        let _ = writeln!(out, "{}", section.title);
        if let Some(method) = &section.method {
            let _ = writeln!(out, "  {method}");
        }
        let values: Vec<String> = section.rows.iter().map(|r| r.value.to_string()).collect();
        let cells: Vec<Vec<&str>> = section
            .rows
            .iter()
            .zip(&values)
            .map(|(row, value)| vec![row.label.as_str(), value.as_str()])
            .collect();
        for line in super::aligned(&["Quantity", "Value"], &cells).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// Each section as a Markdown heading, its method and a table of label, value and
/// provenance.
pub(super) fn markdown(topo: &Topology, out: &mut String, escape: fn(&str) -> String) {
    for section in topo.sections.values() {
        let _ = writeln!(out, "\n## {}\n", escape(&section.title));
        if let Some(method) = &section.method {
            let _ = writeln!(out, "{}\n", escape(method));
        }
        let _ = writeln!(
            out,
            "| quantity | value | provenance |\n| --- | --- | --- |"
        );
        for row in &section.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape(&row.label),
                escape(&row.value.to_string()),
                row.value.provenance()
            );
        }
    }
}

/// A section as the HTML report shows it: title, method, and rows of label, value and
/// provenance.
pub(super) type HtmlTable<'a> = (&'a str, Option<&'a str>, Vec<Vec<String>>);

/// Each section for an HTML table of label, value and provenance, with its title and method.
pub(super) fn html_tables(topo: &Topology) -> Vec<HtmlTable<'_>> {
    topo.sections
        .values()
        .map(|section| {
            let rows = section
                .rows
                .iter()
                .map(|row| {
                    vec![
                        row.label.clone(),
                        row.value.to_string(),
                        row.value.provenance().to_string(),
                    ]
                })
                .collect();
            (section.title.as_str(), section.method.as_deref(), rows)
        })
        .collect()
}

/// One line per section for the diagram: its title and every row's label and value.
pub(super) fn svg_lines(topo: &Topology) -> Vec<String> {
    topo.sections
        .values()
        .map(|section| {
            let rows: Vec<String> = section
                .rows
                .iter()
                .map(|row| format!("{} {}", row.label, row.value))
                .collect();
            format!("{}: {}", section.title, rows.join(" · "))
        })
        .collect()
}
