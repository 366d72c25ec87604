//! Printing answers: aligned tables for people, pretty JSON for scripts; and the small parsers
//! of what people type (sizes, key=value configs, broker lists).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::{CliError, Output};

/// Columns padded to their widest cell, two spaces apart; no trailing spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Prints `value` as JSON, or `human` as it is.
pub fn emit<T: Serialize>(out: &mut dyn Write, output: Output, value: &T, human: &str) -> Result<(), CliError> {
    match output {
        Output::Json => {
            let text = serde_json::to_string_pretty(value).map_err(|e| CliError::Output(std::io::Error::other(e)))?;
            writeln!(out, "{text}")?;
        }
        Output::Table => write!(out, "{human}")?,
    }
    Ok(())
}

/// `ids` as "1,2,3" ("-" when empty).
pub fn ids(ids: &[i32]) -> String {
    if ids.is_empty() {
        "-".to_string()
    } else {
        ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
    }
}

/// A byte count for people: 0 B, 1.5 KiB, 3.2 MiB, ...
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A size people type: 1048576, 512KiB, 50MiB, 1GiB (K/M/G, with or without "iB"/"B", are
/// binary multiples).
pub fn parse_bytes(text: &str) -> Result<u64, CliError> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: u64 = number.parse().map_err(|_| CliError::BadInput(format!("{text:?} is not a size like 50MiB")))?;
    let multiple: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(CliError::BadInput(format!("unknown size unit {other:?} in {text:?} (use KiB, MiB, GiB)")))
        }
    };
    number.checked_mul(multiple).ok_or_else(|| CliError::BadInput(format!("{text:?} is too large")))
}

/// `key=value` pairs as a map; a pair without `=` or with an empty key is bad input.
pub fn parse_configs(pairs: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for pair in pairs {
        match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_string(), v.to_string());
            }
            _ => return Err(CliError::BadInput(format!("config {pair:?} is not key=value"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_trim_lines() {
        let t = table(&["ID", "NAME"], &[vec!["1".into(), "a".into()], vec!["100".into(), "bb".into()]]);
        assert_eq!(t, "ID   NAME\n1    a\n100  bb\n");
    }

    #[test]
    fn sizes_parse_with_binary_units_and_refuse_nonsense() {
        assert_eq!(parse_bytes("1024").ok(), Some(1024));
        assert_eq!(parse_bytes("50MiB").ok(), Some(50 << 20));
        assert_eq!(parse_bytes("2k").ok(), Some(2048));
        assert!(parse_bytes("fast").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 << 30), "5.0 GiB");
    }

    #[test]
    fn configs_must_be_key_value() {
        let ok = parse_configs(&["retention.ms=1000".into(), "cleanup.policy=compact".into()]).expect("valid");
        assert_eq!(ok.get("retention.ms").map(String::as_str), Some("1000"));
        assert!(parse_configs(&["retention.ms".into()]).is_err());
        assert!(parse_configs(&["=1".into()]).is_err());
    }
}
