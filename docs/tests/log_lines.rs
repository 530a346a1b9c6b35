//! The log lines that the troubleshooting chapter quotes are the operator's own: each quoted
//! line (a bold code span, `**`...`**`) is cut at its placeholders (`<...>`, `...`, quoted
//! names, numbers), and each literal part must be in kopf-core's sources, as one string or as
//! pieces that `format!` joins (a message made of parts). So a reworded log line in the
//! code fails this test until the chapter follows. Likewise, the command-line chapter names
//! only options that `kits/cli.rs` (and its submodules) has, and every `KOPF_RUN_*` variable it
//! reads.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the sources are readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// kopf-core's sources in one text, without backticks (which log lines use for names).
fn kopf_core() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kopf-core/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let mut text = String::new();
    for file in files {
        text.push_str(&std::fs::read_to_string(&file).expect("a source is readable"));
        text.push('\n');
    }
    text.replace('`', "")
}

/// The quoted lines of a page: its bold code spans.
fn quoted(page: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("**`") {
        let after = &rest[start + 3..];
        let Some(end) = after.find("`**") else { break };
        lines.push(after[..end].to_string());
        rest = &after[end + 3..];
    }
    lines
}

/// The literal parts of a quoted line: what is left between its placeholders.
fn literals(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    let cut = |current: &mut String, parts: &mut Vec<String>| {
        let part = current.trim().to_string();
        if !part.is_empty() {
            parts.push(part);
        }
        current.clear();
    };
    while let Some(ch) = chars.next() {
        match ch {
            '<' | '\'' | '"' => {
                let close = if ch == '<' { '>' } else { ch };
                for skipped in chars.by_ref() {
                    if skipped == close {
                        break;
                    }
                }
                cut(&mut current, &mut parts);
            }
            '.' if chars.peek() == Some(&'.') => {
                while chars.peek() == Some(&'.') {
                    chars.next();
                }
                cut(&mut current, &mut parts);
            }
            digit if digit.is_ascii_digit() => {
                while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                    chars.next();
                }
                cut(&mut current, &mut parts);
            }
            other => current.push(other),
        }
    }
    cut(&mut current, &mut parts);
    parts
}

/// Whether `part` is in `source`, whole or as pieces that `format!` joins: each piece but the
/// last must end where a placeholder (`{`) or a string (`"`) follows it in the source, and
/// each piece but the first must start where one (`}`) or a string (`"`) ends; the longest
/// such prefix is taken first, and a piece of words has four characters at least. So a
/// reworded line is not put together from words found
/// anywhere.
fn found(part: &str, source: &str) -> bool {
    if source.contains(part) {
        return true;
    }
    let mut rest = part;
    let mut first = true;
    while !rest.is_empty() {
        let fits = |end: usize| {
            let piece = &rest[..end];
            // A piece of words is a phrase, not a letter that happens to sit by a quote.
            if piece.chars().any(char::is_alphanumeric) && piece.trim().len() < 4 {
                return false;
            }
            let befores: &[&str] = if first { &[""] } else { &["}", "\""] };
            let afters: &[&str] = if end == rest.len() {
                &[""]
            } else {
                &["{", "\""]
            };
            befores.iter().any(|before| {
                afters
                    .iter()
                    .any(|after| source.contains(&format!("{before}{piece}{after}")))
            })
        };
        let Some(end) = (1..=rest.len())
            .rev()
            .filter(|&end| rest.is_char_boundary(end))
            .find(|&end| fits(end))
        else {
            return false;
        };
        rest = &rest[end..];
        first = false;
    }
    true
}

#[test]
fn every_quoted_log_line_is_in_the_code() {
    let source = kopf_core();
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/troubleshooting.md"),
    )
    .expect("the troubleshooting chapter");
    let lines = quoted(&page);
    assert!(lines.len() > 50, "the chapter quotes its log lines");
    let mut missing = Vec::new();
    for line in &lines {
        for part in literals(line) {
            if part.len() >= 4 && !found(&part, &source) {
                missing.push(format!("{part:?} (in {line:?})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "quoted but not in kopf-core's sources:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_finds_a_line_the_code_does_not_print() {
    let source = "format!(\"{label} '{id}' failed temporarily: {message}\")";
    let line = "Handler 'create_fn' failed temporarily: <message>";
    assert_eq!(literals(line), ["Handler", "failed temporarily:"]);
    assert!(found("failed temporarily:", source));
    assert!(!found("failed for a while:", source));
    assert!(!found("Handler", source), "not in this source");
    // Words found elsewhere do not make a line.
    let source = "\"Default peering object is not found\"; \"the key is missing\"";
    assert!(!found("Default peering object is missing", source));
    let source = "format!(\"aborting the {work} {when}\"); format!(\"handler {} on {}\")";
    assert!(found("aborting the handler", source));
}

/// The words of `text` that look like long options (`--name`) or Kopf's variables
/// (`KOPF_RUN_NAME`).
fn options_and_variables(text: &str) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    let chars: Vec<char> = text.chars().collect();
    let word = |start: usize| -> String {
        chars[start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '-' || **c == '_')
            .collect()
    };
    for i in 0..chars.len() {
        let boundary = i == 0 || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '-');
        if boundary && chars[i..].starts_with(&['-', '-']) {
            let option = word(i);
            if option.len() > 3 {
                found.insert(option);
            }
        }
        let prefix: Vec<char> = "KOPF_RUN_".chars().collect();
        if boundary && chars[i..].starts_with(&prefix) {
            found.insert(word(i));
        }
    }
    found
}

#[test]
fn the_command_line_chapter_names_every_option_and_only_real_ones() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chapter = std::fs::read_to_string(docs.join("src/cli.md")).expect("the chapter");
    // The command line's module: the commands, the options as clap parses them, and the
    // options completed from the environment.
    let cli = ["cli.rs", "cli/arguments.rs", "cli/options.rs"]
        .iter()
        .map(|file| {
            let path = docs.join("../kopf-core/src/kits").join(file);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect::<Vec<_>>()
        .join("\n");
    // clap derives the long options from the fields' names: `service_account` is
    // `--service-account`; explicit ones are written out.
    let code = cli.replace('_', "-");
    let documented = options_and_variables(&chapter);
    let mut unknown = Vec::new();
    for name in &documented {
        let as_code = name.trim_start_matches("--").replace('_', "-");
        if !code.contains(&as_code) {
            unknown.push(name.clone());
        }
    }
    assert!(
        unknown.is_empty(),
        "the chapter names what cli.rs lacks: {unknown:?}"
    );
    let mut undocumented = Vec::new();
    for variable in options_and_variables(&cli)
        .into_iter()
        // The bare prefix is how the names are built (`resolve_as("KOPF_RUN_", ..)`), not one.
        .filter(|v| v.starts_with("KOPF_RUN_") && v != "KOPF_RUN_")
    {
        if !documented.contains(&variable) {
            undocumented.push(variable);
        }
    }
    assert!(
        undocumented.is_empty(),
        "cli.rs reads variables the chapter does not name: {undocumented:?}"
    );
}
