//! `cargo xtask codegen`: regenerates the contracts and generated code from the code.
//! `cargo xtask catalog`: re-extracts the native catalog and the Desktop routes from the
//! installed hermes-agent, then regenerates.

use std::process::ExitCode;

fn main() -> ExitCode {
    let outcome = match std::env::args().nth(1).as_deref() {
        Some("codegen") => xtask::write_all().map_err(|e| e.to_string()),
        Some("catalog") => xtask::write_catalog(),
        _ => {
            eprintln!("usage: cargo xtask codegen | cargo xtask catalog");
            return ExitCode::from(2);
        }
    };
    match outcome {
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
    }
}
