//! The picture: a table of processes (a bad page is a line saying what is
//! wrong with it), and a pane with the selected process's details: its
//! cores, upcall events, allocation, channels and the logical threads in
//! calls there.
//!
//! This file owns the layout and the order of the rows; it must not read
//! pages or the terminal (`scan`, `mod.rs`).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

use ferry::stats::ChannelKind;

use super::scan::{Entry, Process};

/// The order of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// By pid.
    Pid,
    /// Most CPU first.
    Cpu,
    /// Most calls per second first.
    Calls,
}

/// What the viewer chose.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// The selected row.
    pub selected: usize,
    /// The order.
    pub sort: SortBy,
}

/// `entries` in the chosen order; bad pages last, by name.
pub fn sorted(entries: &[Entry], sort: SortBy) -> Vec<&Entry> {
    let mut live: Vec<&Process> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Live(p) => Some(&**p),
            Entry::Bad { .. } => None,
        })
        .collect();
    match sort {
        SortBy::Pid => live.sort_by_key(|p| p.snap.pid),
        SortBy::Cpu => live.sort_by(|a, b| b.cpu().total_cmp(&a.cpu())),
        SortBy::Calls => live.sort_by(|a, b| b.calls_per_s().total_cmp(&a.calls_per_s())),
    }
    let mut out: Vec<&Entry> = Vec::with_capacity(entries.len());
    for p in live {
        out.extend(
            entries
                .iter()
                .find(|e| matches!(e, Entry::Live(q) if std::ptr::eq(&**q, p))),
        );
    }
    out.extend(entries.iter().filter(|e| matches!(e, Entry::Bad { .. })));
    out
}

fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn cores(p: &Process) -> String {
    let c: Vec<String> = p
        .snap
        .cores
        .iter()
        .map(|c| c.map_or_else(|| "*".into(), |c| c.to_string()))
        .collect();
    c.join(",")
}

fn allocation(p: &Process) -> String {
    match p.snap.allocation {
        None => "-".into(),
        Some(a) => format!("d{} c{} p{}", a.desired, a.cores, a.priority),
    }
}

const HEADER: [&str; 11] = [
    "PID", "COMMAND", "PROCS", "CORES", "RUN", "BLK", "KT", "UPC/s", "CALLS/s", "CPU", "ALLOC",
];

fn row(e: &Entry) -> Row<'static> {
    match e {
        Entry::Live(p) => {
            let s = &p.snap;
            let rates = p.rates.as_ref();
            Row::new(vec![
                Cell::from(s.pid.to_string()),
                Cell::from(s.command.clone()),
                Cell::from(format!("{}/{}", s.processors, s.max_processors)),
                Cell::from(cores(p)),
                Cell::from(s.runnable.to_string()),
                Cell::from(s.blocked.to_string()),
                Cell::from(s.kernel_threads.to_string()),
                Cell::from(rate(rates.map(|r| r.upcalls))),
                Cell::from(rate(rates.map(|_| p.calls_per_s()))),
                Cell::from(rate(rates.map(|r| r.cpu))),
                Cell::from(allocation(p)),
            ])
        }
        Entry::Bad { page, why } => Row::new(vec![
            Cell::from(page.clone()),
            Cell::from(format!("bad page: {why}")),
        ]),
    }
}

/// The detail lines of process `p`.
pub fn details(p: &Process) -> Vec<Line<'static>> {
    let s = &p.snap;
    let u = &s.upcalls;
    let rates = p.rates.as_ref();
    let mut lines = vec![
        Line::from(format!(
            "{} {}: {} of {} processors on cores [{}]; {} runnable, {} blocked; {} of {} kernel threads",
            s.pid,
            s.command,
            s.processors,
            s.max_processors,
            cores(p),
            s.runnable,
            s.blocked,
            s.kernel_threads,
            s.max_kernel_threads
        )),
        Line::from(format!(
            "upcalls: {} blocked, {} unblocked, {} preempted, {} added, {} removed ({}/s)",
            u.blocked,
            u.unblocked,
            u.preempted,
            u.processor_added,
            u.processor_removed,
            rate(rates.map(|r| r.upcalls))
        )),
        Line::from(match s.allocation {
            None => "allocation: not registered with a daemon".to_owned(),
            Some(a) => format!(
                "allocation: desired {}, {} cores granted, priority {}, credit {:.3}",
                a.desired,
                a.cores,
                a.priority,
                a.credit as f64 / 1000.0
            ),
        }),
        Line::from(format!(
            "channels: {}",
            s.channels.len() as u64 + s.channels_dropped
        )),
    ];
    for (i, c) in s.channels.iter().enumerate() {
        let (kind, peers) = match c.kind {
            ChannelKind::Server => ("serves", format!("{} clients", c.peers)),
            ChannelKind::Client => ("calls ", format!("server pid {}", c.peers)),
        };
        lines.push(Line::from(format!(
            "  {kind} {:<20} {peers:<16} {} calls ({}/s), {:.3} ms CPU",
            c.name,
            c.calls,
            rate(rates.and_then(|r| r.calls.get(i).copied())),
            c.cpu_ns as f64 / 1e6
        )));
    }
    if s.channels_dropped > 0 {
        lines.push(Line::from(format!(
            "  and {} more (the page lists {})",
            s.channels_dropped,
            s.channels.len()
        )));
    }
    lines.push(Line::from(format!(
        "logical threads in calls here: {}",
        s.logical.len() as u64 + s.logical_dropped
    )));
    for l in &s.logical {
        let chain: Vec<String> = l.chain.iter().map(u32::to_string).collect();
        lines.push(Line::from(format!(
            "  {}:{} {:?}, {:.3} ms CPU before this call, chain {}",
            l.origin,
            l.thread,
            l.priority,
            l.cpu_ns as f64 / 1e6,
            chain.join(" -> ")
        )));
    }
    if s.logical_dropped > 0 {
        lines.push(Line::from(format!(
            "  and {} more (the page lists {})",
            s.logical_dropped,
            s.logical.len()
        )));
    }
    lines
}

