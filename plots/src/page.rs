//! The page's pieces: parts of HTML drawn on their own, with holes for the
//! numbers that depend on what comes before them on the page (the job's,
//! the figures'), and the page they are put together into, which fills the
//! holes in and gives the parts' chart files their names.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::chart::{Chart, Error, to_svg};
use crate::timeline::{StepKernels, explorable_html, static_timeline};

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Inline SVG: no XML prologue, no namespace URL (HTML5 knows `<svg>`), scaled to the page.
fn inline_svg(chart: &impl Chart) -> Result<String, Error> {
    let svg = to_svg(chart)?;
    let svg = svg.trim_start();
    let svg = if svg.starts_with("<?xml") { svg.split_once("?>").map_or(svg, |x| x.1) } else { svg };
    Ok(svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1).replacen("<svg ", "<svg class=\"chart\" ", 1))
}

/// A number that depends on what comes before a part on the page: parts are
/// drawn on their own (a job's measured part before the diff above it, which
/// needs the next job), so they leave a hole for it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hole {
    /// The job's number (1 for the first).
    Job,
    /// The page-wide number of the part's figure with this index.
    Figure(usize),
}

/// A figure of a part: the name of its files, and (with a chart directory)
/// its files under provisional names until the page numbers them.
#[derive(Debug)]
struct Figure {
    slug: String,
    files: Vec<PathBuf>,
}

/// A piece of the page drawn on its own: HTML with holes (at byte offsets,
/// ascending) for the numbers that depend on what comes before it.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) html: String,
    /// The HTML deflated while the part waits for its page ([`Part::hold`]).
    held: Option<Vec<u8>>,
    holes: Vec<(usize, Hole)>,
    figures: Vec<Figure>,
    png_dir: Option<PathBuf>,
}

