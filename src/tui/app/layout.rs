//! The split tree of panes: the built-in layout, resizing from keys, and
//! the borders the mouse can drag.

use ratatui::layout::{Direction, Rect};

use crate::tui::config::TuiConfig;
use crate::tui::panes;

/// Below this size only the focused pane is drawn.
pub(super) const MIN_SPLIT_WIDTH: u16 = 60;
/// See [`MIN_SPLIT_WIDTH`].
pub(super) const MIN_SPLIT_HEIGHT: u16 = 14;

/// A split tree of pane ids.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// One pane.
    Leaf(&'static str),
    /// Two parts side by side (`Horizontal`) or stacked (`Vertical`);
    /// `pct` is the first part's share in percent.
    Split {
        /// Direction.
        dir: Direction,
        /// First part's share, 10..=90.
        pct: u16,
        /// First part.
        a: Box<Node>,
        /// Second part.
        b: Box<Node>,
    },
}

impl Node {
    pub(super) fn split(dir: Direction, pct: u16, a: Node, b: Node) -> Node {
        Node::Split {
            dir,
            pct: pct.clamp(10, 90),
            a: Box::new(a),
            b: Box::new(b),
        }
    }

    /// Pane ids in reading order.
    pub fn leaves(&self, out: &mut Vec<&'static str>) {
        match self {
            Node::Leaf(id) => out.push(id),
            Node::Split { a, b, .. } => {
                a.leaves(out);
                b.leaves(out);
            }
        }
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        match self {
            Node::Leaf(l) => *l == id,
            Node::Split { a, b, .. } => a.contains(id) || b.contains(id),
        }
    }

    /// Changes the share of the innermost `dir` split around `id` by
    /// `delta` (from the side of `id`: positive grows it).
    pub(super) fn resize(&mut self, id: &str, dir: Direction, delta: i16) -> bool {
        let Node::Split {
            dir: d, pct, a, b, ..
        } = self
        else {
            return false;
        };
        let in_a = a.contains(id);
        let child = if in_a { a } else { b };
        if child.resize(id, dir, delta) {
            return true;
        }
        if *d == dir && (in_a || child.contains(id)) {
            let signed = if in_a { delta } else { -delta };
            *pct = (*pct as i16 + signed).clamp(10, 90) as u16;
            return true;
        }
        false
    }

    pub(super) fn split_at_path(&mut self, path: &[bool]) -> Option<&mut Node> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => match self {
                Node::Split { a, b, .. } => {
                    if *first {
                        b.split_at_path(rest)
                    } else {
                        a.split_at_path(rest)
                    }
                }
                Node::Leaf(_) => None,
            },
        }
    }
}

/// The built-in layout: Workspaces / Sessions / Skills / Offload on the
/// left; Files beside MCP, then Command and Logs on the right. New panes
/// go in here.
pub fn default_layout(cfg: &TuiConfig) -> Node {
    use Direction::{Horizontal, Vertical};
    let left = Node::split(
        Vertical,
        22,
        Node::Leaf(panes::workspaces::ID),
        Node::split(
            Vertical,
            30,
            Node::Leaf(panes::sessions::ID),
            Node::split(
                Vertical,
                45,
                Node::Leaf(panes::skills::ID),
                Node::Leaf(panes::offload::ID),
            ),
        ),
    );
    let right = Node::split(
        Vertical,
        cfg.layout.files,
        Node::split(
            Horizontal,
            60,
            Node::Leaf(panes::files::ID),
            Node::Leaf(panes::mcp::ID),
        ),
        Node::split(
            Vertical,
            cfg.layout.command,
            Node::Leaf(panes::command::ID),
            Node::Leaf(panes::logs::ID),
        ),
    );
    Node::split(Horizontal, cfg.layout.left, left, right)
}

/// A border that can be dragged with the mouse.
#[derive(Debug, Clone)]
pub(super) struct SplitHandle {
    pub(super) path: Vec<bool>,
    pub(super) dir: Direction,
    pub(super) area: Rect,
    /// Column (horizontal split) or row (vertical) of the border.
    pub(super) at: u16,
}

/// Whether `(x, y)` is on the border of `h` (or the cell before it).
pub(super) fn on_handle(h: &SplitHandle, x: u16, y: u16) -> bool {
    let a = h.area;
    match h.dir {
        Direction::Horizontal => (x == h.at || x + 1 == h.at) && y >= a.y && y < a.y + a.height,
        Direction::Vertical => (y == h.at || y + 1 == h.at) && x >= a.x && x < a.x + a.width,
    }
}
