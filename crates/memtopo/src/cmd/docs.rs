//! `memtopo completions SHELL` and `memtopo man`: generated from the command line's
//! definition, so they never disagree with `--help`.

use clap::CommandFactory;

use crate::{
    cli::Cli,
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

/// The manual page, roff.
pub fn man() -> Result<Exit, CliError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|e| CliError::Output {
            path: "the manual page".into(),
            reason: e.to_string(),
        })?;
    print(page)
}
