//! The one plotting helper: line charts with a logarithmic y axis, drawn
//! with plotters into a PNG, with text when a system TrueType font is
//! found and without any (axes and a grey line per power of ten) when not.
//!
//! This module owns drawing only; what is plotted and where the file goes
//! is the experiment's.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Line and point colour.
    pub color: RGBColor,
    /// The colour's name, for a caption when no font is found.
    pub color_name: &'static str,
    /// The points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// The text of a chart.
pub struct Labels<'a> {
    /// Caption above the chart.
    pub title: &'a str,
    /// X axis description.
    pub x: &'a str,
    /// Y axis description.
    pub y: &'a str,
    /// How a y tick is written.
    pub y_format: &'a dyn Fn(&f64) -> String,
}

/// Registers a system TrueType font as plotters' `sans-serif`, once; whether
/// one was found.
fn font_available() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        const CANDIDATES: [&str; 5] = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
        ];
        CANDIDATES.iter().any(|path| {
            std::fs::read(path).is_ok_and(|bytes| {
                // plotters keeps fonts for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    })
}

/// A rate for an axis label: `120k`, `5.0M`.
pub fn fmt_rate(y: &f64) -> String {
    let y = *y;
    if y >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y >= 1e3 {
        format!("{:.0}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

/// Draws `series` into `path` with [`log_y_lines`] and says where, as a
/// line for a report's notes: `axes` describes the chart drawn with text;
/// without a font the line describes it in words (`no_font_axes`) and
/// names each series' colour.
pub fn caption(
    path: &Path,
    labels: &Labels<'_>,
    series: &[Series],
    axes: &str,
    no_font_axes: &str,
) -> String {
    if series.is_empty() {
        return "plot: not drawn (no points)\n".to_owned();
    }
    let shown = path
        .strip_prefix(crate::docs::workspace_root())
        .unwrap_or(path)
        .display();
    match log_y_lines(path, labels, series) {
        Ok(true) => format!("plot: {shown} ({axes})\n"),
        Ok(false) => {
            let key: Vec<String> = series
                .iter()
                .map(|s| format!("{} = {}", s.color_name, s.name))
                .collect();
            format!(
                "plot: {shown} drawn WITHOUT text (no font found): {no_font_axes}, {}\n",
                key.join(", ")
            )
        }
        Err(e) => format!("plot: not drawn: {e}\n"),
    }
}

/// Draws `series` into `path` (x linear from 0, y logarithmic); `Ok(true)`
/// if drawn with text, `Ok(false)` if without (no font found).
pub fn log_y_lines(path: &Path, labels: &Labels<'_>, series: &[Series]) -> Result<bool, String> {
    let with_text = font_available();
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    }
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(x, _)| x))
        .fold(1.0, f64::max);
    let ys = || series.iter().flat_map(|s| s.points.iter().map(|&(_, y)| y));
    let y_max = ys().fold(1.0, f64::max);
    let y_min = ys().filter(|&y| y > 0.0).fold(y_max, f64::min);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if with_text {
        builder
            .caption(labels.title, ("sans-serif", 20))
            .x_label_area_size(45)
            .y_label_area_size(80);
    } else {
        builder.x_label_area_size(10).y_label_area_size(10);
    }
    let mut chart = builder
        .build_cartesian_2d(0.0..x_max * 1.05, (y_min / 2.0..y_max * 2.0).log_scale())
        .map_err(|e| err(&e))?;
    if with_text {
        chart
            .configure_mesh()
            .x_desc(labels.x)
            .y_desc(labels.y)
            .y_label_formatter(labels.y_format)
            .draw()
            .map_err(|e| err(&e))?;
    } else {
        // plotters' mesh needs a font even without labels: draw the axes
        // and a grey line at every power of ten by hand.
        let (x0, x1) = (0.0, x_max * 1.05);
        let (y0, y1) = (y_min / 2.0, y_max * 2.0);
        let mut decade = 10f64.powf(y0.log10().ceil());
        while decade < y1 {
            chart
                .draw_series(LineSeries::new(
                    [(x0, decade), (x1, decade)],
                    RGBColor(190, 190, 190),
                ))
                .map_err(|e| err(&e))?;
            decade *= 10.0;
        }
        chart
            .draw_series(LineSeries::new([(x0, y1), (x0, y0), (x1, y0)], BLACK))
            .map_err(|e| err(&e))?;
    }
    for s in series {
        let color = s.color;
        let line = chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        if with_text {
            line.label(s.name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(&e))?;
    }
    if with_text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(with_text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_abbreviated() {
        assert_eq!(fmt_rate(&5_000_000.0), "5.0M");
        assert_eq!(fmt_rate(&120_400.0), "120k");
        assert_eq!(fmt_rate(&999.0), "999");
    }
}
