//! The peer comparison as a picture: `docs/img/peer-bench.svg`, drawn from the same table rows
//! `cargo xtask bench` writes into `docs/benchmarks.md` (so the picture can never say something
//! the table does not), or read back from that file (`cargo xtask bench --chart-only`).
//!
//! Two panels of horizontal bars, one group per client and encoding: watch events/s and watch peak
//! RSS, each client with one bar per framing (one HTTP chunk per event, coalesced chunks). Only the
//! default runtime's rows (two worker threads) are drawn; a framing or an encoding the run did not
//! measure gets no bar and a "not measured" note, so new rows (protobuf, coalesced) appear by
//! themselves once the bench produces them.
//!
//! The SVG is written by hand (no plotting dependency): plain shapes and text, no script, no
//! external font, a transparent background, and colours chosen to read on GitHub's light and dark
//! themes alike (text switches with `prefers-color-scheme`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Where the picture is written, relative to the workspace root.
pub const PATH: &str = "docs/img/peer-bench.svg";

/// The runtime the picture shows (the bench also measures one worker; those rows are left out).
const WORKERS: u32 = 2;

/// How the server cut the watch stream into HTTP chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Framing {
    /// Each event flushed in a chunk of its own (a quiet cluster's stream).
    PerEvent,
    /// Many events per chunk (a busy cluster's stream, or a proxy that buffers).
    Coalesced,
}

impl Framing {
    const ALL: [Framing; 2] = [Framing::PerEvent, Framing::Coalesced];

    fn of_row(details: &str) -> Self {
        if details.contains("coalesced") {
            Framing::Coalesced
        } else {
            Framing::PerEvent
        }
    }

    fn legend(self) -> &'static str {
        match self {
            Framing::PerEvent => "one HTTP chunk per event",
            Framing::Coalesced => "coalesced chunks",
        }
    }

    fn colour(self) -> &'static str {
        // Mid-tone blue and orange: legible on white and on GitHub's dark grey, and apart for
        // the common colour-vision deficiencies.
        match self {
            Framing::PerEvent => "#4e79a7",
            Framing::Coalesced => "#f28e2b",
        }
    }
}

/// What one panel plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Figure {
    EventsPerSecond,
    PeakRss,
}

impl Figure {
    fn title(self) -> &'static str {
        match self {
            Figure::EventsPerSecond => "watch events/s (higher is better)",
            Figure::PeakRss => "watch peak RSS, MB (lower is better)",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Figure::EventsPerSecond => "",
            Figure::PeakRss => " MB",
        }
    }
}

/// One client (and encoding) of the picture, with its figures by framing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Client {
    /// As the table names it (`informer Pod`, `kube-rs reflector, Pod`, `prost alone, Pod`).
    pub name: String,
    /// `JSON` or `protobuf`.
    pub encoding: &'static str,
    values: BTreeMap<(Figure, Framing), f64>,
}

impl Client {
    /// The name as drawn: without a trailing `, protobuf`, which the encoding line under it and
    /// the tooltip's encoding already say ([`encoding_of`] reads it from the name).
    fn label(&self) -> &str {
        self.name.strip_suffix(", protobuf").unwrap_or(&self.name)
    }

    fn value(&self, figure: Figure, framing: Framing) -> Option<f64> {
        self.values.get(&(figure, framing)).copied()
    }
}

/// The encoding a client's name implies: protobuf clients say so (`…, protobuf`, `prost alone`).
fn encoding_of(name: &str) -> &'static str {
    if name.contains("protobuf") || name.contains("prost") {
        "protobuf"
    } else {
        "JSON"
    }
}

/// A table figure as a number: `37.9 k events/s` is 37 900, `2.1 k MB` 2 100, `232 MB` 232.
fn number(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let n: f64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        Some("k") => 1e3,
        Some("M") => 1e6,
        _ => 1.0,
    };
    Some(n * scale).filter(|v| v.is_finite() && *v >= 0.0)
}

