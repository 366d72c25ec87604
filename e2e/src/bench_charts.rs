//! SVG charts of a side-by-side benchmark run (`e2e/scripts/bench-vs-kafka.sh`), drawn from
//! its raw `results.tsv` by `strom-load charts`: produce and consume throughput per topology
//! and end-to-end latency, Apache Kafka's bar beside Strom's for every row.
//!
//! Each row's figure is the median run, chosen as the script's report chooses it (by MB/s; a
//! latency row by p99; of an even number of runs, the worse middle one), so the charts and
//! the tables in docs/benchmarks.md show the same runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{bail, Context, Result};

/// One client run: a line of results.tsv.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub topology: String,
    pub system: String,
    pub record_size: u64,
    pub acks: String,
    pub partitions: u32,
    pub client: String,
    pub op: String,
    pub mb_per_s: f64,
    /// p50, p99, p99.9 in ms (latency runs).
    pub latency_ms: Option<[f64; 3]>,
}

/// The runs of a results.tsv that succeeded.
pub fn parse_results(tsv: &str) -> Result<Vec<Run>> {
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().context("an empty results file")?.split('\t').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("no column {name}"));
    let [topology, system, size, acks, partitions, client, op, mb, p50, p99, p999, status] = [
        "topology",
        "system",
        "record_size",
        "acks",
        "partitions",
        "client",
        "op",
        "mb_per_s",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "status",
    ]
    .map(column);
    let (topology, system, size, acks, partitions, client, op, mb, p50, p99, p999, status) =
        (topology?, system?, size?, acks?, partitions?, client?, op?, mb?, p50?, p99?, p999?, status?);
    let mut runs = Vec::new();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |i: usize| f.get(i).copied().with_context(|| format!("line {}: {} fields", n + 2, f.len()));
        if field(status)? != "ok" {
            continue;
        }
        let number = |i: usize| -> Result<f64> {
            let s = field(i)?;
            s.parse().with_context(|| format!("line {}: {s:?} is not a number", n + 2))
        };
        let op_name = field(op)?.to_string();
        let latency_ms = if op_name == "latency" { Some([number(p50)?, number(p99)?, number(p999)?]) } else { None };
        runs.push(Run {
            topology: field(topology)?.to_string(),
            system: field(system)?.to_string(),
            record_size: field(size)?.parse().context("record_size")?,
            acks: field(acks)?.to_string(),
            partitions: field(partitions)?.parse().context("partitions")?,
            client: field(client)?.to_string(),
            op: op_name,
            mb_per_s: number(mb)?,
            latency_ms,
        });
    }
    Ok(runs)
}

/// A row of a chart: its label and each system's figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub kafka: Option<f64>,
    pub strom: Option<f64>,
}

type Key = (String, u64, String, u32, String, String);

fn key(r: &Run) -> Key {
    (r.topology.clone(), r.record_size, r.acks.clone(), r.partitions, r.client.clone(), r.op.clone())
}

/// The median of `runs` by `by`, of an even number the worse middle one (`higher_is_better`
/// says which is worse).
fn median(mut runs: Vec<&Run>, by: fn(&Run) -> f64, higher_is_better: bool) -> Option<&Run> {
    runs.sort_by(|a, b| by(a).total_cmp(&by(b)));
    if runs.is_empty() {
        return None;
    }
    let n = runs.len();
    let i = if n % 2 == 1 {
        n / 2
    } else if higher_is_better {
        n / 2 - 1
    } else {
        n / 2
    };
    Some(runs[i])
}

fn size_label(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn client_label(client: &str) -> &str {
    match client {
        "java" => "Java",
        "strom-load" => "librdkafka",
        other => other,
    }
}

/// The median MB/s of each row of `op` ("produce" or "consume") on `topology`.
pub fn throughput_rows(runs: &[Run], topology: &str, op: &str) -> Vec<Row> {
    let mut by_key: BTreeMap<Key, BTreeMap<&str, Vec<&Run>>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.topology == topology && r.op == op) {
        by_key.entry(key(r)).or_default().entry(r.system.as_str()).or_default().push(r);
    }
    by_key
        .into_iter()
        .map(|((_, size, acks, partitions, client, _), systems)| {
            let pick =
                |s: &str| systems.get(s).and_then(|v| median(v.clone(), |r| r.mb_per_s, true)).map(|r| r.mb_per_s);
            Row {
                label: format!("{} acks={acks} {partitions}p {}", size_label(size), client_label(&client)),
                kafka: pick("kafka"),
                strom: pick("strom"),
            }
        })
        .collect()
}