impl Drop for Part {
    /// A part that never made it onto a page (an error on the way) leaves no provisional files.
    fn drop(&mut self) {
        for p in self.figures.iter().flat_map(|f| &f.files) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Part {
    pub(crate) fn new(png_dir: Option<&Path>) -> Part {
        Part { html: String::new(), held: None, holes: Vec::new(), figures: Vec::new(), png_dir: png_dir.map(Path::to_path_buf) }
    }

    /// Keeps the drawn HTML deflated until the page takes it: a job's part
    /// waits through the job's replay (the peak of a report's memory) and
    /// the jobs after it, and its charts' SVG deflates about 13-fold. Nothing
    /// is drawn into a held part.
    pub(crate) fn hold(&mut self) {
        use std::io::Write as _;
        if self.held.is_some() {
            return;
        }
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        // Into memory: only an allocation failure could stop it, and then the part stays as drawn.
        if z.write_all(self.html.as_bytes()).is_ok()
            && let Ok(mut held) = z.finish()
        {
            held.shrink_to_fit();
            self.held = Some(held);
            self.html = String::new();
        }
    }

    /// The drawn HTML, inflated when held.
    fn take_html(&mut self) -> Result<String, Error> {
        let Some(held) = self.held.take() else { return Ok(std::mem::take(&mut self.html)) };
        debug_assert!(self.html.is_empty(), "drawn into a held part");
        let mut html = String::new();
        std::io::Read::read_to_string(&mut flate2::read::DeflateDecoder::new(held.as_slice()), &mut html)
            .map_err(|cause| Error::Held { cause })?;
        Ok(html)
    }

    /// Where the part's charts also go as files.
    pub(crate) fn png_dir(&self) -> Option<&Path> {
        self.png_dir.as_deref()
    }

    pub(crate) fn hole(&mut self, hole: Hole) {
        debug_assert!(self.held.is_none(), "drawing into a held part");
        self.holes.push((self.html.len(), hole));
    }

    /// A new figure named `slug`; `write` draws its chart files (given a
    /// provisional stem) when the part has a chart directory.
    fn add_figure(&mut self, slug: String, write: impl FnOnce(&Path) -> Result<Vec<PathBuf>, Error>) -> Result<Hole, Error> {
        let mut files = Vec::new();
        if let Some(dir) = &self.png_dir {
            // Unique in the directory while the run lasts; hidden.
            static DRAWN: AtomicUsize = AtomicUsize::new(0);
            files = write(&dir.join(format!(".tracecast-{}-{}", std::process::id(), DRAWN.fetch_add(1, Ordering::Relaxed))))?;
        }
        self.figures.push(Figure { slug, files });
        Ok(Hole::Figure(self.figures.len() - 1))
    }

    pub(crate) fn figure(&mut self, title: &str, chart: &impl Chart, note: Option<&str>) -> Result<(), Error> {
        // fig03-gpu-time-by-rank: numbered in page order, named after the title.
        let slug: String = title
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect::<String>()
            .split('-')
            .filter(|w| !w.is_empty())
            .take(6)
            .collect::<Vec<_>>()
            .join("-");
        let number = self.add_figure(slug, |stem| crate::chart::write_chart(chart, stem))?;
        self.html.push_str("<figure id=\"fig");
        self.hole(number);
        let _ = write!(self.html, "\">{}<figcaption>{}", inline_svg(chart)?, esc(title));
        if let Some(n) = note {
            let _ = write!(self.html, " <span class=\"note\">{}</span>", esc(n));
        }
        self.html.push_str("</figcaption></figure>\n");
        Ok(())
    }

    /// The step's kernels as the page's explorable timeline; `--png` still
    /// gets the picture.
    pub(crate) fn explorable_timeline(&mut self, k: &StepKernels, note: &str) -> Result<(), Error> {
        let number = self.add_figure("gpu-timeline".into(), |stem| crate::chart::write_chart(&static_timeline(k), stem))?;
        self.html.push_str("<figure id=\"fig");
        self.hole(number);
        let _ = writeln!(
            self.html,
            "\">{}<figcaption>{} <span class=\"note\">{}</span></figcaption></figure>",
            explorable_html(k),
            esc(&k.title),
            esc(note)
        );
        Ok(())
    }

    /// A sortable table; a cell of more than 80 characters is taken for a kernel name and
    /// shortened to the part that tells it apart, the whole on hover.
    pub(crate) fn table(&mut self, caption: &str, head: &[&str], rows: &[Vec<String>]) {
        self.table_of(caption, head, rows, true);
    }

    /// [`Part::table`] whose cells are words, kept whole (a rule's description shortened as a
    /// kernel name read as its last word: "stack", "other").
    pub(crate) fn table_of_words(&mut self, caption: &str, head: &[&str], rows: &[Vec<String>]) {
        self.table_of(caption, head, rows, false);
    }

    fn table_of(&mut self, caption: &str, head: &[&str], rows: &[Vec<String>], shorten_names: bool) {
        if rows.len() > 5 {
            let _ = write!(
                self.html,
                "<input type=\"search\" class=\"filter\" placeholder=\"filter: {}\" aria-label=\"filter {}\">",
                esc(caption),
                esc(caption)
            );
        }
        let _ = write!(self.html, "<table class=\"sortable\"><caption>{}</caption><thead><tr>", esc(caption));
        for h in head {
            let _ = write!(self.html, "<th>{}</th>", esc(h));
        }
        self.html.push_str("</tr></thead><tbody>");
        // Long names shortened column by column, so that two of one column stay apart.
        let long = |c: &String| shorten_names && c.chars().count() > 80;
        let mut short: std::collections::HashMap<(usize, &str), String> = std::collections::HashMap::new();
        for col in 0..head.len() {
            let names: Vec<&str> = rows.iter().filter_map(|r| r.get(col)).filter(|c| long(c)).map(String::as_str).collect();
            for (n, s) in names.iter().zip(tracecast_ingest::analysis::short_kernel_names(&names, 80)) {
                short.insert((col, n), s);
            }
        }
        for r in rows {
            self.html.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let class = if i > 0 && c.trim_start_matches(['-', '+']).chars().next().is_some_and(|d| d.is_ascii_digit()) {
                    " class=\"n\""
                } else {
                    ""
                };
                if let Some(short) = short.get(&(i, c.as_str())) {
                    // Long kernel names: the part that tells them apart, the full name on hover.
                    let _ = write!(self.html, "<td{class} title=\"{}\">{}</td>", esc(c), esc(short));
                } else {
                    let _ = write!(self.html, "<td{class}>{}</td>", esc(c));
                }
            }
            self.html.push_str("</tr>");
        }
        self.html.push_str("</tbody></table>\n");
    }
}

/// The page being put together: parts appended in page order, their holes
/// filled in and their chart files moved to their names.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub(crate) html: String,
    /// Figures on the page so far.
    figures: usize,
    /// Chart files under their names, in page order.
    files: Vec<PathBuf>,
}