/// `peer: <what>, <client> (<details>), …` as its client and details, when `what` matches.
fn split_label<'a>(label: &'a str, what: &str) -> Option<(&'a str, &'a str)> {
    let rest = label.strip_prefix("peer: ")?.strip_prefix(what)?;
    let rest = rest.strip_prefix(", ")?;
    // The details are the last parenthesis of the label, holding parentheses of their own
    // (`worker(s)`), and a client's name may hold one too (`informer Pod view (PbView)`): they
    // open at the parenthesis that matches the last one.
    let close = rest.rfind(')')?;
    let mut depth = 0usize;
    let mut open = None;
    for (at, c) in rest[..=close].char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    open = Some(at);
                    break;
                }
            }
            _ => {}
        }
    }
    let open = open?;
    let name = rest[..open].strip_suffix(' ')?;
    Some((name, &rest[open + 1..close]))
}

/// The worker count a row's details name (`…; 2 worker(s); …`).
fn workers_of(details: &str) -> Option<u32> {
    let at = details.find(" worker(s)")?;
    let start = details[..at].rfind(|c: char| !c.is_ascii_digit())? + 1;
    details[start..at].parse().ok()
}

/// The clients of the peer comparison's rows, given as (figure label, result, same-run baseline)
/// as the table shows them; kube-rs's reflectors come from the baseline column. Clients come in
/// the order the rows first name them, kube-rs's first.
pub fn clients<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Vec<Client> {
    let mut ours: Vec<Client> = Vec::new();
    let mut peers: Vec<Client> = Vec::new();
    let put = |list: &mut Vec<Client>, name: &str, key: (Figure, Framing), value: f64| {
        let index = match list.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                list.push(Client {
                    name: name.to_string(),
                    encoding: encoding_of(name),
                    values: BTreeMap::new(),
                });
                list.len() - 1
            }
        };
        list[index].values.entry(key).or_insert(value);
    };
    for (label, result, baseline) in rows {
        let Some((figure, (client, details))) = split_label(label, "watch")
            .map(|s| (Figure::EventsPerSecond, s))
            .or_else(|| split_label(label, "watch peak RSS").map(|s| (Figure::PeakRss, s)))
        else {
            continue;
        };
        if workers_of(details) != Some(WORKERS) {
            continue;
        }
        let key = (figure, Framing::of_row(details));
        // `informer DynamicObject against kube-rs's DynamicObject` repeats our figure: only its
        // baseline (kube-rs's DynamicObject reflector) is new.
        let client = client.split(" against ").next().unwrap_or(client);
        if let Some(value) = number(result) {
            put(&mut ours, client, key, value);
        }
        let peer = baseline
            .find(" (")
            .and_then(|open| Some((open, baseline.rfind(')')?)))
            .filter(|(open, close)| close > open)
            .map(|(open, close)| (&baseline[..open], &baseline[open + 2..close]));
        if let Some((value, name)) = peer {
            if let Some(value) = number(value) {
                // Only the peers (kube-rs's reflectors, client-go's informer) are clients of their
                // own; other baselines (serde alone for prost alone, say) are rows of ours already.
                if name.starts_with("kube-rs") || name.starts_with("client-go") {
                    put(&mut peers, name, key, value);
                }
            }
        }
    }
    peers.extend(ours);
    peers
}

/// The rows of the generated table in `doc` (`docs/benchmarks.md`), as (figure, result,
/// baseline).
pub fn table_rows(doc: &str) -> Vec<(String, String, String)> {
    doc.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .map(str::trim)
                .collect();
            (cells.len() >= 3 && cells[0].starts_with("peer: ")).then(|| {
                (
                    cells[0].to_string(),
                    cells[1].to_string(),
                    cells[2].to_string(),
                )
            })
        })
        .collect()
}

/// `text` with XML's five special characters escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// An axis for values up to `max`: its end and its step, both round numbers, with some room left
/// after the longest bar for its label.
pub(crate) fn axis(max: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max * 1.2
    } else {
        1.0
    };
    let rough = max / 4.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

