//! `ferry top`: a live view of every ferry process of the user, read from
//! the stats pages their runtimes publish in the runtime directory
//! (`ferry::stats`), so it needs no daemon and asks no process anything.
//!
//! This module owns the command: its options, the terminal (raw mode, the
//! alternate screen, keys) and the loop of looks; `scan` finds and reads the
//! pages, `view` draws, `json` writes `--once --json`. It must not write to
//! any page; the only change it makes in the directory is removing the page
//! of a process that is gone.

mod json;
mod scan;
mod view;

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind};

use scan::{Entry, History};
use view::{SortBy, Ui};

/// What `ferry top --help` says beyond its options.
pub const LONG_ABOUT: &str = "A live view of every ferry process of the user: processors and \
the cores they are pinned on, runnable and blocked threads, kernel threads, upcall events \
per second, the allocation daemon's grant, cross-process channels with calls per second, \
and the logical threads in calls here with their chains and the CPU charged to them.

Each runtime publishes its figures in a page of the runtime directory (<dir>/top/<pid>, \
about every 100 ms while busy, unless FERRY_STATS=off); ferry top reads them without \
asking any process, removes the pages of processes that are gone, and reports a page it \
cannot read on a line of its own.

Keys: q or Esc quit; Up/Down select; c sort by CPU, n by calls per second, p by pid.";

/// Options of `ferry top`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one snapshot and exit (two looks --interval apart, for the rates)
    #[arg(long)]
    once: bool,
    /// With --once: print it as one JSON document (an array, one object per page)
    #[arg(long, requires = "once")]
    json: bool,
    /// The runtime directory to read (default: the user's, $XDG_RUNTIME_DIR/ferry)
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Milliseconds between looks
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    interval: u64,
}

/// Runs `ferry top`.
pub fn run(args: &Args) -> io::Result<()> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => ferry::rpc::RuntimeDir::user()
            .map_err(io::Error::other)?
            .path()
            .to_owned(),
    };
    let top = dir.join(ferry::stats::TOP_DIR);
    let interval = Duration::from_millis(args.interval);
    let mut history = History::default();
    if args.once {
        scan::scan(&top, &mut history);
        std::thread::sleep(interval);
        let entries = scan::scan(&top, &mut history);
        let mut out = io::stdout().lock();
        if args.json {
            serde_json::to_writer(&mut out, &json::document(&entries))?;
            writeln!(out)?;
        } else {
            print_once(&mut out, &entries)?;
        }
        return out.flush();
    }
    live(&top, interval, &mut history)
}

/// `--once` without `--json`: the table and every process's details, as
/// plain lines.
fn print_once(out: &mut impl Write, entries: &[Entry]) -> io::Result<()> {
    for e in view::sorted(entries, SortBy::Pid) {
        match e {
            Entry::Live(p) => {
                for l in view::details(p) {
                    writeln!(out, "{l}")?;
                }
                writeln!(out)?;
            }
            Entry::Bad { page, why } => writeln!(out, "page {page}: bad page: {why}\n")?,
        }
    }
    Ok(())
}

/// The live view, until q.
fn live(top: &std::path::Path, interval: Duration, history: &mut History) -> io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| {
        let mut ui = Ui {
            selected: 0,
            sort: SortBy::Cpu,
        };
        let mut entries = scan::scan(top, history);
        let mut next = Instant::now() + interval;
        loop {
            let rows = view::sorted(&entries, ui.sort);
            ui.selected = ui.selected.min(rows.len().saturating_sub(1));
            terminal.draw(|f| view::draw(f, &rows, &ui))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(k) = event::read()?
                    && k.kind == KeyEventKind::Press
                {
                    match k.code {
                        KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                        KeyCode::Up => ui.selected = ui.selected.saturating_sub(1),
                        KeyCode::Down => ui.selected += 1,
                        KeyCode::Char('c') => ui.sort = SortBy::Cpu,
                        KeyCode::Char('n') => ui.sort = SortBy::Calls,
                        KeyCode::Char('p') => ui.sort = SortBy::Pid,
                        _ => {}
                    }
                }
                continue;
            }
            entries = scan::scan(top, history);
            next = Instant::now() + interval;
        }
    })();
    ratatui::restore();
    result
}
