//! The book's links: every relative link points to a file of the book, every `#anchor` to a
//! heading of its page (mdBook's rule for heading ids), every image exists, every chapter is in
//! `SUMMARY.md` (and doctested by the crate), and external links are well-formed. No network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The book's source folder.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every file of the book, by its path under `src/`.
fn book_files(src: &Path) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    files(src, "", &mut all);
    all
}

/// Every file under `dir`, as paths relative to it with `/` separators.
fn files(dir: &Path, prefix: &str, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("the book's folder is readable") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        if entry.file_type().expect("a file type").is_dir() {
            files(&entry.path(), &format!("{path}/"), found);
        } else {
            found.insert(path);
        }
    }
}

/// The text of a page without its fenced code blocks and inline code, line by line.
fn prose(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            lines.push(String::new());
            continue;
        }
        if fenced {
            lines.push(String::new());
            continue;
        }
        let mut kept = String::new();
        let mut code = false;
        for ch in line.chars() {
            if ch == '`' {
                code = !code;
            } else if !code {
                kept.push(ch);
            }
        }
        lines.push(kept);
    }
    lines
}

/// mdBook's id of a heading: its text as rendered, lowercased, whitespace to `-`, and every
/// character but letters, digits, `_` and `-` removed.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link shows its text only: `[text](target)` becomes `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter(|ch| *ch != '`' && *ch != '*')
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch.to_ascii_lowercase())
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of a page's headings, with mdBook's `-1`, `-2` suffixes for repeated ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let id = heading_id(line.trim_start_matches('#').trim());
        let count = seen.entry(id.clone()).or_default();
        ids.insert(if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    ids
}

/// The targets of a page's links and images: `(line number, target)`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text).iter().enumerate() {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((number + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// What is wrong with the links of `page` (a path relative to the book's source), given the
/// book's files and each page's anchors.
fn problems(
    page: &str,
    text: &str,
    files: &BTreeSet<String>,
    pages: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let folder = page.rsplit_once('/').map_or("", |(folder, _)| folder);
    for (line, target) in links(text) {
        let at = format!("{page}:{line}: {target:?}");
        if target.is_empty() {
            problems.push(format!("{at}: an empty link"));
            continue;
        }
        if let Some(rest) = target
            .strip_prefix("https://")
            .or_else(|| target.strip_prefix("http://"))
        {
            let host = rest.split('/').next().unwrap_or("");
            if host.is_empty() || !host.contains('.') || rest.contains(' ') {
                problems.push(format!("{at}: a malformed URL"));
            }
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            problems.push(format!("{at}: only http(s) links leave the book"));
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() {
            page.to_string()
        } else {
            let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
            let mut outside = false;
            for part in path.split('/') {
                match part {
                    "." | "" => {}
                    ".." => outside |= parts.pop().is_none(),
                    part => parts.push(part),
                }
            }
            if outside {
                problems.push(format!("{at}: points outside the book"));
                continue;
            }
            parts.join("/")
        };
        if !files.contains(&file) {
            problems.push(format!("{at}: no such file in the book"));
            continue;
        }
        if let Some(anchor) = anchor {
            match pages.get(&file) {
                Some(ids) if ids.contains(anchor) => {}
                Some(_) => problems.push(format!("{at}: no such heading in {file}")),
                None => problems.push(format!("{at}: an anchor into a file that is not a page")),
            }
        }
    }
    problems
}

/// The chapter files that `SUMMARY.md` lists, in order.
fn summary_chapters(summary: &str) -> Vec<String> {
    links(summary)
        .into_iter()
        .map(|(_, target)| target)
        .collect()
}

#[test]
fn every_link_anchor_and_image_of_the_book_resolves() {
    let src = src();
    let all = book_files(&src);
    let mut pages = BTreeMap::new();
    let mut texts = BTreeMap::new();
    for file in all.iter().filter(|f| f.ends_with(".md")) {
        let text = std::fs::read_to_string(src.join(file)).expect("a page is readable");
        pages.insert(file.clone(), anchors(&text));
        texts.insert(file.clone(), text);
    }
    let mut found = Vec::new();
    for (page, text) in &texts {
        found.extend(problems(page, text, &all, &pages));
    }
    assert!(found.is_empty(), "broken links:\n{}", found.join("\n"));
}

#[test]
fn every_chapter_is_in_the_summary_and_doctested() {
    let src = src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed = summary_chapters(&summary);
    let all = book_files(&src);
    let on_disk: BTreeSet<String> = all
        .into_iter()
        .filter(|f| f.ends_with(".md") && f != "SUMMARY.md")
        .collect();
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        on_disk, listed_set,
        "the chapters on disk and those SUMMARY.md lists differ"
    );
    let doctested: Vec<String> = kopf_docs::CHAPTERS.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        listed, doctested,
        "lib.rs must include every chapter of SUMMARY.md, in its order"
    );
}

#[test]
fn every_image_is_used_and_is_svg_or_png() {
    let src = src();
    let all = book_files(&src);
    let mut used = BTreeSet::new();
    for page in all.iter().filter(|f| f.ends_with(".md")) {
        let text = std::fs::read_to_string(src.join(page)).expect("a page is readable");
        for (_, target) in links(&text) {
            if let Some(image) = target.strip_prefix("images/") {
                used.insert(format!("images/{image}"));
            }
        }
    }
    for image in all.iter().filter(|f| f.starts_with("images/")) {
        assert!(
            image.ends_with(".svg") || image.ends_with(".png"),
            "{image}: images are SVG or PNG"
        );
        assert!(used.contains(image), "{image} is not used by any page");
    }
}

#[test]
fn the_checker_finds_broken_links() {
    let files: BTreeSet<String> = ["a.md", "b.md", "images/x.svg"]
        .iter()
        .map(|f| f.to_string())
        .collect();
    let b = "# Title\n\n## Some `code` and [a link](a.md), too!\n\n## Title\n";
    let mut pages = BTreeMap::new();
    pages.insert("a.md".to_string(), anchors(""));
    pages.insert("b.md".to_string(), anchors(b));
    assert!(pages["b.md"].contains("some-code-and-a-link-too"));
    assert!(pages["b.md"].contains("title-1"));
    let good = "[b](b.md#title) [x](b.md#some-code-and-a-link-too) ![i](images/x.svg) \
                [web](https://example.com/x) [self](#nothing-here-is-checked-below) `[no](c.md)`\n\
                ```\n[in code](missing.md)\n```\n";
    let found = problems("a.md", good, &files, &pages);
    assert_eq!(found.len(), 1, "{found:?}"); // only the anchor into a.md itself
    let bad =
        "[c](c.md) [b](b.md#nope) ![i](images/y.svg) [web](https://nohost) [up](../README.md)";
    let found = problems("a.md", bad, &files, &pages);
    assert_eq!(found.len(), 5, "{found:?}");
}

#[test]
fn the_readme_links_into_the_book_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace's root")
        .to_path_buf();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let src = src();
    let mut found = Vec::new();
    for (line, target) in links(&readme) {
        if target.starts_with("http://") || target.starts_with("https://") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let file = root.join(path);
        if !file.exists() {
            found.push(format!("README.md:{line}: {target:?}: no such file"));
            continue;
        }
        if let (Some(anchor), Some(page)) = (anchor, path.strip_prefix("docs/src/")) {
            let text = std::fs::read_to_string(src.join(page)).expect("a page is readable");
            if !anchors(&text).contains(anchor) {
                found.push(format!("README.md:{line}: {target:?}: no such heading"));
            }
        }
    }
    assert!(found.is_empty(), "broken links:\n{}", found.join("\n"));
}
