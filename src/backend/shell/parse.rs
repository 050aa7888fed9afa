//! Parsing what the list and stat scripts print.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::backend::{FileKind, FileStat};

/// Parses the records of the list and stat scripts
/// ([`super::scripts::list`], [`super::scripts::stat`]): five
/// NUL-terminated fields each — `"<mode hex> <size> <mtime>"` (mtime in
/// seconds, with up to nine decimals), the name, a link's target, `1`
/// when a link's target is a directory, a link's target size (empty when
/// the target is missing or out of the workspace). Malformed records are
/// skipped; a trailing partial one ends the list.
pub(crate) fn records(out: &[u8]) -> Vec<FileStat> {
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    let mut stats = Vec::new();
    for rec in fields.chunks(5) {
        if rec.len() < 5 {
            break;
        }
        let head = String::from_utf8_lossy(rec[0]);
        let mut it = head.split_ascii_whitespace();
        let (Some(mode), Some(size), Some(mtime)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(mode) = u32::from_str_radix(mode, 16) else {
            continue;
        };
        let kind = match mode & 0o170000 {
            0o040000 => FileKind::Dir,
            0o100000 => FileKind::File,
            0o120000 => FileKind::Symlink,
            _ => FileKind::Other,
        };
        let modified = mtime
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| {
                // Split to keep nanoseconds exact for large epochs.
                let (secs, frac) = match mtime.split_once('.') {
                    Some((a, b)) => (a.parse().unwrap_or(s as u64), b),
                    None => (s as u64, ""),
                };
                let nanos: u32 = format!("{frac:0<9}")[..9].parse().unwrap_or(0);
                UNIX_EPOCH + Duration::new(secs, nanos)
            });
        let link_target =
            (kind == FileKind::Symlink).then(|| String::from_utf8_lossy(rec[2]).into_owned());
        let target_size = String::from_utf8_lossy(rec[4]).trim().parse().ok();
        let own_size = size.parse().unwrap_or(0);
        stats.push(FileStat {
            name: String::from_utf8_lossy(rec[1]).into_owned(),
            kind,
            // As the host backends report: a file's own size, a link's
            // target's (0 when the target is missing or out of the
            // workspace), 0 for anything else (a directory's block size
            // tells nothing).
            size: match kind {
                FileKind::File => own_size,
                FileKind::Symlink => target_size.unwrap_or(0),
                _ => 0,
            },
            modified: modified
                .or(Some(SystemTime::UNIX_EPOCH))
                .filter(|t| *t > UNIX_EPOCH),
            link_target,
            target_is_dir: rec[3] == b"1",
            mode: Some(mode & 0o7777),
        });
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_files_dirs_and_links() {
        let mut out = Vec::new();
        for (head, name, target, td, ts) in [
            ("81a4 5 1700000000.123456789", "a.txt", "", "0", ""),
            ("41ed 4096 1700000001", "dir", "", "0", ""),
            ("a1ff 3 1700000002.5", "ln", "dir", "1", "4096"),
            ("81a4 0 1700000003", "we\nird|name", "", "0", ""),
        ] {
            for f in [head, name, target, td, ts] {
                out.extend_from_slice(f.as_bytes());
                out.push(0);
            }
        }
        let v = records(&out);
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].kind, FileKind::File);
        assert_eq!(v[0].size, 5);
        assert_eq!(v[0].mode, Some(0o644));
        assert_eq!(
            v[0].modified.unwrap(),
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
        );
        assert_eq!(v[1].kind, FileKind::Dir);
        assert_eq!(v[2].kind, FileKind::Symlink);
        assert!(v[2].target_is_dir && v[2].is_dir_like());
        assert_eq!(v[2].link_target.as_deref(), Some("dir"));
        assert_eq!(v[2].size, 4096);
        assert_eq!(
            v[2].modified.unwrap(),
            UNIX_EPOCH + Duration::new(1_700_000_002, 500_000_000)
        );
        assert_eq!(v[3].name, "we\nird|name");
    }
}
