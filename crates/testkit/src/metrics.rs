//! Reading a Prometheus / OpenMetrics scrape.

/// The value of the sample `name` (with its labels, as written) in a scrape; 0 when absent.
pub fn metric_sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().expect("a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_found_by_its_whole_name_and_labels() {
        let text = "# TYPE edith_turns_total counter\n\
                    edith_turns_total{state=\"completed\"} 3\n\
                    edith_turns_total{state=\"failed\"} 1\n\
                    edith_turns_total_other 9\n";
        assert_eq!(
            metric_sample(text, r#"edith_turns_total{state="completed"}"#),
            3.0
        );
        assert_eq!(
            metric_sample(text, r#"edith_turns_total{state="failed"}"#),
            1.0
        );
        // A name that only begins another sample's is not that sample.
        assert_eq!(metric_sample(text, "edith_turns_total"), 0.0);
    }
}
