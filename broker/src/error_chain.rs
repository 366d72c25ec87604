//! One line for an error and all its causes ("op failed: cause: root cause"), for logs, exit
//! messages and the error messages Kafka responses carry.

/// The error followed by each of its sources, separated by ": ".
pub fn display(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
