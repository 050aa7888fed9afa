//! The macros a pane is declared with: `pane_action_enum!` (its typed
//! action enum and `ACTIONS` table in one place), `pane_actions!` (the
//! list navigation entries every list table ends with), `task_pane_glue!`
//! (the `Pane` methods every task pane writes the same way) and
//! `filtered_list_input!` (the keys of a filtered list's `/` filter).
//! They are `#[macro_export]`ed, so they are named `crate::…!`.

/// A pane's `ACTIONS` table: its own actions first, then the list
/// navigation ones. `pane_actions!("files"; act(...), ...)` adds
/// `files.down`, `files.up`, `files.page_down`, `files.page_up`,
/// `files.half_down`, `files.half_up`, `files.top`, `files.bottom` (j/k,
/// pgdn/pgup a full page, ctrl-d/ctrl-u half a page as in vim and less,
/// g/G).
#[macro_export]
#[doc(hidden)]
macro_rules! pane_actions {
    ($id:literal; $($extra:expr),* $(,)?) => {
        &[
        $($extra,)*
        $crate::tui::pane::act(concat!($id, ".down"), $id, "down", &["j", "down"], false, false),
        $crate::tui::pane::act(concat!($id, ".up"), $id, "up", &["k", "up"], false, false),
        $crate::tui::pane::act(concat!($id, ".page_down"), $id, "page down", &["pgdn"], false, false),
        $crate::tui::pane::act(concat!($id, ".page_up"), $id, "page up", &["pgup"], false, false),
        $crate::tui::pane::act(concat!($id, ".half_down"), $id, "half a page down", &["ctrl-d"], false, false),
        $crate::tui::pane::act(concat!($id, ".half_up"), $id, "half a page up", &["ctrl-u"], false, false),
        $crate::tui::pane::act(concat!($id, ".top"), $id, "first", &["g", "home"], false, false),
        $crate::tui::pane::act(concat!($id, ".bottom"), $id, "last", &["G", "end"], false, false),
        ]
    };
}

