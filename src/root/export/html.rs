//! The document as one HTML file: style inline, images as data URLs,
//! folds as `<details>`, the token chart as inline SVG. Every text is
//! HTML-escaped; the page has no script.

use base64::Engine as _;

use super::doc::{Doc, Node};

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#222}\
h1,h2,h3,h4{line-height:1.2}h4{margin:1.5rem 0 .3rem;color:#555}\
.meta{color:#777}table{border-collapse:collapse;font-size:13px}\
td,th{border:1px solid #ddd;padding:.2rem .5rem;vertical-align:top;text-align:left}\
pre{background:#f6f6f6;padding:.6rem;overflow:auto;font-size:13px}\
blockquote{border-left:4px solid #ccc;margin:0;padding:.2rem 1rem;color:#444;white-space:pre-wrap}\
p{white-space:pre-wrap}img{max-width:100%}summary{cursor:pointer;color:#246}";

/// Renders `d` as a whole HTML page.
pub fn render(d: &Doc) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"wsbench\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(&d.title)
    );
    for node in &d.nodes {
        match node {
            Node::Heading(level, text) => {
                out.push_str(&format!("<h{level}>{}</h{level}>\n", esc(text)))
            }
            Node::Meta(text) => out.push_str(&format!("<p class=\"meta\">{}</p>\n", esc(text))),
            Node::Para(text) => out.push_str(&format!("<p>{}</p>\n", esc(text))),
            Node::Table(head, rows) => {
                out.push_str("<table>\n<tr>");
                for h in head {
                    out.push_str(&format!("<th>{}</th>", esc(h)));
                }
                out.push_str("</tr>\n");
                for r in rows {
                    out.push_str("<tr>");
                    for c in r {
                        out.push_str(&format!("<td>{}</td>", esc(c)));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table>\n");
            }
            Node::Code { text, fold } => {
                let pre = format!("<pre>{}</pre>", esc(text));
                match fold {
                    Some(s) => out.push_str(&format!(
                        "<details><summary>{}</summary>{pre}</details>\n",
                        esc(s)
                    )),
                    None => out.push_str(&format!("{pre}\n")),
                }
            }
            Node::Quote(text) => out.push_str(&format!("<blockquote>{}</blockquote>\n", esc(text))),
            Node::Image {
                alt,
                media_type,
                data,
                url,
                why,
            } => match data {
                Some(bytes) => out.push_str(&format!(
                    "<p><img alt=\"{}\" src=\"data:{};base64,{}\"></p>\n",
                    esc(alt),
                    esc(media_type),
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                )),
                None => out.push_str(&format!(
                    "<p class=\"meta\">[{}: {}] ({})</p>\n",
                    esc(alt),
                    esc(url),
                    esc(why.as_deref().unwrap_or(""))
                )),
            },
            Node::Bars(title, bars) => out.push_str(&bars_svg(title, bars)),
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// HTML-escapes text for element content and quoted attributes.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A bar per value, scaled to the highest, each with its label and value
/// as a tooltip.
fn bars_svg(title: &str, bars: &[(String, u64)]) -> String {
    const H: u64 = 80;
    const W: usize = 12;
    let max = bars.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    let mut out = format!(
        "<figure><figcaption>{} (highest ~{max})</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{H}\" role=\"img\">",
        esc(title),
        bars.len() * W
    );
    for (i, (label, v)) in bars.iter().enumerate() {
        let h = (v * H / max).max(1);
        out.push_str(&format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{h}\" fill=\"#4a7\"><title>{} ~{v} tokens</title></rect>",
            i * W,
            H - h,
            W - 2,
            esc(label)
        ));
    }
    out.push_str("</svg></figure>\n");
    out
}
