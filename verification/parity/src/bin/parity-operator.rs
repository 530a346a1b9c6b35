//! The kopf-rs side of the differential suite: the operator that `PARITY_SPEC` (a JSON
//! [`OperatorSpec`](kopf_parity::spec::OperatorSpec)) describes, each handler recording its
//! calls in the file `PARITY_CALLS`, run with kopf-rs' command line (`kopf run`'s options).

use std::path::PathBuf;
use std::process::ExitCode;

use kopf_parity::spec::OperatorSpec;

#[tokio::main]
async fn main() -> ExitCode {
    let (Some(spec), Some(calls)) = (
        std::env::var_os("PARITY_SPEC"),
        std::env::var_os("PARITY_CALLS"),
    ) else {
        eprintln!(
            "parity-operator: set PARITY_SPEC (the operator, as JSON) and PARITY_CALLS (where calls go)"
        );
        return ExitCode::from(2);
    };
    let text = match tokio::fs::read_to_string(&spec).await {
        Ok(text) => text,
        Err(error) => {
            eprintln!(
                "parity-operator: reading {}: {error}",
                PathBuf::from(spec).display()
            );
            return ExitCode::from(2);
        }
    };
    let spec: OperatorSpec = match serde_json::from_str(&text) {
        Ok(spec) => spec,
        Err(error) => {
            eprintln!("parity-operator: PARITY_SPEC is not an operator spec: {error}");
            return ExitCode::from(2);
        }
    };
    kopf::run_with(kopf_parity::operator::registry(
        &spec,
        &PathBuf::from(calls),
    ))
    .await
}
