//! The two Prometheus exposition formats `/metrics` serves (the broker's and the operator's):
//! OpenMetrics 1.0 text, which prometheus-client writes, to scrapers that accept it (Prometheus
//! asks for it first), and the classic text format 0.0.4 to everyone else (curl, older agents).
//! The classic one is derived from the OpenMetrics text: a counter family is named with its
//! samples' `_total` suffix, and `# UNIT` and `# EOF` lines are dropped.

/// The content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the classic text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a request's `Accept` header asks for OpenMetrics text (with a non-zero quality).
pub fn accepts_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut params = range.split(';').map(str::trim);
        let media = params.next().unwrap_or_default();
        let refused = params.any(|p| p.strip_prefix("q=").is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0)));
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
}

/// The body and content type for a scraper sending `accept`, from OpenMetrics text.
pub fn negotiate(openmetrics: String, accept: Option<&str>) -> (&'static str, String) {
    if accept.is_some_and(accepts_openmetrics) {
        (OPENMETRICS, openmetrics)
    } else {
        (PROMETHEUS_TEXT, to_prometheus_text(&openmetrics))
    }
}

/// OpenMetrics text → the classic text format.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's HELP line waits for its TYPE line, which says whether to rename it.
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some(h) = help.replace(rest) {
                push_line(&mut out, "# HELP ", h, "");
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let suffix = if kind == "counter" && !name.ends_with("_total") { "_total" } else { "" };
            if let Some(h) = help.take() {
                match h.split_once(' ') {
                    Some((n, text)) if n == name => {
                        out.push_str("# HELP ");
                        out.push_str(n);
                        push_line(&mut out, suffix, " ", text);
                    }
                    _ => push_line(&mut out, "# HELP ", h, ""),
                }
            }
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                _ => "untyped",
            };
            out.push_str("# TYPE ");
            out.push_str(name);
            push_line(&mut out, suffix, " ", kind);
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            if let Some(h) = help.take() {
                push_line(&mut out, "# HELP ", h, "");
            }
            push_line(&mut out, line, "", "");
        }
    }
    if let Some(h) = help {
        push_line(&mut out, "# HELP ", h, "");
    }
    out
}

fn push_line(out: &mut String, a: &str, b: &str, c: &str) {
    out.push_str(a);
    out.push_str(b);
    out.push_str(c);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: &str = "# HELP strom_kafka_requests Kafka requests handled.\n\
# TYPE strom_kafka_requests counter\n\
strom_kafka_requests_total{api=\"Produce\"} 5\n\
# HELP strom_isr_shrinks_total ISR shrinks.\n\
# TYPE strom_isr_shrinks_total gauge\n\
strom_isr_shrinks_total 2\n\
# HELP strom_latency_seconds Latency.\n\
# TYPE strom_latency_seconds histogram\n\
# UNIT strom_latency_seconds seconds\n\
strom_latency_seconds_bucket{le=\"+Inf\"} 1\n\
strom_latency_seconds_sum 0.5\n\
strom_latency_seconds_count 1\n\
# TYPE strom_info info\n\
strom_info_info{version=\"1\"} 1\n\
# EOF\n";

    #[test]
    fn counters_take_their_samples_name_and_openmetrics_only_lines_go() {
        let text = to_prometheus_text(OM);
        assert_eq!(
            text,
            "# HELP strom_kafka_requests_total Kafka requests handled.\n\
# TYPE strom_kafka_requests_total counter\n\
strom_kafka_requests_total{api=\"Produce\"} 5\n\
# HELP strom_isr_shrinks_total ISR shrinks.\n\
# TYPE strom_isr_shrinks_total gauge\n\
strom_isr_shrinks_total 2\n\
# HELP strom_latency_seconds Latency.\n\
# TYPE strom_latency_seconds histogram\n\
strom_latency_seconds_bucket{le=\"+Inf\"} 1\n\
strom_latency_seconds_sum 0.5\n\
strom_latency_seconds_count 1\n\
# TYPE strom_info untyped\n\
strom_info_info{version=\"1\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_goes_to_whoever_accepts_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(accepts_openmetrics(prometheus));
        assert!(!accepts_openmetrics("*/*"));
        assert!(!accepts_openmetrics("text/plain"));
        assert!(!accepts_openmetrics("application/openmetrics-text;q=0"));
        assert_eq!(negotiate(OM.to_string(), Some(prometheus)), (OPENMETRICS, OM.to_string()));
        let (kind, body) = negotiate(OM.to_string(), None);
        assert_eq!(kind, PROMETHEUS_TEXT);
        assert!(!body.contains("# EOF"), "{body}");
    }
}
