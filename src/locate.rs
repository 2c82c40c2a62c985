//! Where the superchunk files of a dataset physically live, asked of the filesystem itself.
//!
//! On a GlusterFS mount the virtual extended attribute `glusterfs.pathinfo` names the brick
//! (server host and brick directory) that holds a file:
//!
//! ```text
//! (<DISTRIBUTE:blztest-dht> <POSIX(/bricks/b1):vm:/bricks/b1/ds/data/__1__.bin>)
//! ```
//!
//! On a local filesystem that attribute does not exist (`EOPNOTSUPP` or `ENODATA`); the file
//! is then reported on this machine's host name and the device its filesystem is mounted
//! from (`/proc/self/mountinfo`).
//!
//! [`locate_dataset`] works on any dataset directory (array, table, nested columns): it
//! locates every `__N__.bin` file below `data/`. [`group_by_location`] gathers files of one
//! location together, which is what [`crate::scan`] uses to read each host's files together.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The extended attribute GlusterFS answers with a file's brick.
pub(crate) const PATHINFO_XATTR: &str = "glusterfs.pathinfo";

/// Largest `glusterfs.pathinfo` value accepted (a file's is a few hundred bytes; a
/// directory's lists every brick).
const MAX_XATTR_LEN: usize = 1 << 20;

/// What kind of storage holds a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum LocationKind {
    /// A brick of a GlusterFS volume (from `glusterfs.pathinfo`).
    Gluster,
    /// A local filesystem on this machine.
    Local,
}

impl std::fmt::Display for LocationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LocationKind::Gluster => "gluster",
            LocationKind::Local => "local",
        })
    }
}

/// Where one file lives.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileLocation {
    /// The file, as given.
    pub path: PathBuf,
    /// The host that stores it: the brick server's own host name, or this machine's.
    pub host: String,
    /// The brick directory (GlusterFS) or the device the filesystem is mounted from (local,
    /// e.g. `/dev/vda1`, `tmpfs`, `overlay`).
    pub location: String,
    /// GlusterFS or local.
    pub kind: LocationKind,
    /// GlusterFS: the file's real path on the brick server. Local: the mount point of its
    /// filesystem.
    pub detail: PathBuf,
}

impl FileLocation {
    /// The key files are grouped by: host and brick (or device).
    pub fn key(&self) -> LocationKey {
        LocationKey {
            host: self.host.clone(),
            location: self.location.clone(),
        }
    }
}

/// A host and a brick or device: the unit [`group_by_location`] groups by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LocationKey {
    /// Host name.
    pub host: String,
    /// Brick directory or device.
    pub location: String,
}

impl std::fmt::Display for LocationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.location)
    }
}

/// One `<POSIX(brick root):host:path on brick>` entry of a `glusterfs.pathinfo` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathinfoEntry {
    /// The brick directory.
    pub brick_root: String,
    /// The brick server's host name.
    pub host: String,
    /// The file's path on the brick server.
    pub path: String,
}

/// Parses a `glusterfs.pathinfo` value (trailing NULs allowed) into its `POSIX` entries, in
/// order. A file on a distributed volume has exactly one; replicated volumes list one per
/// replica.
///
/// # Errors
/// [`Error::InvalidArgument`] when the value holds no well-formed `POSIX` entry or is not
/// UTF-8.
pub(crate) fn parse_pathinfo(raw: &[u8]) -> Result<Vec<PathinfoEntry>> {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let text = std::str::from_utf8(&raw[..end]).map_err(|_| bad_pathinfo(raw, "not UTF-8"))?;
    const TAG: &str = "<POSIX(";
    let mut entries = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(TAG) {
        rest = &rest[i + TAG.len()..];
        let close = rest
            .find(')')
            .ok_or_else(|| bad_pathinfo(raw, "unterminated POSIX(brick root)"))?;
        let brick_root = &rest[..close];
        let after = rest[close + 1..]
            .strip_prefix(':')
            .ok_or_else(|| bad_pathinfo(raw, "expected ':' after POSIX(...)"))?;
        let colon = after
            .find(':')
            .ok_or_else(|| bad_pathinfo(raw, "expected host:path"))?;
        let host = &after[..colon];
        let tail = &after[colon + 1..];
        let gt = tail
            .find('>')
            .ok_or_else(|| bad_pathinfo(raw, "unterminated POSIX entry"))?;
        let path = &tail[..gt];
        if brick_root.is_empty() || host.is_empty() || host.contains(['<', '>']) {
            return Err(bad_pathinfo(raw, "empty brick root or host"));
        }
        entries.push(PathinfoEntry {
            brick_root: brick_root.to_string(),
            host: host.to_string(),
            path: path.to_string(),
        });
        rest = &tail[gt + 1..];
    }
    if entries.is_empty() {
        return Err(bad_pathinfo(raw, "no POSIX entry"));
    }
    Ok(entries)
}

