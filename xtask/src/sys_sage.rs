//! `cargo xtask sys-sage [--source DIR] [--work DIR] [RESULT.json ...]`: a real MT4G client
//! loads what memtopo writes.
//!
//! Builds sys-sage (caps-tum/sys-sage, the topology library whose MT4G parser reads MT4G's
//! JSON) at [`PINNED_COMMIT`] from its source, compiles `xtask/sys-sage/mt4g_tree.cpp`
//! against it, and loads with it: MT4G's own H100 sample, memtopo's MT4G export of the
//! simulated H100 and H200, and of the results named on the command line, else the committed
//! reference results (`docs/results/*.json`, else `crates/topology/examples/data/*.json`). Each tree sys-sage builds must have the sample's
//! structure (the same kinds of components in the same nesting, the same counts of SMs and
//! cores); value differences are listed, not failed on.
//!
//! The source: `--source DIR` or `SYS_SAGE_SOURCE` (a clone of sys-sage, or a checkout of
//! the pinned commit), else `git clone` from GitHub where the network allows. Needs cmake,
//! g++, libxml2 and nlohmann-json (Debian: `apt-get install cmake g++ libxml2-dev
//! nlohmann-json3-dev`). sys-sage is built in Debug, so nlohmann-json's assertions stay on
//! and a key the parser needs but the file lacks aborts the load instead of reading past
//! the end of a map.

use std::{
    collections::BTreeMap,
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

/// The sys-sage commit the test builds: release 1.1.0 ("cmake: move version to 1.1.0").
pub const PINNED_COMMIT: &str = "9a71fb598d540d7f382a94e92311e5838a623dc5";

const UPSTREAM: &str = "https://github.com/caps-tum/sys-sage";

/// Runs `cmd`, failing with its output where it fails.
fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let output = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(text)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        Err(format!(
            "{what} failed ({}):\n{}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    }
}

/// The options.
struct Options {
    source: Option<PathBuf>,
    work: PathBuf,
    /// Results to load instead of the committed reference results.
    results: Vec<PathBuf>,
}

fn options(args: &[String], workspace: &Path) -> Result<Options, String> {
    let mut source = env::var_os("SYS_SAGE_SOURCE").map(PathBuf::from);
    let mut work = crate::target_dir(workspace).join("sys-sage");
    let mut results = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{name} needs a folder"))
        };
        match arg.as_str() {
            "--source" => source = Some(value("--source")?),
            "--work" => work = value("--work")?,
            other if !other.starts_with('-') => results.push(PathBuf::from(other)),
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: cargo xtask sys-sage [--source DIR] \
                     [--work DIR] [RESULT.json ...]"
                ))
            }
        }
    }
    Ok(Options {
        source,
        work,
        results,
    })
}

/// A checkout of the pinned commit in `work/src`: cloned from the source given (a clone of
/// sys-sage) or from GitHub. A source that is not a git repository is used as it is.
fn checkout(options: &Options) -> Result<PathBuf, String> {
    let dest = options.work.join("src");
    if let Some(source) = &options.source {
        if !source.join(".git").exists() && !source.join("HEAD").exists() {
            eprintln!(
                "xtask: {} is not a git repository: using it as it is (commit not checked)",
                source.display()
            );
            return Ok(source.clone());
        }
    }
    let from = options
        .source
        .as_ref()
        .map_or_else(|| UPSTREAM.to_owned(), |s| s.display().to_string());
    if !dest.join(".git").exists() {
        let _ = fs::remove_dir_all(&dest);
        eprintln!("xtask: git clone {from}");
        run(
            Command::new("git").args(["clone", "--quiet", &from]).arg(&dest),
            "git clone",
        )
        .map_err(|e| {
            format!("{e}\n(give a local clone with --source DIR or SYS_SAGE_SOURCE where the network is closed)")
        })?;
    }
    run(
        Command::new("git")
            .args([
                "-c",
                "advice.detachedHead=false",
                "checkout",
                "--quiet",
                PINNED_COMMIT,
            ])
            .current_dir(&dest),
        &format!("git checkout {PINNED_COMMIT}"),
    )?;
    Ok(dest)
}

/// Builds the sys-sage library and the tree printer; returns the printer.
fn build(source: &Path, work: &Path, workspace: &Path) -> Result<PathBuf, String> {
    for (tool, package) in [
        ("cmake", "cmake"),
        ("g++", "g++"),
        ("xml2-config", "libxml2-dev"),
    ] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Err(format!(
                "{tool} not found: apt-get install cmake g++ libxml2-dev nlohmann-json3-dev ({package})"
            ));
        }
    }
    let build = work.join("build");
    eprintln!(
        "xtask: building sys-sage {PINNED_COMMIT} (Debug) in {}",
        build.display()
    );
    run(
        Command::new("cmake")
            .arg("-S")
            .arg(source)
            .arg("-B")
            .arg(&build)
            .arg("-DCMAKE_BUILD_TYPE=Debug"),
        "cmake configure (needs nlohmann-json3-dev and libxml2-dev)",
    )?;
    run(
        Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .args(["--target", "sys-sage", "-j", "2"]),
        "building sys-sage",
    )?;
    let library = build.join("src");
    let printer = work.join("mt4g_tree");
    let flags = |arg: &str| -> Result<Vec<String>, String> {
        Ok(run(Command::new("xml2-config").arg(arg), "xml2-config")?
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    };
    eprintln!("xtask: compiling xtask/sys-sage/mt4g_tree.cpp");
    run(
        Command::new("g++")
            .args(["-std=c++20", "-O0"])
            .arg(format!("-I{}", source.join("src").display()))
            .args(flags("--cflags")?)
            .arg(workspace.join("xtask/sys-sage/mt4g_tree.cpp"))
            .arg("-o")
            .arg(&printer)
            .arg(format!("-L{}", library.display()))
            .arg("-lsys-sage")
            .arg(format!("-Wl,-rpath,{}", library.display()))
            .args(flags("--libs")?),
        "compiling mt4g_tree.cpp",
    )?;
    Ok(printer)
}