/// A figure as a bar's label: `37.9k`, `1.2M`, `232`, `57`, `2.5`.
pub(crate) fn short(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if value >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if value >= 10.0 || value == value.trunc() {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The drawing both charts share (this one and the scale record's): a card with a heading and a
/// caption, a legend, panels of horizontal bars on round-numbered axes.
pub(crate) mod draw {
    use std::fmt::Write as _;

    use super::{axis, escape, short};

    /// The picture's width, in SVG user units (pixels at 100%).
    pub const WIDTH: f64 = 960.0;
    /// The label column, left of the first panel.
    pub const LABEL_COLUMN: f64 = 250.0;
    /// A panel's width.
    pub const PANEL: f64 = 315.0;
    /// The space between two panels.
    pub const PANEL_GAP: f64 = 60.0;
    /// A bar's height.
    pub const BAR: f64 = 13.0;
    /// The space between two bars of a group.
    pub const BAR_GAP: f64 = 3.0;
    /// The space between two groups.
    pub const GROUP_GAP: f64 = 14.0;
    /// The top of the first group.
    pub const TOP: f64 = 122.0;

    /// The left edge of panel `p` (0 or 1).
    pub fn panel_left(p: usize) -> f64 {
        LABEL_COLUMN + p as f64 * (PANEL + PANEL_GAP)
    }

    /// Opens the picture, `height` tall: its tooltip title, the styles (text that switches with
    /// `prefers-color-scheme`), a card of its own (so the text keeps its contrast whatever the
    /// page behind it), the `heading` and up to two lines of `caption` (SVG text does not wrap).
    pub fn open(out: &mut String, height: f64, title: &str, heading: &str, caption: &str) {
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = write!(
            out,
            "<title>{}</title>\
             <style>text{{fill:#1f2328}}.muted{{fill:#59636e}}.grid{{stroke:#d1d9e0;stroke-width:1}}\
             .axis{{stroke:#59636e;stroke-width:1}}\
             @media (prefers-color-scheme: dark){{text{{fill:#e6edf3}}.muted{{fill:#9198a1}}\
             .grid{{stroke:#3d444d}}.axis{{stroke:#9198a1}}.bg{{fill:#0d1117;stroke:#3d444d}}}}</style>",
            escape(title)
        );
        let _ = write!(
            out,
            r##"<rect class="bg" x="0.5" y="0.5" width="{}" height="{}" rx="6" fill="#ffffff" stroke="#d1d9e0"/>"##,
            WIDTH - 1.0,
            height - 1.0
        );
        let _ = write!(
            out,
            r#"<text x="12" y="24" font-size="16" font-weight="bold">{}</text>"#,
            escape(heading)
        );
        for (i, line) in caption.lines().take(2).enumerate() {
            let _ = write!(
                out,
                r#"<text class="muted" x="12" y="{}">{}</text>"#,
                42 + 16 * i,
                escape(line)
            );
        }
    }

    /// The legend: a swatch and a label per `(colour, label)`, in a row.
    pub fn legend<'a>(out: &mut String, items: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let mut x = 12.0;
        for (colour, label) in items {
            let _ = write!(
                out,
                r#"<rect x="{x}" y="70" width="12" height="12" fill="{colour}"/><text x="{}" y="80">{}</text>"#,
                x + 17.0,
                escape(label)
            );
            x += 30.0 + 7.0 * label.chars().count() as f64;
        }
    }

    /// Panel `p`'s title, grid lines, tick labels and axis for values up to `max`, down to
    /// `plot_bottom`, with `unit` under it; returns the axis' end, which a bar is scaled to.
    pub fn panel(
        out: &mut String,
        p: usize,
        title: &str,
        unit: &str,
        max: f64,
        plot_bottom: f64,
    ) -> f64 {
        let left = panel_left(p);
        let (end, step) = axis(max);
        let _ = write!(
            out,
            r#"<text x="{left}" y="106" font-weight="bold">{}</text>"#,
            escape(title)
        );
        let mut tick = 0.0;
        while tick <= end + step / 2.0 {
            let tx = left + tick / end * PANEL;
            let _ = write!(
                out,
                r#"<line class="grid" x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{plot_bottom}"/><text class="muted" x="{tx:.1}" y="{}" text-anchor="middle">{}</text>"#,
                TOP - 6.0,
                plot_bottom + 16.0,
                short(tick)
            );
            tick += step;
        }
        let _ = write!(
            out,
            r#"<line class="axis" x1="{left}" y1="{}" x2="{left}" y2="{plot_bottom}"/>"#,
            TOP - 6.0
        );
        if !unit.is_empty() {
            let _ = write!(
                out,
                r#"<text class="muted" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                left + PANEL / 2.0,
                plot_bottom + 34.0,
                escape(unit)
            );
        }
        end
    }

    /// A bar of panel `p` at `y`, scaled to the panel's axis `end`, labelled with its value and
    /// with `tooltip` (escaped here) as its hover title; `None` draws "not measured" instead.
    pub fn bar(
        out: &mut String,
        p: usize,
        y: f64,
        end: f64,
        value: Option<f64>,
        colour: &str,
        tooltip: &str,
    ) {
        let left = panel_left(p);
        match value {
            Some(value) => {
                let w = (value / end * PANEL).max(1.0);
                let _ = write!(
                    out,
                    r#"<rect class="bar" x="{left}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{colour}"><title>{}</title></rect><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                    escape(tooltip),
                    left + w + 4.0,
                    y + BAR - 2.5,
                    short(value)
                );
            }
            None => {
                let _ = write!(
                    out,
                    r#"<text class="muted" x="{:.1}" y="{:.1}" font-size="10">not measured</text>"#,
                    left + 4.0,
                    y + BAR - 3.0
                );
            }
        }
    }
}

use draw::{BAR, BAR_GAP, GROUP_GAP, LABEL_COLUMN, TOP};

/// The most characters of a client's name one line of the label column holds (about 6.7 units
/// each at the picture's 12-unit font, within its 240).
const LABEL_CHARS: usize = 34;
/// The distance between two lines of a client's label: one bar and its gap, as before the
/// encoding line had a name line above it.
const LABEL_LINE: f64 = BAR + BAR_GAP;

/// A client's name as the label column shows it: one line, or, when longer than [`LABEL_CHARS`],
/// two, cut after the last `, ` that leaves the first line within it (or the first `, ` when
/// none does). A name with no `, ` stays on one line.
fn label_lines(name: &str) -> Vec<&str> {
    if name.chars().count() <= LABEL_CHARS {
        return vec![name];
    }
    let cuts: Vec<usize> = name.match_indices(", ").map(|(at, _)| at).collect();
    let cut = cuts
        .iter()
        .rev()
        .find(|&&at| name[..at + 1].chars().count() <= LABEL_CHARS)
        .or(cuts.first());
    match cut {
        Some(&at) => vec![&name[..at + 1], &name[at + 2..]],
        None => vec![name],
    }
}

/// The picture of `clients`; `caption` (up to two lines) says when and where the figures were
/// measured.
pub fn svg(clients: &[Client], caption: &str) -> String {
    let framings = Framing::ALL;
    // Each client's group is as tall as its bars or its label (name lines and the encoding line),
    // whichever is taller, so that a two-line name's encoding never crowds the next client's name.
    let bars = framings.len() as f64 * (BAR + BAR_GAP);
    let mut tops = Vec::with_capacity(clients.len());
    let mut plot_bottom = TOP;
    for client in clients {
        tops.push(plot_bottom);
        let label = (label_lines(client.label()).len() + 1) as f64 * LABEL_LINE;
        plot_bottom += bars.max(label) + GROUP_GAP;
    }
    if clients.is_empty() {
        plot_bottom += bars + GROUP_GAP;
    }
    let height = plot_bottom + 48.0;
    let mut out = String::new();
    draw::open(
        &mut out,
        height,
        "Peer comparison: watch events/s and peak RSS per client, encoding and framing",
        "Peer comparison: kube-rs's reflector and this project's informers",
        caption,
    );
    draw::legend(&mut out, framings.iter().map(|f| (f.colour(), f.legend())));
    for (p, figure) in [Figure::EventsPerSecond, Figure::PeakRss]
        .into_iter()
        .enumerate()
    {
        let max = clients
            .iter()
            .flat_map(|c| framings.iter().filter_map(|f| c.value(figure, *f)))
            .fold(0.0, f64::max);
        let unit = match figure {
            Figure::EventsPerSecond => "events/s",
            Figure::PeakRss => "MB",
        };
        let end = draw::panel(&mut out, p, figure.title(), unit, max, plot_bottom);
        for (i, client) in clients.iter().enumerate() {
            for (j, framing) in framings.iter().enumerate() {
                let y = tops[i] + j as f64 * (BAR + BAR_GAP);
                let value = client.value(figure, *framing);
                let tooltip = format!(
                    "{}, {}, {}: {}{}",
                    client.label(),
                    client.encoding,
                    framing.legend(),
                    value.map(short).unwrap_or_default(),
                    figure.unit()
                );
                draw::bar(&mut out, p, y, end, value, framing.colour(), &tooltip);
            }
        }
    }
    // Client labels, right-aligned against the first panel: the name on one line, or two when it
    // is too long for the column, then the encoding.
    for (i, client) in clients.iter().enumerate() {
        let top = tops[i];
        let lines = label_lines(client.label());
        for (k, line) in lines.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LABEL_COLUMN - 10.0,
                top + BAR - 1.0 + k as f64 * LABEL_LINE,
                escape(line)
            );
        }
        let _ = write!(
            out,
            r#"<text class="muted" x="{}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"#,
            LABEL_COLUMN - 10.0,
            top + BAR - 1.0 + lines.len() as f64 * LABEL_LINE,
            client.encoding
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::draw::PANEL;
    use super::*;

    /// Checks that `xml` is well formed as far as this generator can go wrong: every tag closed in
    /// order, attributes quoted, no stray `<` or `&` in text. Returns the element names opened.
    fn well_formed(xml: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut opened = Vec::new();
        let mut rest = xml.trim_end();
        while let Some(lt) = rest.find('<') {
            let text = &rest[..lt];
            check_text(text);
            let gt = rest[lt..].find('>').expect("a tag ends") + lt;
            let tag = &rest[lt + 1..gt];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "closing tag in order");
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = body.split_whitespace().next().expect("a tag name");
                assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{name}");
                let attributes = &body[name.len()..];
                assert_eq!(
                    attributes.matches('"').count() % 2,
                    0,
                    "quoted attributes in <{tag}>"
                );
                check_text(&attributes.replace("=\"", "").replace('"', ""));
                opened.push(name.to_string());
                if !self_closing {
                    stack.push(name.to_string());
                }
            }
            rest = &rest[gt + 1..];
        }
        check_text(rest);
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        opened
    }

    fn check_text(text: &str) {
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity),
                "bad entity {entity}"
            );
        }
    }

    fn row(what: &str, client: &str, details: &str, value: &str, base: &str) -> [String; 3] {
        [
            format!("peer: {what}, {client} ({details}), glibc malloc"),
            value.to_string(),
            base.to_string(),
        ]
    }

    fn sample() -> Vec<[String; 3]> {
        let per_event = "100000 events; 2 worker(s); median of 3";
        let coalesced = "100000 events, coalesced chunks; 2 worker(s); median of 3";
        let kube = |v: &str| format!("{v} (kube-rs reflector, Pod)");
        vec![
            row(
                "watch",
                "informer Pod",
                per_event,
                "37.9 k events/s",
                &kube("17.9 k events/s"),
            ),
            row(
                "sync of 10000 pods",
                "informer Pod",
                per_event,
                "420 ms",
                &kube("518 ms"),
            ),
            row(
                "watch peak RSS",
                "informer Pod",
                per_event,
                "232 MB",
                &kube("267 MB"),
            ),
            row(
                "watch",
                "informer Pod",
                coalesced,
                "40.0 k events/s",
                &kube("24.0 k events/s"),
            ),
            row(
                "watch",
                "informer DynamicObject against kube-rs's DynamicObject",
                per_event,
                "30.4 k events/s",
                "10.1 k events/s (kube-rs reflector, DynamicObject)",
            ),
            row(
                "watch",
                "prost alone, Pod",
                per_event,
                "150.0 k events/s",
                "60.0 k events/s (serde_json alone, Pod)",
            ),
            // One worker: not drawn.
            row(
                "watch",
                "informer Pod",
                "100000 events; 1 worker(s); median of 3",
                "35.4 k events/s",
                &kube("28.2 k events/s"),
            ),
        ]
    }

    fn clients_of(rows: &[[String; 3]]) -> Vec<Client> {
        clients(
            rows.iter()
                .map(|[a, b, c]| (a.as_str(), b.as_str(), c.as_str())),
        )
    }

    #[test]
    fn rows_become_clients_with_kube_rs_from_the_baselines_and_one_runtime_only() {
        let clients = clients_of(&sample());
        let names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "kube-rs reflector, Pod",
                "kube-rs reflector, DynamicObject",
                "informer Pod",
                "informer DynamicObject",
                "prost alone, Pod"
            ]
        );
        let pod = &clients[2];
        assert_eq!(pod.encoding, "JSON");
        assert_eq!(
            pod.value(Figure::EventsPerSecond, Framing::PerEvent),
            Some(37_900.0)
        );
        assert_eq!(
            pod.value(Figure::EventsPerSecond, Framing::Coalesced),
            Some(40_000.0)
        );
        assert_eq!(pod.value(Figure::PeakRss, Framing::PerEvent), Some(232.0));
        assert_eq!(pod.value(Figure::PeakRss, Framing::Coalesced), None);
        assert_eq!(
            clients[0].value(Figure::EventsPerSecond, Framing::Coalesced),
            Some(24_000.0)
        );
        assert_eq!(clients[4].encoding, "protobuf");
    }

    #[test]
    fn a_client_name_with_a_parenthesis_keeps_it_and_its_encoding() {
        let details = "100000 events, coalesced chunks; 2 worker(s); median of 3";
        let rows = [
            row(
                "watch",
                "informer Pod view (PbView), protobuf",
                details,
                "73.5 k events/s",
                "12.7 k events/s (kube-rs reflector, Pod)",
            ),
            row(
                "watch peak RSS",
                "informer Pod view (PbView), protobuf",
                details,
                "38.38 MB",
                "280 MB (kube-rs reflector, Pod)",
            ),
        ];
        let clients = clients_of(&rows);
        let view = &clients[1];
        assert_eq!(view.name, "informer Pod view (PbView), protobuf");
        assert_eq!(view.encoding, "protobuf");
        assert_eq!(view.label(), "informer Pod view (PbView)");
        assert_eq!(
            view.value(Figure::EventsPerSecond, Framing::Coalesced),
            Some(73_500.0)
        );
        assert_eq!(view.value(Figure::PeakRss, Framing::Coalesced), Some(38.38));
        assert_eq!(view.value(Figure::EventsPerSecond, Framing::PerEvent), None);
    }

    #[test]
    fn client_go_from_a_baseline_is_a_peer_and_ours_is_not_repeated() {
        let details = "50000 events; 2 worker(s); median of 3";
        let rows = [
            row(
                "watch",
                "informer Pod, protobuf",
                details,
                "51.5 k events/s",
                "16.1 k events/s (kube-rs reflector, Pod)",
            ),
            row(
                "watch",
                "informer Pod, protobuf against client-go's informer",
                details,
                "51.5 k events/s",
                "40.8 k events/s (client-go informer, Pod, protobuf)",
            ),
        ];
        let clients = clients_of(&rows);
        let names: Vec<(&str, &str)> = clients
            .iter()
            .map(|c| (c.name.as_str(), c.encoding))
            .collect();
        assert_eq!(
            names,
            [
                ("kube-rs reflector, Pod", "JSON"),
                ("client-go informer, Pod, protobuf", "protobuf"),
                ("informer Pod, protobuf", "protobuf"),
            ]
        );
        assert_eq!(
            clients[1].value(Figure::EventsPerSecond, Framing::PerEvent),
            Some(40_800.0)
        );
    }

    #[test]
    fn the_svg_is_well_formed_with_one_bar_per_measured_figure() {
        let clients = clients_of(&sample());
        let measured: usize = clients.iter().map(|c| c.values.len()).sum();
        let picture = svg(&clients, "measured <today> & here");
        let opened = well_formed(&picture);
        assert_eq!(opened.first().map(String::as_str), Some("svg"));
        assert_eq!(picture.matches(r#"<rect class="bar""#).count(), measured);
        assert_eq!(measured, 9);
        // Every client and framing of both panels either has a bar or says it was not measured.
        let slots = clients.len() * 2 * Framing::ALL.len();
        assert_eq!(picture.matches("not measured").count(), slots - measured);
        assert!(picture.contains("measured &lt;today&gt; &amp; here"));
        assert!(picture.contains("kube-rs reflector, DynamicObject"));
    }

    #[test]
    fn bars_are_scaled_to_one_axis_per_panel() {
        let rows = [
            row("watch", "a", "1 events; 2 worker(s)", "100 events/s", ""),
            row("watch", "b", "1 events; 2 worker(s)", "50 events/s", ""),
        ];
        let picture = svg(&clients_of(&rows), "");
        let widths: Vec<f64> = picture
            .match_indices(r#"<rect class="bar""#)
            .map(|(i, _)| {
                let w = &picture[i..][picture[i..].find("width=\"").unwrap() + 7..];
                w[..w.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(widths.len(), 2);
        assert!((widths[0] / widths[1] - 2.0).abs() < 0.01, "{widths:?}");
        // The axis ends past the longest bar (room for its label) but within the panel.
        assert!(widths[0] < PANEL && widths[0] > PANEL * 0.6, "{widths:?}");
    }

    #[test]
    fn a_two_line_label_gets_a_taller_group_and_never_touches_the_next_name() {
        let details = "1 events; 2 worker(s)";
        let long = "Pod decoded in the handler, informer CompactObject, protobuf";
        let rows = [
            row("watch", long, details, "100 events/s", ""),
            row("watch", "informer Pod", details, "50 events/s", ""),
        ];
        let picture = svg(&clients_of(&rows), "");
        // The y of the first text element holding `needle`.
        let y_of = |needle: &str| -> f64 {
            let at = picture.find(&format!(">{needle}<")).unwrap();
            let start = picture[..at].rfind("<text").unwrap();
            let y = &picture[start..][picture[start..].find(" y=\"").unwrap() + 4..];
            y[..y.find('"').unwrap()].parse().unwrap()
        };
        let encoding = y_of("protobuf");
        let next_name = y_of("informer Pod");
        assert!(
            next_name - encoding >= LABEL_LINE + GROUP_GAP,
            "encoding at {encoding}, next name at {next_name}"
        );
        // A group of one-line names keeps the height of its bars.
        let short = [
            row("watch", "a", details, "1 events/s", ""),
            row("watch", "b", details, "1 events/s", ""),
        ];
        let bars = Framing::ALL.len() as f64 * (BAR + BAR_GAP);
        let height = |p: &str| -> f64 {
            let h = &p[p.find("height=\"").unwrap() + 8..];
            h[..h.find('"').unwrap()].parse().unwrap()
        };
        let one = svg(&clients_of(&short[..1]), "");
        let two = svg(&clients_of(&short), "");
        assert!((height(&two) - height(&one) - (bars + GROUP_GAP)).abs() < 0.01);
    }

    #[test]
    fn axes_end_on_round_numbers_past_the_largest_value() {
        assert_eq!(axis(136_800.0), (200_000.0, 50_000.0));
        assert_eq!(axis(267.0), (400.0, 100.0));
        assert_eq!(axis(0.0), (1.0, 0.25));
        let (end, step) = axis(9.0);
        assert!(end >= 10.8 && (end / step).fract() == 0.0);
    }

    #[test]
    fn the_table_is_read_back_from_the_document() {
        let doc = "intro\n| figure | result | same-run baseline | ratio | target |\n|---|---|---|---|---|\n\
                   | store-index: add | 1 M |  |  |  |\n\
                   | peer: watch, informer Pod (1 events; 2 worker(s); median of 3), glibc malloc | 37.9 k events/s | 17.9 k events/s (kube-rs reflector, Pod) | 2.11 | ≥ 2.0 |\n";
        let rows = table_rows(doc);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].1, "37.9 k events/s");
        let clients = clients(
            rows.iter()
                .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())),
        );
        assert_eq!(clients.len(), 2);
        assert_eq!(number("2.1 k MB"), Some(2100.0));
        assert_eq!(number("not measured"), None);
    }

    #[test]
    fn a_name_does_not_repeat_the_encoding_drawn_under_it() {
        let client = |name: &str| Client {
            name: name.to_string(),
            encoding: encoding_of(name),
            values: BTreeMap::new(),
        };
        assert_eq!(client("informer Pod, protobuf").label(), "informer Pod");
        assert_eq!(
            client("client-go informer, Pod, protobuf").label(),
            "client-go informer, Pod"
        );
        assert_eq!(client("prost alone, Pod").label(), "prost alone, Pod");
        assert_eq!(client("informer Pod").label(), "informer Pod");
    }

    #[test]
    fn a_long_client_name_is_cut_at_a_comma_onto_two_lines() {
        use super::{label_lines, LABEL_CHARS};
        assert_eq!(
            label_lines("informer CompactObject, protobuf"),
            ["informer CompactObject, protobuf"]
        );
        let long = "Pod decoded in the handler, informer CompactObject, protobuf";
        let lines = label_lines(long);
        assert_eq!(
            lines,
            [
                "Pod decoded in the handler,",
                "informer CompactObject, protobuf"
            ]
        );
        assert!(lines.iter().all(|l| l.chars().count() <= LABEL_CHARS));
        // No comma early enough: cut at the first one; none at all: one line.
        assert_eq!(
            label_lines("an informer of a very long kind name here, protobuf"),
            ["an informer of a very long kind name here,", "protobuf"]
        );
        let no_comma = "an informer of a very long kind name with no comma at all";
        assert_eq!(label_lines(no_comma), [no_comma]);
    }
}
