//! The file scripts: bodies for [`op_script`](super::confine::op_script),
//! which first resolves and checks each path (`$P1`, `$P2`); `$1`, `$2`
//! are the operation's other arguments. POSIX `sh` with `stat -c`, `head`,
//! `tail`, `ln`, `mv` (GNU coreutils and BusyBox alike). Exit codes are
//! those of [`super::codes`].

/// Read: `$P1` the file (followed); `$1 $2` offset and length, or `- -`
/// for the whole file.
pub(crate) const READ: &str = r#"p=$P1
if [ ! -e "$p" ]; then exit 10; fi
if [ -d "$p" ]; then exit 11; fi
if [ "$1" = - ]; then exec cat -- "$p"; fi
if [ "$2" = 0 ]; then exit 0; fi
tail -c +"$(($1 + 1))" -- "$p" | head -c "$2""#;

/// Write from stdin: `$P1` the file (followed), `$1` byte count or `-`
/// (until EOF), `$2` `w` (atomic replace through a temp file and `mv`) or
/// `a` (append). Parents are created. A link is written through (its
/// target replaced, as a local write would).
///
/// An append is line-safe (the `Sandbox::append` contract): `$3` `nl`
/// says the data ends in a newline, and then a file whose last byte is not
/// one (a torn record) gets a `\n` first; a failed or short append
/// truncates the file back to its old length (`truncate`, or `dd` where
/// there is none). Limit: the old length is taken without a lock, so this
/// relies on the caller serialising appends to one file, as the engine
/// does.
///
/// A replaced file keeps its mode (the temp file takes it before the
/// `mv`); a new one has the shell's umask applied, as any new file.
pub(crate) const WRITE: &str = r#"p=$P1
d=${p%/*}; d=${d:-/}
if [ -d "$p" ]; then exit 11; fi
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
if [ "$2" = a ]; then
  old=0; if [ -f "$p" ]; then old=$(($(wc -c < "$p"))) || exit 1; fi
  back() { truncate -s "$old" -- "$p" 2>/dev/null || dd if=/dev/null of="$p" bs=1 seek="$old" 2>/dev/null; }
  if [ "$old" -gt 0 ] && [ "$3" = nl ] && [ -n "$(tail -c 1 -- "$p")" ]; then
    printf '\n' >> "$p" || { back; exit 1; }
    old2=$((old + 1))
  else old2=$old; fi
  if [ "$1" = - ]; then cat >> "$p" || { back; exit 1; }; echo "$old2"; exit 0; fi
  head -c "$1" >> "$p" || { back; exit 1; }
  if [ "$(($(wc -c < "$p")))" -lt "$((old2 + $1))" ]; then back; exit 15; fi
  echo "$old2"; exit 0
fi
tmp="$d/.wsbench-tmp-$$"
if [ "$1" = - ]; then cat > "$tmp" || { rm -f -- "$tmp"; exit 1; }
else
  head -c "$1" > "$tmp" || { rm -f -- "$tmp"; exit 1; }
  if [ "$(wc -c < "$tmp")" -ne "$1" ]; then rm -f -- "$tmp"; exit 15; fi
fi
if [ -e "$p" ]; then m=$(stat -L -c %a -- "$p" 2>/dev/null) && chmod "$m" -- "$tmp"; fi
mv -f -- "$tmp" "$p""#;

/// Exclusive create: `$P1` a temp name next to the target, `$P2` the
/// target (neither followed: a link there, even dangling, takes the
/// name); `$1` the byte count to take from stdin into the temp file, or
/// `-` when the caller has already uploaded it there. The temp file is
/// then hard-linked into place, which fails atomically when the name is
/// taken; the temp name is always removed. Parents are created.
pub(crate) const CREATE_NEW: &str = r#"t=$P1 p=$P2
if [ -e "$p" ] || [ -L "$p" ]; then rm -f -- "$t"; exit 13; fi
d=${p%/*}; d=${d:-/}
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
if [ "$1" != - ]; then
  head -c "$1" > "$t" || { rm -f -- "$t"; exit 1; }
  if [ "$(wc -c < "$t")" -ne "$1" ]; then rm -f -- "$t"; exit 15; fi
fi
if ln -- "$t" "$p" 2>/dev/null; then rm -f -- "$t"; exit 0; fi
rm -f -- "$t"
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
exit 1"#;

/// Shell functions of [`list`] and [`stat`]: the stat format (raw mode in
/// hex, size, mtime in nanoseconds where `stat` knows `%.9Y`, as GNU does;
/// whole seconds on BusyBox), and `rec P NAME`, which prints one record
/// of five NUL-terminated fields (stat line, name, link target, target is
/// a directory, target size; see [`super::parse::records`]). A link's
/// target kind and size are given only when the link stays in the
/// workspace: a link out of it reveals nothing about its target, as on
/// the host backends.
const STAT_PRELUDE: &str = r#"case $(stat -c %.9Y / 2>/dev/null) in
  *.*) F='%f %s %.9Y' ;;
  *) F='%f %s %Y' ;;
esac
rec() {
  s=$(stat -c "$F" -- "$1") || return 0
  t= ts= td=0
  if [ -L "$1" ]; then
    t=$(readlink -- "$1" && echo .); t=${t%?.}
    if confined "$1" f; then
      [ -d "$1" ] && td=1
      ts=$(stat -L -c %s -- "$1" 2>/dev/null)
    fi
  fi
  printf '%s\0%s\0%s\0%s\0%s\0' "$s" "$2" "$t" "$td" "$ts"
}
"#;

/// Listing: `$P1` the directory (followed); one record per entry, dot
/// files included.
pub(crate) fn list() -> String {
    format!(
        r#"{STAT_PRELUDE}d=$P1
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
cd -- "$d" || exit 1
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then rec "$d/$f" "$f"; fi
done"#
    )
}

/// Stat: `$P1` the entry (not followed), `$1` the name to report.
pub(crate) fn stat() -> String {
    format!(
        r#"{STAT_PRELUDE}if [ ! -e "$P1" ] && [ ! -L "$P1" ]; then exit 10; fi
rec "$P1" "$1""#
    )
}

/// Remove: `$P1` the entry (not followed: a link is removed, never what
/// it points to); `$1` `r` for recursive. The workspace root itself is
/// refused.
pub(crate) const REMOVE: &str = r#"p=$P1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 10; fi
if [ "$p" = "$W" ] || [ "$p" = "$Wr" ]; then exit 17; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$1" = r ]; then rm -rf -- "$p"; exit $?; fi
  if [ -n "$(ls -A -- "$p")" ]; then exit 14; fi
  rmdir -- "$p"; exit $?
fi
rm -f -- "$p""#;

/// Rename: `$P1` source, `$P2` target (neither followed), with
/// `rename(2)`'s rules: a link at the target is replaced, not moved into
/// (`mv` alone would move into the directory it points to, which may be
/// outside); a directory replaces an empty directory; a non-directory
/// onto a directory is exit 11. The target's parent is created; the
/// workspace root is never moved or replaced.
pub(crate) const RENAME: &str = r#"a=$P1 b=$P2
if [ ! -e "$a" ] && [ ! -L "$a" ]; then exit 10; fi
for x in "$a" "$b"; do
  if [ "$x" = "$W" ] || [ "$x" = "$Wr" ]; then exit 17; fi
done
if [ "$a" = "$b" ]; then exit 0; fi
if [ -d "$b" ] && [ ! -L "$b" ]; then
  if [ ! -d "$a" ] || [ -L "$a" ]; then exit 11; fi
  rmdir -- "$b" 2>/dev/null || exit 14
fi
if [ -L "$b" ]; then rm -f -- "$b" || exit 1; fi
d=${b%/*}; d=${d:-/}
mkdir -p -- "$d" 2>/dev/null || { [ -d "$d" ] || exit 12; }
mv -f -- "$a" "$b""#;

/// Mkdir: `$P1` the directory (followed: through a link that stays in
/// the workspace, where it points); `$1` `p` for parents.
pub(crate) const MKDIR: &str = r#"p=$P1
if [ -d "$p" ]; then if [ "$1" = p ]; then exit 0; fi; exit 13; fi
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
if [ "$1" = p ]; then mkdir -p -- "$p" || exit 12; exit 0; fi
d=${p%/*}; d=${d:-/}
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
mkdir -- "$p""#;

// Bodies of the link check alone (`ops::resolve`), for backends whose
// own file API does the operation: each prints `$P1`, NUL-terminated,
// then the names of links it reports, each NUL-terminated. Nothing goes
// to stderr, which Daytona's execute mode merges into stdout.

/// The path alone (read, write).
pub(crate) const RESOLVE: &str = r#"printf '%s\0' "$P1""#;

/// A directory (followed), then the names of its entries that are links
/// leading out of the workspace: a native listing would describe their
/// targets.
pub(crate) const RESOLVE_LIST: &str = r#"exec 2>/dev/null
printf '%s\0' "$P1"
for l in "$P1"/* "$P1"/.*; do
  [ -L "$l" ] || continue
  confined "$l" f || printf '%s\0' "${l##*/}"
done
exit 0"#;

/// An entry (not followed), then `out` when it is a link leading out of
/// the workspace.
pub(crate) const RESOLVE_STAT: &str = r#"exec 2>/dev/null
printf '%s\0' "$P1"
if [ -L "$P1" ] && ! confined "$P1" f; then printf 'out\0'; fi
exit 0"#;