/// Draws the whole view of `entries` (already in order) into `f`.
pub fn draw(f: &mut Frame<'_>, entries: &[&Entry], ui: &Ui) {
    let [title, table, detail] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(12),
    ])
    .areas(f.area());
    let sort = match ui.sort {
        SortBy::Pid => "pid",
        SortBy::Cpu => "cpu",
        SortBy::Calls => "calls",
    };
    f.render_widget(
        Paragraph::new(format!(
            "ferry top: {} pages, by {sort}  (q quit, arrows select, c cpu, n calls, p pid)",
            entries.len()
        )),
        title,
    );
    let widths = [
        Constraint::Length(8),
        Constraint::Min(12),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(5),
        Constraint::Length(12),
    ];
    let t = Table::new(entries.iter().map(|e| row(e)), widths)
        .header(Row::new(HEADER).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::TOP))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::new().with_selected((!entries.is_empty()).then_some(ui.selected));
    f.render_stateful_widget(t, table, &mut state);
    let lines = match entries.get(ui.selected) {
        Some(Entry::Live(p)) => details(p),
        Some(Entry::Bad { page, why }) => vec![Line::from(format!("page {page}: {why}"))],
        None => vec![Line::from("no ferry process publishes a page")],
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::TOP).title("selected")),
        detail,
    );
}

#[cfg(test)]
mod tests {
    use ferry::stats::{Channel, LogicalThread, Snapshot};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::super::scan::Rates;
    use super::*;

    fn process(pid: u32, cpu: f64, calls: f64) -> Entry {
        Entry::Live(Box::new(Process {
            snap: Snapshot {
                pid,
                command: format!("job{pid}"),
                processors: 2,
                max_processors: 4,
                cores: vec![Some(0), None],
                runnable: 3,
                blocked: 1,
                kernel_threads: 7,
                channels: vec![Channel {
                    kind: ChannelKind::Server,
                    name: "calc".into(),
                    peers: 2,
                    calls: 40,
                    cpu_ns: 2_000_000,
                }],
                logical: vec![LogicalThread {
                    origin: 9,
                    thread: 4,
                    priority: ferry::thread::Priority::High,
                    cpu_ns: 1_000_000,
                    chain: vec![9, 8, pid],
                }],
                channels_dropped: 4,
                ..Snapshot::default()
            },
            cpu_ticks: Some(0),
            rates: Some(Rates {
                cpu,
                upcalls: 5.0,
                calls: vec![calls],
            }),
        }))
    }

    /// The text of the terminal's lines.
    fn render(entries: &[Entry], ui: Ui) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(110, 24)).unwrap();
        let rows = sorted(entries, ui.sort);
        t.draw(|f| draw(f, &rows, &ui)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect()
    }

    #[test]
    fn the_table_lists_processes_in_order_with_bad_pages_last() {
        let entries = [
            process(100, 0.5, 10.0),
            Entry::Bad {
                page: "555".into(),
                why: "not a stats page".into(),
            },
            process(200, 1.5, 2.0),
        ];
        let lines = render(
            &entries,
            Ui {
                selected: 0,
                sort: SortBy::Cpu,
            },
        );
        let text = lines.join("\n");
        assert!(lines[0].starts_with("ferry top: 3 pages, by cpu"), "{text}");
        assert!(lines[2].starts_with("PID      COMMAND"), "{text}");
        let at = |needle: &str| {
            lines
                .iter()
                .position(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{needle:?} missing:\n{text}"))
        };
        // By CPU: 200 (1.5 cores) first, then 100; the bad page last.
        assert!(at("job200") < at("job100") && at("job100") < at("bad page: not a stats page"));
        let row = &lines[at("job200")];
        for cell in ["2/4", "0,*", "5.0", "2.0", "1.5"] {
            assert!(row.contains(cell), "{cell:?} not in {row:?}");
        }
        // The selected (first) row's details.
        assert!(
            text.contains("200 job200: 2 of 4 processors on cores [0,*]; 3 runnable, 1 blocked")
        );
        assert!(text.contains("serves calc"), "{text}");
        assert!(text.contains("channels: 5"), "{text}");
        assert!(text.contains("and 4 more (the page lists 1)"), "{text}");
        assert!(text.contains("chain 9 -> 8 -> 200"), "{text}");
        assert!(text.contains("allocation: not registered"), "{text}");

        // By calls: 100 (10/s) first.
        let lines = render(
            &entries,
            Ui {
                selected: 0,
                sort: SortBy::Calls,
            },
        );
        let first = lines.iter().position(|l| l.contains("job100")).unwrap();
        let second = lines.iter().position(|l| l.contains("job200")).unwrap();
        assert!(first < second);
    }

    #[test]
    fn an_empty_directory_says_so() {
        let lines = render(
            &[],
            Ui {
                selected: 0,
                sort: SortBy::Pid,
            },
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("no ferry process publishes a page"))
        );
    }
}
