//! What a run of the suite found, held against the table of kept differences: a summary
//! (sequences, steps compared, differences kept by entry) and every difference the table does
//! not explain, with both servers' values.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::compare::Difference;
use super::run::Outcome;
use super::sequence::Sequence;
use super::table::{self, Entry};

/// The suite's findings.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Generated sequences run.
    pub(crate) generated: usize,
    /// Recorded sequences replayed.
    pub(crate) recorded: usize,
    /// Recorded requests not replayed, by why.
    pub(crate) left_out: BTreeMap<String, usize>,
    /// Steps compared (a request, poll or watch on each server).
    pub(crate) compared: usize,
    /// Steps compared in recorded sequences.
    pub(crate) compared_recorded: usize,
    pub(crate) differences: Vec<Difference>,
    pub(crate) elapsed: Duration,
    /// Only some sequences ran (`KOPF_FIDELITY_ONLY`): entries that match nothing are not
    /// stale for that.
    pub(crate) partial: bool,
}

impl Report {
    pub(crate) fn add(&mut self, sequence: &Sequence, outcome: Outcome) {
        self.compared += outcome.compared;
        if sequence.name.starts_with("recorded/") {
            self.compared_recorded += outcome.compared;
        }
        self.differences.extend(outcome.differences);
    }

    /// The differences no entry explains, and each entry with the differences it explains.
    fn judge(&self) -> (Vec<&Difference>, Vec<(Entry, Vec<&Difference>)>) {
        let mut entries: Vec<(Entry, Vec<&Difference>)> = table::entries()
            .into_iter()
            .map(|e| (e, Vec::new()))
            .collect();
        let mut unexplained = Vec::new();
        for difference in &self.differences {
            match entries.iter_mut().find(|(e, _)| e.matches(difference)) {
                Some((_, kept)) => kept.push(difference),
                None => unexplained.push(difference),
            }
        }
        (unexplained, entries)
    }

    pub(crate) fn render(&self) -> String {
        let (unexplained, entries) = self.judge();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n== fidelity: {} sequences ({} generated, {} recorded), {} steps compared ({} recorded), in {:.0?}",
            self.generated + self.recorded,
            self.generated,
            self.recorded,
            self.compared,
            self.compared_recorded,
            self.elapsed,
        );
        let kept: usize = entries.iter().map(|(_, kept)| kept.len()).sum();
        let _ = writeln!(
            out,
            "   differences: {} found, {} kept by the table, {} unexplained",
            self.differences.len(),
            kept,
            unexplained.len()
        );
        for (why, count) in &self.left_out {
            let _ = writeln!(out, "   recorded requests left out: {count} ({why})");
        }
        // `KOPF_FIDELITY_VERBOSE=1`: every kept difference too, under its entry.
        let verbose = std::env::var_os("KOPF_FIDELITY_VERBOSE").is_some_and(|v| v != "0");
        let _ = writeln!(out, "\n-- kept, by table entry:");
        for (entry, kept) in &entries {
            let hits = kept.len();
            let _ = writeln!(
                out,
                "   {hits:4}  {}: {}",
                entry.title(),
                entry.reason.trim()
            );
            if verbose {
                for difference in kept {
                    let _ = writeln!(out, "{difference}");
                }
            }
        }
        if !unexplained.is_empty() {
            let _ = writeln!(out, "\n-- unexplained differences:");
            for difference in &unexplained {
                let _ = writeln!(out, "{difference}");
            }
        }
        out
    }

    /// Fails unless the table explains every difference and every entry (but those that
    /// come and go with timing) explains one.
    pub(crate) fn assert_explained(&self) {
        let (unexplained, entries) = self.judge();
        let stale: Vec<String> = entries
            .iter()
            .filter(|(entry, kept)| kept.is_empty() && !entry.sometimes && !self.partial)
            .map(|(entry, _)| entry.title())
            .collect();
        assert!(
            unexplained.is_empty() && stale.is_empty(),
            "{} differences are not in known_differences.yaml (fix them in the fake server, or \
             add an entry with the reason); {} entries match nothing (remove them):\n{}\n",
            unexplained.len(),
            stale.len(),
            stale.join("\n")
        );
    }
}
