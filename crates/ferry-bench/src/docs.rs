//! `--write-docs`: an experiment's `docs/results/<doc>.md` regenerated from
//! the run that just finished, so the page cannot drift from the bench.
//!
//! A page is its template (`crates/ferry-bench/templates/<doc>.md`: what the
//! experiment measures, what the numbers mean, the seed paper's table
//! beside them, the rejected designs) with three markers filled in:
//! `{{results}}` (the tables as the run printed them, in a code block), `{{command}}` (the
//! command that reproduces them) and `{{machine}}` (where and when they
//! were taken). This module owns the filling and the writing; the text of
//! the pages is the templates'.

use std::path::{Path, PathBuf};

use crate::report::{Error, Report};

/// The template of each page, by `doc` name.
const TEMPLATES: [(&str, &str); 12] = [
    ("queues", include_str!("../templates/queues.md")),
    ("switch", include_str!("../templates/switch.md")),
    ("threads", include_str!("../templates/threads.md")),
    ("capi", include_str!("../templates/capi.md")),
    ("upcalls", include_str!("../templates/upcalls.md")),
    ("urpc", include_str!("../templates/urpc.md")),
    ("scale", include_str!("../templates/scale.md")),
    ("net", include_str!("../templates/net.md")),
    ("migrating", include_str!("../templates/migrating.md")),
    ("streams", include_str!("../templates/streams.md")),
    ("gravity", include_str!("../templates/gravity.md")),
    ("grpc", include_str!("../templates/grpc.md")),
];

/// The workspace root (where `docs/` lives).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map_or_else(|| manifest.join("../.."), Path::to_path_buf)
}

/// `docs/results/` under the workspace root.
pub fn results_dir() -> PathBuf {
    workspace_root().join("docs/results")
}

/// The command that reproduces this run: this invocation's arguments,
/// without `--write-docs`, behind `cargo run`.
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--write-docs")
        .collect();
    format!("cargo run --release -p ferry-bench -- {}", args.join(" "))
}

/// The page of `doc` with its markers filled in.
pub fn fill(doc: &str, results: &str, command: &str, machine: &str) -> Result<String, Error> {
    let template = TEMPLATES
        .iter()
        .find(|(name, _)| *name == doc)
        .map(|(_, t)| *t)
        .ok_or_else(|| Error(format!("no page template for {doc}")))?;
    Ok(template
        .replace("{{results}}", &format!("```\n{}\n```", results.trim_end()))
        .replace("{{command}}", command)
        .replace("{{machine}}", machine))
}

/// Writes `report`'s page; returns where.
pub fn write(report: &Report, machine: &str) -> Result<PathBuf, Error> {
    let page = fill(report.doc, &report.text(), &command_line(), machine)?;
    let path = results_dir().join(format!("{}.md", report.doc));
    std::fs::write(&path, page).map_err(|e| Error(format!("writing {}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_has_every_marker_once() {
        for (name, t) in TEMPLATES {
            for marker in ["{{results}}", "{{command}}", "{{machine}}"] {
                assert_eq!(t.matches(marker).count(), 1, "{name}: {marker}");
            }
        }
    }

    #[test]
    fn fill_replaces_the_markers() {
        let page = fill("queues", "table\n", "cmd", "box").unwrap();
        assert!(!page.contains("{{"), "{page}");
        assert!(page.contains("table") && page.contains("cmd") && page.contains("box"));
        assert!(fill("nothing", "", "", "").is_err());
    }
}
