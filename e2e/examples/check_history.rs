//! Runs the reliability checker (P1–P8) over a saved history: `cargo run --release -p e2e
//! --example check_history -- <dir>/history.jsonl`. Prints the report and every anomaly.

fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: check_history <history.jsonl>"))?;
    let ops = e2e::reliability::history::read(std::path::Path::new(&path))?;
    let report = e2e::reliability::check::check(&ops);
    println!("{report}");
    for anomaly in &report.anomalies {
        println!("  {anomaly}");
    }
    Ok(())
}