fn bad_pathinfo(raw: &[u8], why: &str) -> Error {
    let shown: String = String::from_utf8_lossy(raw).chars().take(200).collect();
    Error::InvalidArgument(format!(
        "unexpected {PATHINFO_XATTR} value ({why}): {shown:?}"
    ))
}

fn cpath(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidArgument(format!("{} contains a NUL byte", path.display())))
}

/// Reads extended attribute `name` of `path`: `Ok(None)` when the filesystem does not know
/// it (`EOPNOTSUPP`, `ENODATA`).
fn get_xattr(path: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let p = cpath(path)?;
    let n = CString::new(name).map_err(|_| Error::InvalidArgument("bad xattr name".into()))?;
    let absent = |e: &std::io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EOPNOTSUPP) | Some(libc::ENODATA)
        )
    };
    for _ in 0..4 {
        // SAFETY: both strings are NUL-terminated; a null buffer of size 0 asks for the size.
        let want = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
        if want < 0 {
            let e = std::io::Error::last_os_error();
            return if absent(&e) {
                Ok(None)
            } else {
                Err(Error::io("getxattr", path, e))
            };
        }
        let want = want as usize;
        if want > MAX_XATTR_LEN {
            return Err(Error::InvalidArgument(format!(
                "{}: {name} is {want} bytes, more than the {MAX_XATTR_LEN} accepted",
                path.display()
            )));
        }
        // Room for growth between the two calls.
        let mut buf = vec![0u8; want + 256];
        // SAFETY: `buf` has `buf.len()` writable bytes.
        let got = unsafe {
            libc::getxattr(
                p.as_ptr(),
                n.as_ptr(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        };
        if got >= 0 {
            buf.truncate(got as usize);
            return Ok(Some(buf));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) {
            continue; // it grew again: ask for the size anew
        }
        return if absent(&e) {
            Ok(None)
        } else {
            Err(Error::io("getxattr", path, e))
        };
    }
    Err(Error::InvalidArgument(format!(
        "{}: {name} keeps changing size",
        path.display()
    )))
}

/// This machine's host name.
pub fn hostname() -> String {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let s = s.trim();
        if !s.is_empty() {
            return s.to_string();
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` has 256 writable bytes; gethostname writes at most that many.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast::<libc::c_char>(), buf.len()) };
    if r == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        if end > 0 {
            return String::from_utf8_lossy(&buf[..end]).into_owned();
        }
    }
    "localhost".to_string()
}

/// One line of `/proc/self/mountinfo`: device, mount point, source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    major: u64,
    minor: u64,
    mount_point: PathBuf,
    source: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let (maj, min) = fields.get(2)?.split_once(':')?;
            let mount_point = PathBuf::from(unescape(fields.get(4)?));
            let sep = fields.iter().position(|&f| f == "-")?;
            let source = unescape(fields.get(sep + 2)?);
            Some(MountEntry {
                major: maj.parse().ok()?,
                minor: min.parse().ok()?,
                mount_point,
                source,
            })
        })
        .collect()
}

/// The mount holding `path`: the entry with the file's device whose mount point is the
/// longest prefix of the file's canonical path.
fn local_mount(path: &Path) -> Result<MountEntry> {
    let c = cpath(path)?;
    // SAFETY: an all-zero `stat` is a valid value; `stat` fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is writable.
    if unsafe { libc::stat(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io("stat", path, std::io::Error::last_os_error()));
    }
    let (major, minor) = (
        u64::from(libc::major(st.st_dev)),
        u64::from(libc::minor(st.st_dev)),
    );
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::io("read", "/proc/self/mountinfo", e))?;
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    parse_mountinfo(&text)
        .into_iter()
        .filter(|m| m.major == major && m.minor == minor)
        .max_by_key(|m| {
            (
                canon.starts_with(&m.mount_point),
                m.mount_point.as_os_str().len(),
            )
        })
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: device {major}:{minor} is not in /proc/self/mountinfo",
                path.display()
            ))
        })
}

/// Where `path` lives: the GlusterFS brick that holds it, or the local device.
///
/// # Errors
/// An I/O error (the file does not exist, ...), or a `glusterfs.pathinfo` value that does
/// not parse.
pub fn locate_file(path: impl AsRef<Path>) -> Result<FileLocation> {
    let path = path.as_ref();
    if let Some(raw) = get_xattr(path, PATHINFO_XATTR)? {
        let e = parse_pathinfo(&raw)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?
            .swap_remove(0);
        return Ok(FileLocation {
            path: path.to_path_buf(),
            host: e.host,
            location: e.brick_root,
            kind: LocationKind::Gluster,
            detail: PathBuf::from(e.path),
        });
    }
    let m = local_mount(path)?;
    Ok(FileLocation {
        path: path.to_path_buf(),
        host: hostname(),
        location: m.source,
        kind: LocationKind::Local,
        detail: m.mount_point,
    })
}

/// The number `N` of a superchunk file name `__N__.bin`.
pub(crate) fn superchunk_number(name: &str) -> Option<u64> {
    name.strip_prefix("__")?
        .strip_suffix("__.bin")?
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
}

/// Every superchunk file (`__N__.bin`) below `root/data`, directories in name order and
/// files in number order within each.
///
/// # Errors
/// An I/O error listing a directory; [`Error::InvalidMetadata`] when `root/data` is missing;
/// [`Error::Unsupported`] for an `s3://` URL.
pub(crate) fn superchunk_files(root: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
    if crate::storage::is_url(root.as_ref()) {
        return Err(Error::unsupported(
            root,
            "a dataset on an object store has no file placement to locate: its objects \
             live wherever the store keeps them",
        ));
    }
    let data = root.as_ref().join("data");
    if !data.is_dir() {
        return Err(Error::metadata(
            &data,
            "not a blz dataset (no data directory)",
        ));
    }
    let mut out = Vec::new();
    walk(&data, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ft = entry.file_type().map_err(|e| Error::io("stat", dir, e))?;
        if ft.is_dir() {
            dirs.push(name);
        } else if let Some(n) = superchunk_number(&name) {
            files.push((n, entry.path()));
        }
    }
    files.sort();
    out.extend(files.into_iter().map(|(_, p)| p));
    dirs.sort();
    for d in dirs {
        walk(&dir.join(d), out)?;
    }
    Ok(())
}

/// Locates every superchunk file of the dataset (array or table) at `root`.
///
/// # Errors
/// As [`superchunk_files`] and [`locate_file`].
pub fn locate_dataset(root: impl AsRef<Path>) -> Result<Vec<FileLocation>> {
    superchunk_files(root)?.iter().map(locate_file).collect()
}

/// Groups located files by host and brick (or device), keys in order; the indices point
/// into `locs`.
pub fn group_by_location(locs: &[FileLocation]) -> Vec<(LocationKey, Vec<usize>)> {
    let mut map: std::collections::BTreeMap<LocationKey, Vec<usize>> = Default::default();
    for (i, l) in locs.iter().enumerate() {
        map.entry(l.key()).or_default().push(i);
    }
    map.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &[u8] = b"(<DISTRIBUTE:blztest-dht> <POSIX(/var/lib/blz-gluster/bricks/b1):vm:/var/lib/blz-gluster/bricks/b1/dir/__1__.bin>)\x00";
    const DIR: &str = "((<DISTRIBUTE:blztest-dht> <POSIX(/var/lib/blz-gluster/bricks/b1):vm:/var/lib/blz-gluster/bricks/b1/dir> <POSIX(/var/lib/blz-gluster/bricks/b3):vm:/var/lib/blz-gluster/bricks/b3/dir> <POSIX(/var/lib/blz-gluster/bricks/b2):vm:/var/lib/blz-gluster/bricks/b2/dir>) (blztest-dht-layout (blztest-client-0 0 1431655764) (blztest-client-1 1431655765 2863311529) (blztest-client-2 2863311530 4294967295)))";

    #[test]
    fn file_pathinfo() {
        let e = parse_pathinfo(FILE).unwrap();
        assert_eq!(
            e,
            vec![PathinfoEntry {
                brick_root: "/var/lib/blz-gluster/bricks/b1".into(),
                host: "vm".into(),
                path: "/var/lib/blz-gluster/bricks/b1/dir/__1__.bin".into(),
            }]
        );
        // without the trailing NUL too
        assert_eq!(parse_pathinfo(&FILE[..FILE.len() - 1]).unwrap(), e);
    }

    #[test]
    fn dir_pathinfo_lists_every_brick() {
        let e = parse_pathinfo(DIR.as_bytes()).unwrap();
        let roots: Vec<&str> = e.iter().map(|x| x.brick_root.as_str()).collect();
        assert_eq!(
            roots,
            [
                "/var/lib/blz-gluster/bricks/b1",
                "/var/lib/blz-gluster/bricks/b3",
                "/var/lib/blz-gluster/bricks/b2"
            ]
        );
        assert!(e.iter().all(|x| x.host == "vm"));
        assert_eq!(e[1].path, "/var/lib/blz-gluster/bricks/b3/dir");
    }

    #[test]
    fn malformed_pathinfo_is_an_error() {
        for bad in [
            &b""[..],
            b"\0",
            b"(<DISTRIBUTE:blztest-dht>)",
            b"<POSIX(",
            b"<POSIX(/b1",
            b"<POSIX(/b1)",
            b"<POSIX(/b1)vm:/x>",
            b"<POSIX(/b1):vm",
            b"<POSIX(/b1):vm:/b1/x",
            b"<POSIX():vm:/x>",
            b"<POSIX(/b1)::/x>",
            b"\xff\xfe<POSIX(/b1):vm:/x>",
            b"<POSIX(/b1):vm:/x> <POSIX(",
        ] {
            assert!(
                parse_pathinfo(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn mountinfo_lines() {
        let t = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                 30 22 0:25 / /mnt/with\\040space rw - tmpfs tmpfs rw\n\
                 garbage line\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].major, m[0].minor), (254, 0));
        assert_eq!(m[0].source, "/dev/vda");
        assert_eq!(m[1].mount_point, PathBuf::from("/mnt/with space"));
    }

    #[test]
    fn local_file_is_local() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("__1__.bin");
        std::fs::write(&f, b"x").unwrap();
        let l = locate_file(&f).unwrap();
        assert_eq!(l.kind, LocationKind::Local);
        assert_eq!(l.host, hostname());
        assert!(!l.location.is_empty());
        assert!(locate_file(dir.path().join("missing")).is_err());
    }

    #[test]
    fn superchunk_names_sort_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("data");
        std::fs::create_dir_all(d.join("b").join("c")).unwrap();
        for n in ["__10__.bin", "__2__.bin", "__1__.bin", "x.tmp", "__0__.bin"] {
            std::fs::write(d.join(n), b"").unwrap();
        }
        std::fs::write(d.join("b").join("c").join("__1__.bin"), b"").unwrap();
        let files = superchunk_files(dir.path()).unwrap();
        let rel: Vec<String> = files
            .iter()
            .map(|p| p.strip_prefix(&d).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            ["__1__.bin", "__2__.bin", "__10__.bin", "b/c/__1__.bin"]
        );
        let locs = locate_dataset(dir.path()).unwrap();
        assert_eq!(group_by_location(&locs).len(), 1);
    }
}