/// Declares a pane's action enum and its `ACTIONS` table in one place, so
/// every table entry has a variant and every variant a table entry (the
/// footer, help, the palette and `[tui.keys]` all read the table; the
/// pane matches on the enum, so a variant without a handler does not
/// compile unless the pane says `_ =>`).
///
/// ```ignore
/// crate::pane_action_enum! {
///     /// An action of the Command pane.
///     pub(crate) enum CommandAction in "command";
///     Prompt => act("command.prompt", ID, "type a command", &["i"], false, true),
/// }
/// ```
///
/// makes `CommandAction::{Prompt, Nav(Nav)}`, `CommandAction::TABLE` (the
/// entries in order, then the list navigation ones of
/// [`pane_actions!`](crate::pane_actions)) and `CommandAction::parse`,
/// which maps a table name to its variant (`None` for any other name).
#[macro_export]
#[doc(hidden)]
macro_rules! pane_action_enum {
    // The second form, for overlays and panes that are not lists (help,
    // palette, editor): `enum HelpAction in "help", no nav;` declares the
    // enum and table of exactly the listed entries.
    (
        $(#[$m:meta])*
        $vis:vis enum $E:ident in $id:literal, no nav;
        $($V:ident => act($name:literal, $ctx:expr, $desc:literal, $keys:expr, $danger:expr, $hint:expr)),* $(,)?
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $E {
            $(#[doc = $desc] $V,)*
        }

        impl $E {
            /// The action table: one entry per variant, in order.
            pub const TABLE: &'static [$crate::tui::keymap::ActionSpec] = &[
                $($crate::tui::pane::act($name, $ctx, $desc, $keys, $danger, $hint)),*
            ];

            /// The variant of the table entry named `name`; `None` when the
            /// table has no such entry.
            pub fn parse(name: &str) -> Option<Self> {
                Some(match name {
                    $($name => Self::$V,)*
                    _ => return None,
                })
            }
        }
    };
    (
        $(#[$m:meta])*
        $vis:vis enum $E:ident in $id:literal;
        $($V:ident => act($name:literal, $ctx:expr, $desc:literal, $keys:expr, $danger:expr, $hint:expr)),* $(,)?
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $E {
            $(#[doc = $desc] $V,)*
            /// A list navigation verb (`<id>.down`, `<id>.top`, …).
            Nav($crate::tui::pane::Nav),
        }

        impl $E {
            /// The action table: one entry per variant, in order, then the
            /// navigation entries.
            pub const TABLE: &'static [$crate::tui::keymap::ActionSpec] = $crate::pane_actions!($id;
                $($crate::tui::pane::act($name, $ctx, $desc, $keys, $danger, $hint)),*
            );

            /// The variant of the table entry named `name`; `None` when the
            /// table has no such entry.
            pub fn parse(name: &str) -> Option<Self> {
                use $crate::tui::pane::Nav;
                Some(match name {
                    $($name => Self::$V,)*
                    concat!($id, ".down") => Self::Nav(Nav::Down),
                    concat!($id, ".up") => Self::Nav(Nav::Up),
                    concat!($id, ".page_down") => Self::Nav(Nav::PageDown),
                    concat!($id, ".page_up") => Self::Nav(Nav::PageUp),
                    concat!($id, ".half_down") => Self::Nav(Nav::HalfDown),
                    concat!($id, ".half_up") => Self::Nav(Nav::HalfUp),
                    concat!($id, ".top") => Self::Nav(Nav::Top),
                    concat!($id, ".bottom") => Self::Nav(Nav::Bottom),
                    _ => return None,
                })
            }
        }
    };
}

/// The `Pane` methods every [`TaskPane`] writes the same way: `id` (its
/// [`TaskPane::ID`]), `on_task` (hands results to [`TaskPane::on_msg`]
/// through `deliver`) and `as_any_mut`; with `actions: XAction` also
/// `on_action`, which parses the name into the pane's action enum and
/// calls its typed handler `self.act(XAction, cx) -> bool`. Expands
/// inside `impl Pane for …`.
#[macro_export]
#[doc(hidden)]
macro_rules! task_pane_glue {
    (actions: $E:ty) => {
        $crate::task_pane_glue!();

        fn on_action(&mut self, action: &'static str, cx: &mut $crate::tui::pane::Ctx) -> bool {
            <$E>::parse(action).is_some_and(|a| self.act(a, cx))
        }
    };
    () => {
        fn id(&self) -> &'static str {
            <Self as $crate::tui::pane::TaskPane>::ID
        }

        fn on_task(
            &mut self,
            task: $crate::tui::action::TaskResult,
            cx: &mut $crate::tui::pane::Ctx,
        ) {
            $crate::tui::pane::deliver(self, task, cx);
        }

        fn as_any_mut(&mut self) -> &mut dyn ::std::any::Any {
            self
        }
    };
}

/// The keyboard half of a pane that lists through a
/// [`FilteredList`](crate::tui::widgets::filtered::FilteredList): expands,
/// inside `impl Pane for …`, to `text_input_active`, `blur`, `on_key` and
/// `on_paste`, which give the keys and pastes to the filter of field
/// `$list` while it is edited and then call `self.$refilter()` (the pane's
/// method that re-filters its rows). A paste re-filters even when the
/// filter did not take it, as every list pane always did.
#[macro_export]
#[doc(hidden)]
macro_rules! filtered_list_input {
    ($list:ident, $refilter:ident) => {
        fn text_input_active(&self) -> bool {
            self.$list.editing()
        }

        fn blur(&mut self) {
            self.$list.blur();
        }

        fn clear_filter(&mut self) -> bool {
            if self.$list.editing() || !self.$list.filter.active() {
                return false;
            }
            self.$list.filter.set("");
            self.$refilter();
            true
        }

        fn on_key(
            &mut self,
            key: &::ratatui::crossterm::event::KeyEvent,
            _cx: &mut $crate::tui::pane::Ctx,
        ) -> bool {
            let used = self.$list.key(key);
            if used {
                self.$refilter();
            }
            used
        }

        fn on_paste(&mut self, s: &str, _cx: &mut $crate::tui::pane::Ctx) -> bool {
            let used = self.$list.paste(s);
            self.$refilter();
            used
        }
    };
}