impl Drop for Page {
    /// A page never finished (a part that failed to append) leaves none of its chart files, as a part does.
    fn drop(&mut self) {
        for p in &self.files {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Page {
    /// The chart files of the finished (written) page, in page order; they stay on disk.
    pub(crate) fn finish(mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.files)
    }

    /// Appends `part`; `job` (the index of the job it belongs to) numbers its [`Hole::Job`].
    pub(crate) fn append(&mut self, mut part: Part, job: usize) -> Result<(), Error> {
        let first = self.figures;
        let html = part.take_html()?;
        let mut at = 0;
        for &(offset, hole) in &part.holes {
            self.html.push_str(html.get(at..offset).unwrap_or_default());
            let _ = match hole {
                Hole::Job => write!(self.html, "{}", job + 1),
                Hole::Figure(k) => write!(self.html, "{}", first + k + 1),
            };
            at = offset;
        }
        self.html.push_str(html.get(at..).unwrap_or_default());
        self.figures += part.figures.len();
        for (k, f) in part.figures.iter_mut().enumerate() {
            let stem = format!("fig{:02}-{}", first + k + 1, f.slug);
            // Taken one at a time: what is left when a move fails goes with the part.
            while !f.files.is_empty() {
                let from = f.files.remove(0);
                let to = from.with_file_name(&stem).with_extension(from.extension().unwrap_or_default());
                if let Err(e) = tracecast_ingest::output::refuse_input(&to).and_then(|()| tracecast_ingest::output::claim(&to)) {
                    let _ = std::fs::remove_file(&from);
                    return Err(e.into());
                }
                if let Err(cause) = std::fs::rename(&from, &to) {
                    let _ = std::fs::remove_file(&from);
                    return Err(tracecast_ingest::Error::Write { path: to, cause }.into());
                }
                self.files.push(to);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Hole, Page, Part};
    use crate::chart::Scatter;

    fn chart(title: &str) -> Scatter {
        Scatter {
            title: title.into(),
            x_label: "x".into(),
            y_label: "y".into(),
            points: vec![(1.0, 1.0), (2.0, 4.0)],
            curve: Vec::new(),
            log_x: false,
            log_y: false,
            reference: None,
            legend: ["measured".into(), "fit".into()],
        }
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    /// A part held deflated while it waits puts the same HTML on the page, its holes filled in.
    #[test]
    fn a_held_part_gives_the_page_what_was_drawn() {
        let draw = || {
            let mut part = Part::new(None);
            part.html.push_str("<h2>Job ");
            part.hole(Hole::Job);
            part.figure("One", &chart("a"), Some("a note")).unwrap();
            part.table("Rows", &["name", "value"], &[vec!["x".into(), "1".into()]]);
            part
        };
        let (plain, mut held) = (draw(), draw());
        held.hold();
        assert!(held.html.is_empty(), "the drawn HTML is only kept deflated");
        let (mut a, mut b) = (Page::default(), Page::default());
        a.append(plain, 2).unwrap();
        b.append(held, 2).unwrap();
        assert!(a.html.starts_with("<h2>Job 3<figure id=\"fig1\">"));
        assert_eq!(a.html, b.html);
    }

    /// A part drawn before the one above it gets its numbers from its place on the page.
    #[test]
    fn numbers_follow_the_page_not_the_drawing() {
        let dir = std::env::temp_dir().join(format!("tracecast-page-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut job = Part::new(Some(&dir));
        job.html.push_str("<h2>Job ");
        job.hole(Hole::Job);
        job.figure("Second one", &chart("b"), None).unwrap();
        job.figure("Third", &chart("c"), None).unwrap();
        let mut above = Part::new(Some(&dir));
        above.figure("First", &chart("a"), None).unwrap();
        assert_eq!(names(&dir).iter().filter(|n| !n.starts_with('.')).count(), 0, "provisional names until numbered");
        let mut page = Page::default();
        page.append(above, 0).unwrap();
        page.append(job, 1).unwrap();
        let ids: Vec<&str> = page.html.match_indices("<figure id=\"fig").map(|(i, _)| &page.html[i + 15..i + 16]).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        assert!(page.html.contains("<h2>Job 2<figure id=\"fig2\">"));
        let expected =
            ["fig01-first.png", "fig01-first.svg", "fig02-second-one.png", "fig02-second-one.svg", "fig03-third.png", "fig03-third.svg"];
        assert_eq!(names(&dir), expected);
        let files = page.finish();
        let listed: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(
            listed,
            ["fig01-first.svg", "fig01-first.png", "fig02-second-one.svg", "fig02-second-one.png", "fig03-third.svg", "fig03-third.png"]
        );
        // A part that never reaches a page takes its files with it.
        let mut lost = Part::new(Some(&dir));
        lost.figure("Lost", &chart("d"), None).unwrap();
        assert_eq!(names(&dir).len(), expected.len() + 2);
        drop(lost);
        assert_eq!(names(&dir), expected);
        // Nor does a page that is never finished.
        let mut more = Part::new(Some(&dir));
        more.figure("Unfinished", &chart("e"), None).unwrap();
        let mut unfinished = Page::default();
        unfinished.append(more, 0).unwrap();
        assert_eq!(names(&dir).len(), expected.len() + 2);
        drop(unfinished);
        assert_eq!(names(&dir), expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
