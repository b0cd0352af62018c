//! TEMPORARY test wiring by the ptx helper; the lead engineer rewrites this file.
mod ptx;
mod ptxas;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ptx") => ptx::run_ptx(&args[1..]),
        Some("ptxas") => ptxas::run_ptxas(&args[1..]),
        _ => Err("usage: cargo xtask ptx [--check] | ptxas".to_owned()),
    };
    if let Err(message) = result {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}