/// One line of a printed tree: the structure part and the values.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    structure: String,
    values: String,
}

/// The printer's output as lines; the structure of a tree line is depth, kind, name and
/// count, of a path line its source.
fn parse(output: &str) -> Vec<Line> {
    output
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let cut = if fields.first() == Some(&"path") {
                3
            } else {
                4
            };
            Line {
                structure: fields[..cut.min(fields.len())].join(" | "),
                values: fields.get(cut..).map(|v| v.join(" ")).unwrap_or_default(),
            }
        })
        .collect()
}

/// The files to load: the sample first, then memtopo's exports, each as (label, file).
fn inputs(
    workspace: &Path,
    work: &Path,
    given: &[PathBuf],
) -> Result<Vec<(String, PathBuf)>, String> {
    let sample = [
        workspace.join("../shared/reference/mt4g-v1.2-sample-H100-80GB-HBM3.json"),
        workspace.join("crates/topology/tests/it/data/mt4g-v1.2-sample-H100-80GB-HBM3.json"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .ok_or("MT4G's H100 sample not found")?;
    let mut files = vec![("MT4G's H100 sample".to_owned(), sample)];
    crate::cargo(&["build", "--locked", "--quiet", "-p", "memtopo"], &[])?;
    let memtopo = crate::target_dir(workspace).join("debug/memtopo");
    let exports = work.join("exports");
    fs::create_dir_all(&exports).map_err(|e| format!("{}: {e}", exports.display()))?;
    for gpu in ["h100", "h200"] {
        let out = exports.join(format!("simulated-{gpu}.mt4g.json"));
        run(
            Command::new(&memtopo)
                .args(["--simulate", gpu, "--quiet", "-o"])
                .arg(&out),
            &format!("memtopo --simulate {gpu}"),
        )?;
        files.push((format!("memtopo --simulate {gpu}"), out));
    }
    let committed = |dir: &str| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(workspace.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.to_string_lossy();
                name.ends_with(".json") && !name.ends_with(".mt4g.json")
            })
            .collect();
        found.sort();
        found
    };
    let mut results = given.to_vec();
    if results.is_empty() {
        results = committed("docs/results");
    }
    if results.is_empty() {
        results = committed("crates/topology/examples/data");
    }
    for (i, result) in results.into_iter().enumerate() {
        let stem = result
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = exports.join(format!("{i}-{stem}.mt4g.json"));
        run(
            Command::new(&memtopo)
                .arg("render")
                .arg(&result)
                .arg("-o")
                .arg(&out),
            &format!("memtopo render {}", result.display()),
        )?;
        let shown = result.strip_prefix(workspace).unwrap_or(&result);
        files.push((shown.display().to_string(), out));
    }
    Ok(files)
}

/// `cargo xtask sys-sage`.
pub fn run_sys_sage(workspace: &Path, args: &[String]) -> Result<(), String> {
    let options = options(args, workspace)?;
    fs::create_dir_all(&options.work).map_err(|e| format!("{}: {e}", options.work.display()))?;
    let source = checkout(&options)?;
    let printer = build(&source, &options.work, workspace)?;
    let mut trees: BTreeMap<usize, (String, Vec<Line>)> = BTreeMap::new();
    let mut failures = Vec::new();
    let files = inputs(workspace, &options.work, &options.results)?;
    for (i, (label, file)) in files.into_iter().enumerate() {
        println!("== {label} ({})", file.display());
        match run(Command::new(&printer).arg(&file), "sys-sage") {
            Ok(output) => {
                print!("{output}");
                trees.insert(i, (label, parse(&output)));
            }
            Err(e) => {
                println!("sys-sage could not load it: {e}");
                failures.push(format!("{label}: sys-sage could not load it"));
            }
        }
    }
    let (_, (_, reference)) = trees
        .first_key_value()
        .ok_or("sys-sage could not load MT4G's own sample")?;
    println!("== compared with MT4G's sample");
    for (label, tree) in trees.values().skip(1) {
        let shape = |t: &[Line]| t.iter().map(|l| l.structure.clone()).collect::<Vec<_>>();
        if shape(tree) != shape(reference) {
            failures.push(format!(
                "{label}: the tree's structure differs from the sample's"
            ));
            println!("{label}: STRUCTURE DIFFERS");
            for line in shape(tree).iter().filter(|l| !shape(reference).contains(l)) {
                println!("  only here:   {line}");
            }
            for line in shape(reference).iter().filter(|l| !shape(tree).contains(l)) {
                println!("  only in MT4G's: {line}");
            }
            continue;
        }
        println!("{label}: same structure ({} lines)", tree.len());
        for (ours, theirs) in tree.iter().zip(reference) {
            if ours.values != theirs.values {
                println!(
                    "  {}: {} (MT4G's sample: {})",
                    ours.structure, ours.values, theirs.values
                );
            }
        }
    }
    if failures.is_empty() {
        println!("sys-sage: every file loaded with the sample's structure");
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_lines_split_into_structure_and_values() {
        let lines = parse("3\tSubdivision\tMultiprocessor\t132\t\npath\tCache\tL2\tlatency=219\n");
        assert_eq!(lines[0].structure, "3 | Subdivision | Multiprocessor | 132");
        assert_eq!(lines[0].values, "");
        assert_eq!(lines[1].structure, "path | Cache | L2");
        assert_eq!(lines[1].values, "latency=219");
    }
}
