//! `cargo xtask codegen`: regenerates the contracts and generated code from the code.
//! `cargo xtask catalog`: re-extracts the native catalog from the installed hermes-agent, then
//! regenerates.

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("codegen") => match xtask::write_all() {
            Ok(changed) if changed.is_empty() => {
                println!("contracts and generated code are up to date");
                ExitCode::SUCCESS
            }
            Ok(changed) => {
                for path in changed {
                    println!("wrote {path}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("xtask: {e}");
                ExitCode::FAILURE
            }
        },
        Some("catalog") => match xtask::write_catalog() {
            Ok(changed) => {
                for path in changed {
                    println!("wrote {path}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("xtask: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: cargo xtask codegen | cargo xtask catalog");
            ExitCode::from(2)
        }
    }
}
