//! Scrolling a buffer that follows its end (the Command pane's output,
//! the Agent pane's conversation): `back` counts lines up from the end,
//! and following is on exactly while `back` is 0.

use ratatui::crossterm::event::MouseEventKind;

/// Lines one wheel notch scrolls.
const WHEEL_LINES: usize = 3;

/// Applies a mouse wheel event to a followed buffer: up scrolls back
/// and stops following, down scrolls forward and follows again once at
/// the end. Returns false (and changes nothing) for any other event.
pub fn wheel(kind: MouseEventKind, back: &mut usize, follow: &mut bool) -> bool {
    match kind {
        MouseEventKind::ScrollUp => {
            *back += WHEEL_LINES;
            *follow = false;
        }
        MouseEventKind::ScrollDown => {
            *back = back.saturating_sub(WHEEL_LINES);
            *follow = *back == 0;
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::MouseButton;

    #[test]
    fn the_wheel_leaves_the_end_and_comes_back_to_follow() {
        let (mut back, mut follow) = (0, true);
        assert!(wheel(MouseEventKind::ScrollUp, &mut back, &mut follow));
        assert_eq!((back, follow), (3, false));
        assert!(wheel(MouseEventKind::ScrollDown, &mut back, &mut follow));
        assert_eq!((back, follow), (0, true));
        assert!(wheel(MouseEventKind::ScrollDown, &mut back, &mut follow));
        assert_eq!((back, follow), (0, true));
        let click = MouseEventKind::Down(MouseButton::Left);
        assert!(!wheel(click, &mut back, &mut follow));
        assert_eq!((back, follow), (0, true));
    }
}
