//! `memtopo completions SHELL` and `memtopo man`: generated from the command line's
//! definition, so they never disagree with `--help`.
//!
//! The manual page is one page: clap_mangen's sections for the top level, then each
//! subcommand with its options (not references to `memtopo-SUBCOMMAND(1)` pages, which
//! are not installed), then the exit codes of [`Exit::ALL`].

use clap::CommandFactory;
use roff::{bold, roman, Roff};

use super::Cli;
use crate::{
    error::{CliError, Exit},
    output::Stdout,
};

fn print(bytes: Vec<u8>) -> Result<Exit, CliError> {
    let mut stdout = Stdout::default();
    stdout.print(&String::from_utf8_lossy(&bytes));
    match stdout.error() {
        Some(e) => Err(CliError::Output {
            path: "standard output".into(),
            reason: e.to_string(),
        }),
        None => Ok(Exit::Success),
    }
}

/// The completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<Exit, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "memtopo", &mut script);
    print(script)
}

/// The manual page, roff, on standard output.
pub fn man() -> Result<Exit, CliError> {
    let page = page().map_err(|e| CliError::Output {
        path: "the manual page".into(),
        reason: e.to_string(),
    })?;
    print(page)
}

/// The manual page, roff.
fn page() -> std::io::Result<Vec<u8>> {
    let mut command = Cli::command();
    command.build();
    let page = clap_mangen::Man::new(command.clone());
    let mut out = Vec::new();
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    page.render_synopsis_section(&mut out)?;
    page.render_description_section(&mut out)?;
    page.render_options_section(&mut out)?;
    let mut commands = Roff::new();
    commands.control("SH", ["COMMANDS"]);
    commands.to_writer(&mut out)?;
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let mut heading = Roff::new();
        heading.control("SS", [format!("memtopo {}", sub.get_name()).as_str()]);
        if let Some(about) = sub.get_about() {
            heading.text([roman(about.to_string())]);
        }
        if sub.get_name() == "measure" {
            heading
                .control("PP", [])
                .text([roman("Its options are the OPTIONS above.")]);
            heading.to_writer(&mut out)?;
            continue;
        }
        heading.to_writer(&mut out)?;
        let mut options = Vec::new();
        clap_mangen::Man::new(sub.clone()).render_options_section(&mut options)?;
        // The subcommand's options under its own heading, not a second OPTIONS section.
        let options = String::from_utf8_lossy(&options).replacen(".SH OPTIONS\n", ".PP\n", 1);
        out.extend_from_slice(options.as_bytes());
    }
    let mut exits = Roff::new();
    exits.control("SH", ["EXIT STATUS"]);
    for exit in Exit::ALL {
        exits
            .control("TP", [])
            .text([bold(exit.code().to_string())])
            .text([roman(exit.meaning())]);
    }
    exits.to_writer(&mut out)?;
    page.render_version_section(&mut out)?;
    Ok(out)
}

/// `docs/cli.md` against the definitions it describes: what can drift is checked here.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Format;

    fn cli_md() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
        std::fs::read_to_string(path).expect("docs/cli.md")
    }

    /// Every command: the top level and each subcommand.
    fn commands() -> Vec<clap::Command> {
        let mut top = Cli::command();
        top.build();
        let mut all = vec![top.clone()];
        all.extend(
            top.get_subcommands()
                .filter(|c| c.get_name() != "help")
                .cloned(),
        );
        all
    }

    #[test]
    fn every_flag_of_every_command_is_in_cli_md() {
        let page = cli_md();
        for command in commands() {
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                assert!(
                    page.contains(&format!("`--{long}")) || page.contains(&format!("[--{long}")),
                    "memtopo {} --{long} is not in docs/cli.md",
                    command.get_name()
                );
            }
        }
    }

    #[test]
    fn every_value_of_progress_and_format_is_in_cli_md() {
        let page = cli_md();
        for value in ["auto", "json", "none"] {
            assert!(page.contains(&format!("`{value}`")), "--progress {value}");
        }
        for format in Format::ALL {
            assert!(page.contains(&format!("`{}`", format.name())), "{format:?}");
            if let Some(ext) = format.extension() {
                assert!(page.contains(&format!("`{ext}`")), "{ext}");
            }
        }
        for bench in pchase_runner::measure::bench::REGISTRY
            .iter()
            .map(|b| b.info())
        {
            if bench.deep {
                assert!(
                    page.contains(&format!("`{}`", bench.name)),
                    "--deep {}",
                    bench.name
                );
            }
        }
    }

    #[test]
    fn every_exit_code_is_in_cli_md_and_the_manual_page() {
        let md = cli_md();
        let table: Vec<u8> = md
            .lines()
            .skip_while(|l| *l != "## Exit codes")
            .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
            .collect();
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(table, codes, "the exit-code table of docs/cli.md");
        let man = String::from_utf8(page().unwrap()).unwrap();
        let status = man
            .split(".SH \"EXIT STATUS\"")
            .nth(1)
            .expect("EXIT STATUS");
        for exit in Exit::ALL {
            assert!(
                status.contains(&format!("\\fB{}\\fR", exit.code())),
                "{exit:?} in memtopo man"
            );
        }
    }

    #[test]
    fn the_manual_page_is_one_page_with_every_command() {
        let man = String::from_utf8(page().unwrap()).unwrap();
        assert!(
            !man.contains("memtopo\\-render(1)"),
            "no pages that are not installed"
        );
        for command in commands().iter().skip(1) {
            assert!(
                man.contains(&format!(".SS \"memtopo {}\"", command.get_name())),
                "{}",
                command.get_name()
            );
        }
    }

    #[test]
    fn cli_md_quotes_the_current_schema() {
        let current = topology::SchemaVersion::CURRENT.to_string();
        let page = cli_md();
        let quoted: Vec<&str> = page
            .split("schema ")
            .skip(1)
            .filter_map(|rest| {
                let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
                let version = rest[..end].trim_end_matches('.');
                version.contains('.').then_some(version)
            })
            .collect();
        assert!(!quoted.is_empty());
        for version in quoted {
            assert_eq!(version, current, "docs/cli.md quotes schema {version}");
        }
    }
}
