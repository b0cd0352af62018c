//! Renders a topology result file as a terminal table, Markdown, SVG or MT4G
//! JSON, or diffs two result files.
//!
//! ```text
//! cargo run -p topology --example topology_render -- table examples/results/h200-illustrative.json
//! cargo run -p topology --example topology_render -- svg examples/results/h200-illustrative.toml > h200.svg
//! cargo run -p topology --example topology_render -- diff before.json after.json
//! cargo run -p topology --example topology_render -- html result.json [RAW_DIR] > report.html
//! ```

use std::process::ExitCode;

use topology::{diff, mt4g, render, Topology};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: topology_render (table|markdown|svg|html|mt4g|json|toml) FILE | html FILE RAW_DIR | diff FILE FILE";
    let load = |path: &String| Topology::load(path).map_err(|e| e.to_string());
    let result = match args.as_slice() {
        [command, path] => load(path).and_then(|topo| match command.as_str() {
            "table" => Ok(render::table(&topo)),
            "markdown" => Ok(render::markdown(&topo)),
            "svg" => Ok(render::svg(&topo)),
            "html" => Ok(render::html(&topo, None)),
            "mt4g" => Ok(mt4g::export_string(&topo)),
            "json" => topo.to_json_string().map_err(|e| e.to_string()),
            "toml" => topo.to_toml_string().map_err(|e| e.to_string()),
            _ => Err(usage.to_owned()),
        }),
        [command, path, dir] if command == "html" => load(path).and_then(|topo| {
            let raw = topology::raw::load_dir(dir).map_err(|e| e.to_string())?;
            Ok(render::html(&topo, Some(&raw)))
        }),
        [command, before, after] if command == "diff" => {
            load(before).and_then(|a| load(after).map(|b| diff::diff(&a, &b).to_string()))
        }
        _ => Err(usage.to_owned()),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