/// p50, p99 and p99.9 of the median-p99 latency run of each row, as one row per percentile.
pub fn latency_rows(runs: &[Run]) -> Vec<Row> {
    let mut by_key: BTreeMap<Key, BTreeMap<&str, Vec<&Run>>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.op == "latency" && r.latency_ms.is_some()) {
        by_key.entry(key(r)).or_default().entry(r.system.as_str()).or_default().push(r);
    }
    let mut rows = Vec::new();
    for ((topology, _, _, partitions, _, _), systems) in by_key {
        let pick =
            |s: &str| systems.get(s).and_then(|v| median(v.clone(), |r| r.latency_ms.map_or(0.0, |l| l[1]), false));
        let (kafka, strom) = (pick("kafka"), pick("strom"));
        let nodes = if topology == "1" { "1 node".to_string() } else { format!("{topology} nodes") };
        for (i, name) in ["p50", "p99", "p99.9"].iter().enumerate() {
            rows.push(Row {
                label: format!("{nodes}, {partitions}p, {name}"),
                kafka: kafka.and_then(|r| r.latency_ms).map(|l| l[i]),
                strom: strom.and_then(|r| r.latency_ms).map(|l| l[i]),
            });
        }
    }
    rows
}

const KAFKA_COLOR: &str = "#9e9e9e";
const STROM_COLOR: &str = "#1f6feb";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A horizontal bar chart: for each row a Kafka bar above a Strom bar, each with its figure,
/// and Strom/Kafka at the right end.
pub fn bar_chart(title: &str, unit: &str, rows: &[Row]) -> Result<String> {
    if rows.is_empty() {
        bail!("{title}: no rows");
    }
    const LABEL_W: f64 = 200.0;
    const PLOT_W: f64 = 440.0;
    const RATIO_W: f64 = 70.0;
    const BAR_H: f64 = 9.0;
    const ROW_H: f64 = 2.0 * BAR_H + 8.0;
    const TOP: f64 = 48.0;
    let width = LABEL_W + PLOT_W + RATIO_W + 20.0;
    let height = TOP + ROW_H * rows.len() as f64 + 30.0;
    let max = rows.iter().flat_map(|r| [r.kafka, r.strom]).flatten().fold(0.0_f64, f64::max);
    let scale = if max > 0.0 { (PLOT_W - 50.0) / max } else { 0.0 };
    let mut svg = String::new();
    let w = &mut svg;
    writeln!(
        w,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    )?;
    writeln!(w, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(w, r#"<text x="10" y="18" font-size="14" font-weight="bold">{}</text>"#, escape(title))?;
    let legend_y = 34.0;
    for (i, (name, color)) in [("Apache Kafka", KAFKA_COLOR), ("Strom", STROM_COLOR)].iter().enumerate() {
        let x = 10.0 + i as f64 * 110.0;
        writeln!(w, r#"<rect x="{x}" y="{}" width="10" height="10" fill="{color}"/>"#, legend_y - 9.0)?;
        writeln!(w, r#"<text x="{}" y="{legend_y}">{name}</text>"#, x + 14.0)?;
    }
    writeln!(
        w,
        r#"<text x="{}" y="{legend_y}" text-anchor="end">{} · Strom/Kafka</text>"#,
        width - 10.0,
        escape(unit)
    )?;
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        writeln!(
            w,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LABEL_W - 6.0,
            y + BAR_H + 3.0,
            escape(&row.label)
        )?;
        for (j, (value, color)) in [(row.kafka, KAFKA_COLOR), (row.strom, STROM_COLOR)].iter().enumerate() {
            let by = y + j as f64 * BAR_H;
            match value {
                Some(v) => {
                    let len = (v * scale).max(0.5);
                    writeln!(
                        w,
                        r#"<rect x="{LABEL_W}" y="{by}" width="{len:.1}" height="{}" fill="{color}"/>"#,
                        BAR_H - 1.0
                    )?;
                    writeln!(
                        w,
                        r#"<text x="{:.1}" y="{}" font-size="9">{}</text>"#,
                        LABEL_W + len + 3.0,
                        by + BAR_H - 1.5,
                        figure(*v)
                    )?;
                }
                None => {
                    writeln!(w, r#"<text x="{}" y="{}" font-size="9">no run</text>"#, LABEL_W + 3.0, by + BAR_H - 1.5)?
                }
            }
        }
        if let (Some(k), Some(s)) = (row.kafka, row.strom) {
            if k > 0.0 {
                writeln!(
                    w,
                    r#"<text x="{}" y="{}" text-anchor="end">{:.2}</text>"#,
                    width - 10.0,
                    y + BAR_H + 3.0,
                    s / k
                )?;
            }
        }
    }
    writeln!(w, "</svg>")?;
    Ok(svg)
}

/// Every chart of a run: (file name, SVG).
pub fn charts(runs: &[Run]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (topology, nodes) in [("1", "one node"), ("3", "three nodes, RF 3")] {
        for op in ["produce", "consume"] {
            let rows = throughput_rows(runs, topology, op);
            if rows.is_empty() {
                continue;
            }
            let title =
                format!("{} throughput, {nodes} (median run)", if op == "produce" { "Produce" } else { "Consume" });
            out.push((format!("{op}-{topology}node.svg"), bar_chart(&title, "MB/s, longer is better", &rows)?));
        }
    }
    let rows = latency_rows(runs);
    if !rows.is_empty() {
        let title = "End-to-end latency, 1 KiB at a fixed rate, acks=all (median-p99 run)";
        out.push(("latency.svg".to_string(), bar_chart(title, "ms, shorter is better", &rows)?));
    }
    if out.is_empty() {
        bail!("no successful produce, consume or latency runs to chart");
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TSV: &str = "topology\tsystem\trecord_size\tacks\tpartitions\tclient\top\trecords\tsecs\trecords_per_s\tmb_per_s\tbroker_cpu_s\tbroker_peak_rss_mib\tp50_ms\tp99_ms\tp999_ms\tstatus
1\tkafka\t100\t1\t1\tjava\tproduce\t5\t1\t5\t80.0\t1\t1\t-\t-\t-\tok
1\tkafka\t100\t1\t1\tjava\tproduce\t5\t1\t5\t90.0\t1\t1\t-\t-\t-\tok
1\tstrom\t100\t1\t1\tjava\tproduce\t5\t1\t5\t99.0\t1\t1\t-\t-\t-\tok
1\tstrom\t100\t1\t1\tjava\tproduce\t5\t1\t5\t500.0\t1\t1\t-\t-\t-\tfailed
1\tstrom\t100\t1\t1\tjava\tproduce\t5\t1\t5\t95.0\t1\t1\t-\t-\t-\tok
1\tstrom\t100\t1\t1\tjava\tproduce\t5\t1\t5\t97.0\t1\t1\t-\t-\t-\tok
3\tkafka\t1024\tall\t6\tstrom-load\tlatency\t5\t1\t5\t48.8\t1\t1\t3.0\t12.0\t29.0\tok
3\tkafka\t1024\tall\t6\tstrom-load\tlatency\t5\t1\t5\t48.8\t1\t1\t4.0\t10.0\t20.0\tok
3\tstrom\t1024\tall\t6\tstrom-load\tlatency\t5\t1\t5\t48.8\t1\t1\t2.0\t9.0\t40.0\tok
";

    #[test]
    fn rows_take_the_median_run_as_the_report_does() {
        let runs = parse_results(TSV).unwrap();
        assert_eq!(runs.len(), 8, "the failed run is left out");
        let rows = throughput_rows(&runs, "1", "produce");
        // Kafka: two runs, the worse middle one (80); Strom: the median of 95, 97, 99.
        assert_eq!(rows, vec![Row { label: "100 B acks=1 1p Java".into(), kafka: Some(80.0), strom: Some(97.0) }]);
        let latency = latency_rows(&runs);
        assert_eq!(latency.len(), 3);
        // Kafka's p99s are 10 and 12: the worse (12) run, whose p50 is 3.
        assert_eq!(latency[0], Row { label: "3 nodes, 6p, p50".into(), kafka: Some(3.0), strom: Some(2.0) });
        assert_eq!(latency[1].kafka, Some(12.0));
        assert_eq!(latency[2].strom, Some(40.0));
    }

    #[test]
    fn a_chart_has_a_bar_per_system_and_row_and_the_ratio() {
        let runs = parse_results(TSV).unwrap();
        let charts = charts(&runs).unwrap();
        let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["produce-1node.svg", "latency.svg"]);
        let svg = &charts[0].1;
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches(&format!(r#"fill="{STROM_COLOR}""#)).count(), 2, "legend and one bar");
        assert!(svg.contains(">1.21<"), "97/80: {svg}");
        assert!(parse_results("topology\tsystem\n").is_err(), "columns missing");
    }
}
